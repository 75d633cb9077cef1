package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// world is everything one run owns: the simulated clock, the bucket (memcas
// under faultbucket), the current disk (a faultfs MemFS behind an injector)
// and the open Log, if any.
type world struct {
	root  string // a real, private directory: the MemFS paths live under it (see mirror)
	clock time.Time
	mu    sync.Mutex // guards clock (the engine reads it through Now)

	raw   *memcas.Bucket
	fb    *faultbucket.Bucket
	bkt   blobtier.Bucket
	rules map[int]int // faultbucket rule id → step it expires at

	disk  *faultfs.MemFS
	inj   *diskFault
	log   *bucketlog.Log
	sync  bool
	saved []*faultfs.MemFS // older copies of the disk
	fresh int              // restore directories made
	opens int              // Logs opened (a new one is read from the start)
	// bucketURL names the bucket the Log is opened with (the injected
	// bucket is what it talks to): bucket.json records it, so an open
	// naming another bucket must be refused (issue 12, finding 8).
	bucketURL string
	// The two-writer part (writers.go): live names the current owner's
	// directory under root ("" is "live"); view is the bucket as the Log
	// last opened sees it (per-writer hooks); nofence presents the bucket
	// as one that cannot fence (the RED control).
	live    string
	view    *writerView
	nofence bool
	evict   int64 // the local retention budget (evict.go)

	// lastIndex is the remote reads of the last lazily restored store
	// (index.go: its index objects used and refused).
	lastIndex localseg.RemoteStats

	// lazyOwners counts the hydrates by Open that left segments remote:
	// the owner's open then resolved their event ranges (evict.go).
	lazyOwners int
}

// simBucketURL is the name of the simulation's one bucket, and
// otherBucketURL one the shard never shipped to.
const (
	simBucketURL   = "mem://sim"
	otherBucketURL = "mem://sim-another-bucket"
)

const shard0 = "shard-0000"

func newWorld(root string, seed uint64, syncMode bool) *world {
	w := &world{root: root, clock: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), rules: map[int]int{}, sync: syncMode, bucketURL: simBucketURL}
	w.raw = memcas.New(w.now)
	w.fb = faultbucket.NewDriver(w.raw, seed)
	w.fb.SetClock(w.now)
	w.bkt = blobtier.New(w.fb.Bucket(), blobtier.Options{Timeout: time.Minute})
	w.disk = faultfs.NewMemFS()
	w.inj = &diskFault{}
	w.evict = evictBudget(seed)
	return w
}

func (w *world) now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.clock
}

func (w *world) advance(d time.Duration) {
	w.mu.Lock()
	w.clock = w.clock.Add(d)
	w.mu.Unlock()
}

func (w *world) dir() string { return filepath.Join(w.root, "live"+w.live) }

// clean is a view of the bucket without faults (a copy of what is at rest).
func (w *world) clean() blobtier.Bucket {
	return blobtier.New(blob.NewBucket(w.raw.Clone()), blobtier.Options{Timeout: time.Minute})
}

// simMetrics receives every simulated Log's metrics. Without a
// Registerer each Open builds every metric family anew (a tenth of the
// simulation's time); the shard's series are shared across opens and seeds
// (its one label value), and nothing the engine does reads them back.
var simMetrics = prometheus.NewRegistry()

func (w *world) options() bucketlog.Options {
	o := bucketlog.Options{
		Registerer:      simMetrics,
		Dir:             w.dir(),
		FS:              faultfs.Wrap(w.disk, w.inj),
		Bucket:          w.newView(),
		BucketURL:       w.bucketURL,
		Now:             w.now,
		NoBackground:    true,
		SyncToBucket:    w.sync,
		SyncWait:        time.Nanosecond,
		StartupTimeout:  time.Nanosecond,
		SegmentMaxBytes: 2048,
		SealMaxAge:      time.Minute,
		Logger:          quiet,
	}
	o.TransactionWindow = simTxnWindow // dedup.go
	o.LocalRetentionBytes = w.evict    // evict.go
	return o
}

// open opens the Log on the current disk. A refused open must change no
// byte of the shard directory: it returns the refusal and, separately,
// whether the disk changed. A disk that holds no store is hydrated by the
// engine's own Open on a real directory (MemFS cannot rename the
// directory a hydrate builds), and the result is copied onto the disk.
func (w *world) open(ctx context.Context) (err error, changed string) {
	files := w.disk.Files() // one copy for the checks and the mirror
	if w.emptyStoreIn(files) {
		if err := w.hydrateReal(ctx); err != nil {
			return err, ""
		}
		files = w.disk.Files()
	}
	before := digestFiles(files, w.dir())
	if err := mirrorFiles(files, w.dir()); err != nil {
		return fmt.Errorf("sim: mirror: %w", err), ""
	}
	l, err := bucketlog.Open(ctx, w.options())
	if err != nil {
		return err, diffFiles(before, diskFiles(w.disk, w.dir()))
	}
	w.log = l
	w.opens++
	return nil, ""
}

// hasBucketRecordIn reports whether the shard directory of files (a
// MemFS's Files) records its bucket.
func (w *world) hasBucketRecordIn(files map[string][]byte) bool {
	_, ok := files[path.Clean("/"+localseg.BucketRecordPath(filepath.Join(w.dir(), shard0)))]
	return ok
}

func (w *world) emptyStore() bool { return w.emptyStoreIn(w.disk.Files()) }

// emptyStoreIn is emptyStore of files (a MemFS's Files).
func (w *world) emptyStoreIn(files map[string][]byte) bool {
	prefix := path.Clean("/"+filepath.Join(w.dir(), shard0)) + "/"
	for name := range files {
		// As coldload.IsEmptyStore: a checkpoint left by a store
		// that lost its segments is no empty directory (finding 9).
		if rest, ok := strings.CutPrefix(name, prefix); ok && localseg.IsStoreFile(rest) {
			return false
		}
	}
	return true
}

// hydrateReal runs Open (which hydrates) and Close on a fresh real
// directory, then copies the shard directory onto the disk, durably.
func (w *world) hydrateReal(ctx context.Context) error {
	w.fresh++
	dir := filepath.Join(w.root, fmt.Sprintf("hydrate-%d", w.fresh))
	o := w.options()
	o.Dir, o.FS = dir, nil
	l, err := bucketlog.Open(ctx, o)
	if err != nil {
		return err
	}
	if h := l.OpenReport().Hydrate; h != nil && h.Lazy != nil && h.Lazy.FullBecause == "" && h.Lazy.RemoteSegments > 0 {
		w.lazyOwners++
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("sim: close the hydrated store: %w", err)
	}
	src := filepath.Join(dir, shard0)
	dst := filepath.Join(w.dir(), shard0)
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := w.disk.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || localseg.IsLockFile(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		f, err := w.disk.OpenFile(filepath.Join(dst, e.Name()), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		f.Close()
	}
	for d := dst; ; d = filepath.Dir(d) {
		if err := w.disk.SyncDir(d); err != nil {
			return err
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// mirrorFiles reproduces on the real disk the file names of the MemFS shard
// directory and bucket.json: Open and Restore read those through the os
// package, not Options.FS (coldload.IsEmptyStore, localseg.ReadBucketRecord), so the real
// directory must tell them what the injected one holds. Only what differs
// is changed (every open mirrors; rewriting each file was a tenth of the
// simulation's time): afterwards the directory holds exactly those names,
// empty but for the bucket record's bytes, or is absent when the MemFS
// directory holds no file.
func mirrorFiles(files map[string][]byte, dir string) error {
	real := filepath.Join(dir, shard0)
	prefix := path.Clean("/"+real) + "/"
	want := map[string][]byte{}
	for name, data := range files {
		if !strings.HasPrefix(name, prefix) || strings.Contains(name[len(prefix):], "/") {
			continue
		}
		base := name[len(prefix):]
		want[base] = nil
		if localseg.IsBucketRecordFile(base) {
			want[base] = data
		}
	}
	if len(want) == 0 {
		return os.RemoveAll(real)
	}
	entries, err := os.ReadDir(real)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(real, 0o755); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	right := map[string]bool{}
	for _, e := range entries {
		data, ok := want[e.Name()]
		if !ok || !e.Type().IsRegular() {
			if err := os.RemoveAll(filepath.Join(real, e.Name())); err != nil {
				return err
			}
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() == int64(len(data)) {
			if len(data) == 0 {
				right[e.Name()] = true
			} else if got, err := os.ReadFile(filepath.Join(real, e.Name())); err == nil && bytes.Equal(got, data) {
				right[e.Name()] = true
			}
		}
	}
	for _, base := range slices.Sorted(maps.Keys(want)) {
		if right[base] {
			continue
		}
		if err := os.WriteFile(filepath.Join(real, base), want[base], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// diskFiles digests every file under dir.
func diskFiles(m *faultfs.MemFS, dir string) map[string]string { return digestFiles(m.Files(), dir) }

// digestFiles is diskFiles of files (a MemFS's Files).
func digestFiles(files map[string][]byte, dir string) map[string]string {
	prefix := path.Clean("/"+dir) + "/"
	out := map[string]string{}
	for name, data := range files {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			switch b := path.Base(rest); {
			case localseg.IsCheckpointFile(b):
				// A cache the store rewrites at every open; its presence
				// still counts.
				data = nil
			case localseg.IsLockFile(b), localseg.IsIndexFile(b), localseg.IsTempFile(b):
				continue // the lock, derived index files, temporaries
				// Segment files count byte for byte, zeros after the last
				// frame included: a writable open repairs the highest
				// segment (torn tail, preallocation) only after the
				// bucket's verdict (localseg DeferCleanup), so a refusal
				// changes none of it (with the repair before the verdict,
				// seed 183 finds a stale refusal that changed it).
			}
			out[rest] = fmt.Sprintf("%d:%x", len(data), sha256.Sum256(data))
		}
	}
	return out
}

// diffFiles names what differs ("" when nothing does).
func diffFiles(a, b map[string]string) string {
	var d []string
	for _, name := range slices.Sorted(maps.Keys(a)) {
		switch bv, ok := b[name]; {
		case !ok:
			d = append(d, "-"+name)
		case bv != a[name]:
			d = append(d, "~"+name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[name]; !ok {
			d = append(d, "+"+name)
		}
	}
	return strings.Join(d, " ")
}

// abandon drops the Log without closing it (the process died).
func (w *world) abandon() { w.log = nil }

func (w *world) close() error {
	if w.log == nil {
		return nil
	}
	err := w.log.Close()
	w.log = nil
	return err
}

// crash replaces the disk with what a power cut leaves of it.
func (w *world) crash(torn bool, seed uint64) {
	w.abandon()
	w.disk = w.disk.CrashClone(faultfs.CrashOptions{Torn: torn, Seed: seed})
}

// restore rebuilds the shard from a clean view of the bucket into a fresh
// real directory and returns what the restored store serves.
func (w *world) restore(ctx context.Context) (restored, error) {
	w.fresh++
	dir := filepath.Join(w.root, fmt.Sprintf("restore-%d", w.fresh))
	b := w.clean()
	_, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: b, Dir: dir, AllowEmpty: true, Concurrency: 1})
	if err != nil {
		return restored{}, err
	}
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, ReadOnly: true, Now: w.now, Logger: quiet, Registerer: simMetrics})
	if err != nil {
		return restored{}, fmt.Errorf("open the restored store: %w", err)
	}
	defer l.Close()
	return readLog(l)
}

// restored is what a store serves: its records, base and consumers.
type restored struct {
	base      uint64 // first retained sequence
	tip       uint64
	records   []localseg.Record
	consumers map[string]uint64
}

func readLog(l *bucketlog.Log) (restored, error) { return readLogFrom(l, 0) }

// readLogFrom reads the records after sequence after.
func readLogFrom(l *bucketlog.Log, after uint64) (restored, error) {
	var r restored
	for {
		p, err := l.Scan(simCtx(), after, 500)
		if err != nil {
			return r, err
		}
		if r.base == 0 {
			r.base = p.Base
		}
		if len(p.Records) == 0 {
			break
		}
		r.records = append(r.records, p.Records...)
		after = p.Records[len(p.Records)-1].Seq
	}
	snap, err := l.Store().Snapshot()
	if err != nil {
		return r, err
	}
	r.tip, r.consumers = snap.Tip, snap.Consumers
	if r.base == 0 {
		r.base = snap.ReclaimedSeq + 1
	}
	return r, nil
}

// diskFault fails the k-th write-class operation after it is armed, with
// ENOSPC or EIO, once.
type diskFault struct {
	mu    sync.Mutex
	armed bool
	k     int64
	errno syscall.Errno
	fired bool
	crash *faultfs.Crash
}

func (d *diskFault) arm(k int64, errno syscall.Errno) {
	d.mu.Lock()
	d.armed, d.k, d.errno, d.fired = true, k, errno, false
	d.mu.Unlock()
}

func (d *diskFault) disarm() {
	d.mu.Lock()
	d.armed = false
	d.mu.Unlock()
}

func (d *diskFault) armedNow() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.armed || d.crash != nil
}

// takeFired reports whether the fault fired since the last call.
func (d *diskFault) takeFired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fired
	d.fired = false
	return f
}

// crashAt kills the process at the k-th write-class operation from now
// (faultfs.Crash): that operation and every later one fail.
func (d *diskFault) crashAt(k int64) {
	d.mu.Lock()
	d.crash = faultfs.CrashAt(k)
	d.mu.Unlock()
}

func (d *diskFault) endCrash() {
	d.mu.Lock()
	d.crash = nil
	d.mu.Unlock()
}

func (d *diskFault) MaybeError(op faultfs.Op) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crash != nil {
		if err := d.crash.MaybeError(op); err != nil {
			return err
		}
	}
	if !d.armed || !op.Kind.IsWrite() {
		return nil
	}
	if d.k > 0 {
		d.k--
		return nil
	}
	d.armed, d.fired = false, true
	return faultfs.Errno(d.errno)
}

var errNoLog = errors.New("sim: no open log")
