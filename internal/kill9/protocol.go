package kill9

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// Environment of a child process.
const (
	// ChildEnv, when set, makes the test binary run RunChild instead of
	// its tests.
	ChildEnv = "BUCKETLOG_KILL9_CHILD"
	// ConfigEnv carries the child's ChildConfig as JSON.
	ConfigEnv = "BUCKETLOG_KILL9_CONFIG"
	// reportFD is the child's report pipe (the first of exec.Cmd.ExtraFiles).
	reportFD = 3
)

// ChildLifetime bounds a child that nobody killed: it exits on its own
// after this long, so a harness bug never leaves a writer running.
const ChildLifetime = 3 * time.Minute

// Consumers of the workload. FastConsumer acks everything it pulls;
// LagConsumer pulls rarely and acks in small steps, so it bounds GC.
const (
	FastConsumer = "fast"
	LagConsumer  = "lag"
)

// ChildConfig is what the parent tells a child to do.
type ChildConfig struct {
	Run       int    `json:"run"`
	Dir       string `json:"dir"`
	BucketURL string `json:"bucket_url,omitempty"`
	Sync      bool   `json:"sync,omitempty"`
	Writers   int    `json:"writers"`
	// BatchEvery makes one operation in BatchEvery an AppendBatch (0: none).
	BatchEvery      int           `json:"batch_every"`
	WriterPause     time.Duration `json:"writer_pause"`
	SegmentMaxBytes int64         `json:"segment_max_bytes"`
	SealMaxAge      time.Duration `json:"seal_max_age"`
	TailInterval    time.Duration `json:"tail_interval"`
	SyncWait        time.Duration `json:"sync_wait"`
	GC              bool          `json:"gc,omitempty"`
	GCInterval      time.Duration `json:"gc_interval"`
	MaxRetained     int           `json:"max_retained"`
	Seed            uint64        `json:"seed"`
	// Red runs the red-control workload instead: a burst, an explicit
	// shipment (with a bucket), a second burst, then "B" and idle.
	Red      bool `json:"red,omitempty"`
	RedBurst int  `json:"red_burst,omitempty"`
}

func (c ChildConfig) encode() (string, error) {
	b, err := json.Marshal(c)
	return string(b), err
}

func decodeChildConfig(s string) (ChildConfig, error) {
	var c ChildConfig
	if s == "" {
		return c, errors.New("kill9: no child configuration in " + ConfigEnv)
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return c, fmt.Errorf("kill9: child configuration: %w", err)
	}
	if c.Dir == "" || c.Writers < 1 {
		return c, fmt.Errorf("kill9: child configuration needs a dir and at least one writer: %+v", c)
	}
	return c, nil
}

// Ident names one event of the workload: the child incarnation (run), the
// writing goroutine and its counter. Writer 0 is the seed event a child
// writes into an empty store.
type Ident struct {
	Run, Writer, N int
}

// TransactionID is the event's transaction id; the parent parses the
// identity back from it.
func (id Ident) TransactionID() string {
	return fmt.Sprintf("t-%d-%d-%d", id.Run, id.Writer, id.N)
}

// ExecutionID spreads each run's events over a few executions.
func (id Ident) ExecutionID() string {
	return fmt.Sprintf("x-%d-%d", id.Run, id.Writer%5)
}

// payloadAlphabet mixes ASCII, the characters a JSON encoder likes to
// escape, and multi-byte UTF-8 (U+2028 included), so byte-for-byte
// comparison also checks the frame codec.
var payloadAlphabet = []string{"a", "b", "c", " ", "<", ">", "&", `"`, `\`, "é", "日本", "—", "\u2028", "0", "7", "z", "\t"}

// Payload is the deterministic payload of an event: its identity in clear,
// then 0–199 characters drawn from a generator seeded by the identity.
func Payload(id Ident) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d", id.Run, id.Writer, id.N)
	x := h.Sum64()
	n := int(x % 200)
	var b strings.Builder
	fmt.Fprintf(&b, "r%d w%d n%d|", id.Run, id.Writer, id.N)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
		b.WriteString(payloadAlphabet[(x>>33)%uint64(len(payloadAlphabet))])
	}
	return b.String()
}

// ParseTransactionID returns the identity a TransactionID encodes.
func ParseTransactionID(s string) (Ident, bool) {
	rest, ok := strings.CutPrefix(s, "t-")
	if !ok {
		return Ident{}, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return Ident{}, false
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Ident{}, false
		}
		v[i] = n
	}
	return Ident{Run: v[0], Writer: v[1], N: v[2]}, true
}

// Line is one parsed report line.
type Line struct {
	Kind     byte // A N c C T O R B F E
	Seq      uint64
	ID       Ident
	Consumer string
	Text     string // F and E messages, O details
}

// ParseLine parses one report line (without its newline).
func ParseLine(s string) (Line, error) {
	if s == "" {
		return Line{}, errors.New("kill9: empty report line")
	}
	f := strings.Fields(s)
	l := Line{Kind: s[0]}
	bad := func() (Line, error) { return Line{}, fmt.Errorf("kill9: malformed report line %q", s) }
	if len(f[0]) != 1 {
		return bad()
	}
	num := func(i int) (uint64, bool) {
		if i >= len(f) {
			return 0, false
		}
		n, err := strconv.ParseUint(f[i], 10, 64)
		return n, err == nil
	}
	switch l.Kind {
	case 'A', 'N':
		if len(f) != 5 {
			return bad()
		}
		var v [4]uint64
		for i := range v {
			n, ok := num(i + 1)
			if !ok {
				return bad()
			}
			v[i] = n
		}
		l.Seq, l.ID = v[0], Ident{Run: int(v[1]), Writer: int(v[2]), N: int(v[3])}
	case 'c', 'C':
		n, ok := num(2)
		if len(f) != 3 || !ok {
			return bad()
		}
		l.Consumer, l.Seq = f[1], n
	case 'T':
		n, ok := num(1)
		if len(f) != 2 || !ok {
			return bad()
		}
		l.Seq = n
	case 'R', 'B':
		if len(f) != 1 {
			return bad()
		}
	case 'O', 'F', 'E':
		l.Text = strings.TrimSpace(s[1:])
	default:
		return bad()
	}
	return l, nil
}

func appendLine(dst []byte, kind byte, seq uint64, id Ident) []byte {
	dst = append(dst, kind, ' ')
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(id.Run), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(id.Writer), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(id.N), 10)
	return append(dst, '\n')
}
