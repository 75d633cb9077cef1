package sections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/blobtier"
)

func init() {
	harness.Register(harness.Section{
		Name:    "lazyrestore",
		Doc:     "time for a fresh machine to become appendable (restore, open as owner, one acknowledged append) after 64 MiB and 640 MiB of retained history (8 and 80 with -quick) in in-process gofakes3: restore --lazy (8 MiB local: the newest segment) against the full restore; and a lazily restored reader's first per-execution read of a short execution, with the index objects against without",
		Default: false,
		Order:   43,
		Run:     runLazyRestore,
	})
}

// lazyBudget is the lazy restore's local budget: one default segment (the
// newest one is downloaded, every older one stays in the bucket).
const lazyBudget = restoreSegmentBytes

func runLazyRestore(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "lazyrestore"
	sizes := []int64{64 << 20, 640 << 20}
	if env.Quick {
		sizes = []int64{8 << 20, 80 << 20}
	}
	var out []harness.Row
	lazyRows := map[int64]harness.Row{}
	for _, target := range sizes {
		size := mibLabel(target)
		nameFull, nameLazy := size+"/full restore → appendable", size+"/restore --lazy → appendable"
		full, lazy, ex, err := lazyRestoreOne(ctx, env, target)
		if err != nil {
			out = append(out, harness.Failed(section, nameFull, "s", err), harness.Failed(section, nameLazy, "s", err))
			continue
		}
		rw := harness.Measured(section, size+"/first per-execution read after restore --lazy, index objects", "seconds", "s", ex.with,
			fmt.Sprintf("a %d-event execution of the history's middle, read-only reader: %s", needleEvents, ex.withNote))
		rwo := harness.Measured(section, size+"/first per-execution read after restore --lazy, no index objects", "seconds", "s", ex.without,
			"the same read with the index objects hidden (every remote segment fetched to build the index): "+ex.withoutNote)
		out = append(out, rw, rwo, harness.Ratio(section+"/ratio", size+"/per-execution read: index objects / none", rw, rwo, "lower is better"))
		rf := harness.Measured(section, nameFull, "seconds", "s", full, "Restore (every segment downloaded and verified), Open as owner, one Append")
		rl := harness.Measured(section, nameLazy, "seconds", "s", lazy, fmt.Sprintf("Restore with LazyBytes %s (older segments: one metadata read each), Open as owner, one Append", mibLabel(lazyBudget)))
		lazyRows[target] = rl
		out = append(out, rf, rl, harness.Ratio(section+"/ratio", size+"/lazy / full", rl, rf, "TARGET ≤ 0.05"))
	}
	if len(sizes) == 2 {
		out = append(out, harness.Ratio(section+"/ratio", "lazy "+mibLabel(sizes[1])+" / lazy "+mibLabel(sizes[0]),
			lazyRows[sizes[1]], lazyRows[sizes[0]], "flat as the history grows 10×: TARGET ≈ 1"))
	}
	return out, nil
}

// lazyRestoreOne builds a bucket of target bytes and times both ways to an
// appendable owner, alternating, env.Reps times each; then the first
// per-execution read of a lazily restored reader with and without index
// objects, alternating too.
func lazyRestoreOne(ctx context.Context, env *harness.Env, target int64) (full, lazy []float64, ex execReads, err error) {
	emu, err := buckets.StartS3()
	if err != nil {
		return nil, nil, ex, err
	}
	defer emu.Close()
	name, err := emu.NewBucket("lazy")
	if err != nil {
		return nil, nil, ex, err
	}
	bk, err := emu.Open(ctx, name)
	if err != nil {
		return nil, nil, ex, err
	}
	defer bk.Close()
	t0 := time.Now()
	rb, err := buildRestoreBucket(ctx, env, bk, target)
	if err != nil {
		return nil, nil, ex, fmt.Errorf("build the bucket: %w", err)
	}
	env.Logf("lazyrestore: built %d segment objects, %s, %d events in %v", len(rb.keys), mibLabel(rb.bytes), rb.tip, time.Since(t0).Round(time.Millisecond))
	src := newEventSource(BucketPayload, env.Executions)
	src.next = 1 << 41 // transaction ids the history does not hold (the window would answer them as retries)
	appendable := func(lazyBytes int64) (time.Duration, error) {
		root, err := tempDir(env.WorkDir, "lazyrestore-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(root)
		dir := filepath.Join(root, "d")
		t := time.Now()
		rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: bk, Dir: dir, LazyBytes: lazyBytes, Concurrency: restoreConcurrency})
		if err != nil {
			return 0, err
		}
		tRestore := time.Since(t)
		if lazyBytes > 0 && (rep.Lazy == nil || rep.Lazy.FullBecause != "") {
			return 0, fmt.Errorf("the lazy restore was not lazy: %+v", rep.Lazy)
		}
		l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, Bucket: bk, SegmentMaxBytes: restoreSegmentBytes, NoBackground: true,
			LocalRetentionBytes: max(lazyBytes, 0), Logger: warnLogger()})
		if err != nil {
			return 0, err
		}
		defer l.Close()
		tOpen := time.Since(t) - tRestore
		if err := appendEvents(ctx, l, src, 1); err != nil {
			return 0, err
		}
		d := time.Since(t)
		env.Logf("lazyrestore %s lazy=%v: %v (restore %v, open %v; %d segments local, %s downloaded)", mibLabel(target), lazyBytes > 0,
			d.Round(time.Millisecond), tRestore.Round(time.Millisecond), tOpen.Round(time.Millisecond), rep.Segments, mibLabel(rep.SegmentBytes))
		return d, nil
	}
	for rep := 0; rep < env.Reps; rep++ {
		for i := range 2 {
			lz := int64(0)
			if (rep+i)%2 == 1 {
				lz = lazyBudget
			}
			d, err := appendable(lz)
			if err != nil {
				return nil, nil, ex, err
			}
			if lz > 0 {
				lazy = append(lazy, d.Seconds())
			} else {
				full = append(full, d.Seconds())
			}
		}
	}
	ex, err = lazyExecReads(ctx, env, bk, rb)
	return full, lazy, ex, err
}

// execReads are the first per-execution reads of lazily restored readers.
type execReads struct {
	with, without         []float64
	withNote, withoutNote string
}

// hiddenIndexes is a bucket whose index objects read as absent.
type hiddenIndexes struct{ blobtier.Bucket }

func (h hiddenIndexes) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	if k, err := blobtier.ParseKey(key); err == nil && k.Kind == blobtier.KindIndex {
		return nil, blobtier.Meta{}, fmt.Errorf("%w: hidden by the bench", blobtier.ErrNotFound)
	}
	return h.Bucket.Get(ctx, key)
}

// lazyExecReads restores bk lazily (untimed), opens a read-only reader and
// times its first read of rb's needle execution, with the index objects
// and with them hidden, alternating, env.Reps times each.
func lazyExecReads(ctx context.Context, env *harness.Env, bk blobtier.Bucket, rb restoreBucket) (execReads, error) {
	var ex execReads
	one := func(useIndex bool) (time.Duration, string, error) {
		root, err := tempDir(env.WorkDir, "lazyread-")
		if err != nil {
			return 0, "", err
		}
		defer os.RemoveAll(root)
		dir := filepath.Join(root, "d")
		if _, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: bk, Dir: dir, LazyBytes: lazyBudget, Concurrency: restoreConcurrency}); err != nil {
			return 0, "", err
		}
		var b blobtier.Bucket = bk
		if !useIndex {
			b = hiddenIndexes{bk}
		}
		l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, Bucket: b, ReadOnly: true, Logger: warnLogger()})
		if err != nil {
			return 0, "", err
		}
		defer l.Close()
		t := time.Now()
		res, err := l.ReadExecution(ctx, rb.needle, 0, 2*needleEvents)
		d := time.Since(t)
		if err != nil {
			return 0, "", err
		}
		if len(res.Page.Records) != needleEvents {
			return 0, "", fmt.Errorf("the needle execution read %d events, want %d", len(res.Page.Records), needleEvents)
		}
		st := l.Store().RemoteStats()
		note := fmt.Sprintf("%d segments (%s) and %d index objects fetched", st.Fetches, mibLabel(st.FetchBytes), st.IndexFetches)
		env.Logf("lazyrestore per-execution read, index objects %v: %v, %s", useIndex, d.Round(time.Millisecond), note)
		return d, note, nil
	}
	for rep := 0; rep < env.Reps; rep++ {
		for i := range 2 {
			useIndex := (rep+i)%2 == 0
			d, note, err := one(useIndex)
			if err != nil {
				return ex, err
			}
			if useIndex {
				ex.with, ex.withNote = append(ex.with, d.Seconds()), note
			} else {
				ex.without, ex.withoutNote = append(ex.without, d.Seconds()), note
			}
		}
	}
	return ex, nil
}
