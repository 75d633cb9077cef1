package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/drives"
)

func main() {
	// SIGHUP and SIGINT stop like SIGTERM (drain, last shipment, an exit
	// code that says whether the bucket holds everything).
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// stopSignals end a command the orderly way.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// command is one subcommand. Every file of this package adds its commands
// from an init function with register; the top-level help lists them all.
type command struct {
	// name is the word after "bucketlog" ("append", "selfcheck").
	name string
	// summary is one line for the top-level help.
	summary string
	// group orders the top-level help: commands of a lower group come
	// first (groupLog, groupBucket, groupDrive, groupServer).
	group int
	// run executes the command with the arguments after its name and
	// returns the process exit code. It writes one JSON object on c.stdout
	// (c.emit, c.fail) and everything else on c.stderr.
	run func(c *cli, args []string) int
}

// Groups of the top-level help.
const (
	groupLog = iota
	groupBucket
	groupServer
	groupDrive
)

var groupTitles = map[int]string{
	groupLog:    "Log commands (one shard directory)",
	groupBucket: "Bucket commands",
	groupServer: "Server and self-checks",
	groupDrive:  "Drives (self-contained scenarios that print a report and exit 0 only when it holds)",
}

// registry holds every command by name. It is written only by init
// functions (through register) and read after main starts, so it needs no
// lock.
var registry = map[string]command{}

// register adds a command. A duplicate or malformed registration is a
// programming error in this package and stops the program at start-up.
func register(cmd command) {
	if cmd.name == "" || cmd.run == nil {
		panic("bucketlog: register needs a name and a run function")
	}
	if _, dup := registry[cmd.name]; dup {
		panic(fmt.Sprintf("bucketlog: command %q registered twice", cmd.name))
	}
	registry[cmd.name] = cmd
}

// commands returns the registered commands in help order.
func commands() []command {
	out := make([]command, 0, len(registry))
	for _, c := range registry {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b command) int {
		if a.group != b.group {
			return a.group - b.group
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// cli is what a command runs with: the process's streams, environment and
// context, and a logger that writes to stderr (never stdout, which carries
// the one JSON object).
type cli struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	log    *slog.Logger
	// name is the command being run, for messages ("" before one is
	// chosen).
	name string
	// logLevel is --log-level (nil: the command's default); logJSON is
	// --log-format json.
	logLevel *slog.Level
	logJSON  bool
}

// run is main without the process: it dispatches args to a command and
// returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, log: logger}
	if len(args) == 0 {
		return c.fail(usagef("no command given (bucketlog help lists them)"))
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" {
			if cmd, ok := registry[args[1]]; ok {
				c.name = cmd.name
				return cmd.run(c, []string{"--help"})
			}
			return c.fail(usagef("unknown command %q (bucketlog help lists them)", args[1]))
		}
		topUsage(stdout)
		return 0
	case "--version", "-version":
		if len(args) > 1 {
			return c.fail(usagef("--version takes no arguments"))
		}
		return c.emit(buildVersion())
	}
	cmd, ok := registry[args[0]]
	if !ok {
		return c.fail(usagef("unknown command %q (bucketlog help lists them)", args[0]))
	}
	c.name = cmd.name
	return cmd.run(c, args[1:])
}

func topUsage(w io.Writer) {
	fmt.Fprintf(w, "bucketlog: a durable event log whose home is an object-store bucket.\n\n")
	fmt.Fprintf(w, "usage: bucketlog COMMAND [flags]     (bucketlog COMMAND --help for its flags and output)\n")
	group := -1
	for _, cmd := range commands() {
		if cmd.group != group {
			group = cmd.group
			fmt.Fprintf(w, "\n%s:\n", groupTitles[group])
		}
		fmt.Fprintf(w, "  %-36s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, "\n%s", exitCodesHelp)
}

const exitCodesHelp = `Every command prints one JSON object on stdout. On failure it also prints one
line on stderr, and the object carries "error" and "class" (and "owner_shard"
for not_owner). Exit codes:
  0 ok             1 invariant (a drive or verify found a problem)
  2 usage          3 invalid_state    4 invalid_input    5 storage
  6 not_owner      7 not_in_bucket (durable locally, not yet in the bucket)
`

// usagef returns a usage-class error (exit 2).
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", bucketlog.ErrUsage, fmt.Sprintf(format, args...))
}

// classify maps an error to its class token: the engine's classes, plus the
// refusals of the drives and of configuration that the engine does not see.
func classify(err error) string {
	switch {
	case err == nil:
		return bucketlog.ClassOK
	case errors.Is(err, drives.ErrUsage),
		errors.Is(err, affinity.ErrConfig), errors.Is(err, blobtier.ErrUnsupported):
		return bucketlog.ClassUsage
	}
	return bucketlog.Class(err)
}

// oneLine flattens a message so stderr gets exactly one line.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "; ")
	return strings.ReplaceAll(s, "\n", "; ")
}

// writeJSON writes v as one line of JSON, with <, > and & kept as they are
// (payloads are printed byte for byte).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// prog names the program and command in messages.
func (c *cli) prog() string {
	if c.name == "" {
		return "bucketlog"
	}
	return "bucketlog " + c.name
}

// emit prints the command's output object and returns exit code 0.
func (c *cli) emit(v any) int {
	if err := writeJSON(c.stdout, emptyLists(v)); err != nil {
		fmt.Fprintf(c.stderr, "%s: write the output: %s\n", c.prog(), oneLine(err.Error()))
		return exitCode(bucketlog.ClassStorage)
	}
	return 0
}

// fail reports err: one line on stderr, {"error","class"[,"owner_shard"]}
// on stdout; it returns the class's exit code.
func (c *cli) fail(err error) int {
	return c.failWith(nil, err)
}

// failWith reports err like fail, but the stdout object is report (a
// struct that marshals to a JSON object) with "error" and "class" (and
// "owner_shard" for not_owner) appended, so a failing drive or verify still
// prints everything it found, in its own field order and with exact numbers.
func (c *cli) failWith(report any, err error) int {
	class := classify(err)
	msg := cliMessage(err)
	fmt.Fprintf(c.stderr, "%s: %s\n", c.prog(), msg)
	var b strings.Builder
	body := "{}"
	if report != nil {
		var rb strings.Builder
		if merr := writeJSON(&rb, emptyLists(report)); merr == nil {
			if s := strings.TrimSpace(rb.String()); strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				body = s
			}
		}
	}
	b.WriteString(strings.TrimSuffix(body, "}"))
	if body != "{}" {
		b.WriteString(",")
	}
	fmt.Fprintf(&b, `"error":%s,"class":%s`, jsonString(msg), jsonString(class))
	if owner, ok := bucketlog.OwnerShard(err); ok && !hasKey(body, "owner_shard") {
		fmt.Fprintf(&b, `,"owner_shard":%d`, owner)
	}
	b.WriteString("}\n")
	if _, werr := io.WriteString(c.stdout, b.String()); werr != nil {
		fmt.Fprintf(c.stderr, "%s: write the output: %s\n", c.prog(), oneLine(werr.Error()))
	}
	return exitCode(class)
}

// cliMessage is err's message on one line without the engine's own
// "bucketlog: " prefix: the line on stderr already starts with the program
// name ("bucketlog scan: usage: …", never "bucketlog: bucketlog: usage: …").
func cliMessage(err error) string {
	return strings.TrimPrefix(oneLine(err.Error()), "bucketlog: ")
}

// hasKey reports whether the JSON object obj has a top-level key.
func hasKey(obj, key string) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal([]byte(obj), &top) != nil {
		return false
	}
	_, ok := top[key]
	return ok
}

// jsonString quotes s as a JSON string (no HTML escaping).
func jsonString(s string) string {
	var b strings.Builder
	_ = writeJSON(&b, s)
	return strings.TrimSuffix(b.String(), "\n")
}
