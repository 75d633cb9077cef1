package sections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	harness.Register(harness.Section{
		Name:    "memory",
		Doc:     "bucketlog index bytes per event and peak RSS (VmHWM, fresh process) holding -events events of 256 B over -executions executions, both indexes built",
		Default: true,
		Order:   30,
		Run:     runMemory,
	})
	harness.RegisterChild("memory-baseline", childBaseline)
	harness.RegisterChild("memory-bucketlog", childBucketlogIndex)
}

// memResult is what a memory child reports.
type memResult struct {
	VmHWMKB     int64  `json:"vm_hwm_kb"`
	VmRSSKB     int64  `json:"vm_rss_kb"`
	RssAnonKB   int64  `json:"rss_anon_kb"`
	RssFileKB   int64  `json:"rss_file_kb"`
	HeapSys     uint64 `json:"heap_sys"`
	HeapInuse   uint64 `json:"heap_inuse"`
	IndexBytes  int64  `json:"index_bytes"`
	Events      uint64 `json:"events"`
	ExecRecords int    `json:"exec_records"`
	Replayed    bool   `json:"replayed"`
}

func readProc(r *memResult) error {
	var err1, err2, err3, err4 error
	r.VmHWMKB, err1 = harness.ProcStatusKB("VmHWM")
	r.VmRSSKB, err2 = harness.ProcStatusKB("VmRSS")
	r.RssAnonKB, err3 = harness.ProcStatusKB("RssAnon")
	r.RssFileKB, err4 = harness.ProcStatusKB("RssFile")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapInuse = ms.HeapInuse
	r.HeapSys = ms.HeapSys
	return errors.Join(err1, err2, err3, err4)
}

// childBaseline measures the bench binary doing nothing, the floor under
// every memory child.
func childBaseline(_ []string, out io.Writer) error {
	var r memResult
	runtime.GC()
	if err := readProc(&r); err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(r)
}

// childBucketlogIndex opens the store as its owner would, forces the
// location index (a Scan) and the per-execution index (a ReadExecution),
// and reports the peak RSS of the process and the store's IndexBytes.
// Arguments: shard directory, an execution id present in the store.
func childBucketlogIndex(args []string, out io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("want: <store dir> <execution id>, got %q", args)
	}
	st, err := localseg.Open(args[0], localseg.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	var r memResult
	r.Replayed = st.OpenReport().Replayed
	pg, err := st.Scan(0, 10)
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	if len(pg.Records) == 0 {
		return errors.New("scan returned no records")
	}
	ex, err := st.ReadExecution(args[1], 0, 10)
	if err != nil {
		return fmt.Errorf("read execution: %w", err)
	}
	if len(ex.Records) == 0 {
		return fmt.Errorf("read execution %s returned no records", args[1])
	}
	r.ExecRecords = len(ex.Records)
	r.Events = st.Tip()
	runtime.GC()
	r.IndexBytes = st.IndexBytes()
	if err := readProc(&r); err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(r)
}

func runMemory(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "memory"
	n := env.Events
	label := fmt.Sprintf("%s events/%s execs", countLabel(n), countLabel(env.Executions))
	sys := targets.Systems()[0] // bucketlog
	dir, err := storeFixture(env, sys, n)
	if err != nil {
		return []harness.Row{harness.Failed(section, label, "index bytes/event", err)}, nil
	}
	var base, perEvent, indexMiB, hwm, rss, anon, file, heap, heapSys, hwmAbove []float64
	replayed := 0
	var failed error
	for range env.Reps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var b, r memResult
		if err := env.RunChild(ctx, "memory-baseline", nil, &b); err != nil {
			failed = err
			break
		}
		if err := env.RunChild(ctx, "memory-bucketlog", []string{targets.BucketlogStoreDir(dir), targets.ExecIDs(1)[0]}, &r); err != nil {
			failed = err
			break
		}
		if r.Events != uint64(n) {
			failed = fmt.Errorf("store holds %d events, want %d", r.Events, n)
			break
		}
		if r.Replayed {
			replayed++
		}
		base = append(base, kbToMiB(b.VmHWMKB))
		perEvent = append(perEvent, float64(r.IndexBytes)/float64(r.Events))
		indexMiB = append(indexMiB, float64(r.IndexBytes)/(1<<20))
		hwm = append(hwm, kbToMiB(r.VmHWMKB))
		rss = append(rss, kbToMiB(r.VmRSSKB))
		anon = append(anon, kbToMiB(r.RssAnonKB))
		file = append(file, kbToMiB(r.RssFileKB))
		heap = append(heap, float64(r.HeapInuse)/(1<<20))
		heapSys = append(heapSys, float64(r.HeapSys)/(1<<20))
		hwmAbove = append(hwmAbove, float64(r.VmHWMKB-b.VmHWMKB)*1024/float64(r.Events))
	}
	if failed != nil {
		return []harness.Row{harness.Failed(section, label, "index bytes/event", failed)}, nil
	}
	openNote := "open used the checkpoint; index built on first read"
	if replayed > 0 {
		openNote = fmt.Sprintf("open replayed in %d of %d reps", replayed, len(hwm))
	}
	return []harness.Row{
		harness.Measured(section, label+"/index bytes per event", "bytes/event", "bytes/event", perEvent, "Store.IndexBytes()/events after Scan + ReadExecution"),
		harness.Measured(section, label+"/index total", "MiB", "MiB", indexMiB, ""),
		harness.Measured(section, label+"/peak RSS (VmHWM)", "MiB", "MiB", hwm, openNote),
		harness.Measured(section, label+"/RSS after GC", "MiB", "MiB", rss, ""),
		harness.Measured(section, label+"/RSS after GC, anonymous", "MiB", "MiB", anon, "heap and stacks"),
		harness.Measured(section, label+"/RSS after GC, file-backed", "MiB", "MiB", file, "the binary and any mapped file"),
		harness.Measured(section, label+"/Go heap in use after GC", "MiB", "MiB", heap, ""),
		harness.Measured(section, label+"/Go heap obtained from the OS", "MiB", "MiB", heapSys, "HeapSys: the heap's high-water mark, less what was returned"),
		harness.Measured(section, label+"/peak RSS above baseline per event", "bytes/event", "bytes/event", hwmAbove, ""),
		harness.Measured(section, "baseline process peak RSS", "MiB", "MiB", base, "the bench binary doing nothing"),
	}, nil
}

func kbToMiB(kb int64) float64 { return float64(kb) / 1024 }
