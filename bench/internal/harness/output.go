package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one run as written to JSON.
type Result struct {
	Started  time.Time      `json:"started"`
	Elapsed  string         `json:"elapsed"`
	Machine  Machine        `json:"machine"`
	Config   map[string]any `json:"config"`
	Sections []string       `json:"sections"`
	// SectionLoad is the load average when each section started, to judge
	// whether the machine was quiet while it ran.
	SectionLoad map[string]string `json:"section_load"`
	Rows        []Row             `json:"rows"`
}

// WriteJSON writes r to path, creating its directory.
func WriteJSON(path string, r *Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// PrintHeader prints the machine facts that make the numbers comparable.
func PrintHeader(w io.Writer, m Machine, cfg map[string]any) {
	fmt.Fprintf(w, "machine: %s; %d cores; %s; %s\n", m.CPU, m.Cores, m.Kernel, m.GoVersion)
	same := "same filesystem as the tree"
	if !m.SameFSAsRepo {
		same = "NOT the filesystem of the tree"
	}
	fmt.Fprintf(w, "bench dir: %s (%s on %s, %s); memory %d MiB; load at start %s\n",
		m.Dir, m.FSType, m.Device, same, m.MemTotalKB/1024, m.LoadStart)
	if m.GitHead != "" {
		dirty := ""
		if m.GitDirty {
			dirty = " (working tree has uncommitted changes)"
		}
		fmt.Fprintf(w, "bucketlog tree: %s%s\n", m.GitHead, dirty)
	}
	var parts []string
	for _, k := range []string{"quick", "duration", "reps", "events", "executions", "writers", "payloads"} {
		if v, ok := cfg[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	fmt.Fprintf(w, "config: %s\n\n", strings.Join(parts, " "))
}

// PrintTable prints rows grouped by section: the median, its unit, the
// spread of the repetitions and the note.
func PrintTable(w io.Writer, rows []Row) {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	section := ""
	for _, r := range groupBySection(rows) {
		if r.Section != section {
			if section != "" {
				fmt.Fprintln(t, "\t\t\t\t")
			}
			section = r.Section
			fmt.Fprintf(t, "[%s]\tvalue\tunit\tspread (n)\tnote\n", section)
		}
		if r.Err != "" {
			fmt.Fprintf(t, "  %s\tERROR\t\t\t%s\n", r.Name, r.Err)
			continue
		}
		spread := ""
		if len(r.Reps) > 1 {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, x := range r.Reps {
				lo, hi = math.Min(lo, x), math.Max(hi, x)
			}
			spread = fmt.Sprintf("%s..%s (%d)", FormatNumber(lo), FormatNumber(hi), len(r.Reps))
		} else if len(r.Reps) == 1 {
			spread = "(1)"
		}
		unit := r.Unit
		if r.Metric != "" && !strings.HasPrefix(r.Metric, "ratio") && r.Metric != unit {
			unit = r.Metric
		}
		fmt.Fprintf(t, "  %s\t%s\t%s\t%s\t%s\n", r.Name, FormatNumber(r.Value), unit, spread, r.Note)
	}
	t.Flush()
}

// FormatNumber prints a value with precision that suits its size.
func FormatNumber(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "NaN"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// groupBySection orders rows by the first appearance of their section,
// keeping the order within a section, so a section that emits its ratio
// rows between measured rows still prints as one block.
func groupBySection(rows []Row) []Row {
	var order []string
	by := map[string][]Row{}
	for _, r := range rows {
		if _, ok := by[r.Section]; !ok {
			order = append(order, r.Section)
		}
		by[r.Section] = append(by[r.Section], r)
	}
	out := make([]Row, 0, len(rows))
	for _, s := range order {
		out = append(out, by[s]...)
	}
	return out
}
