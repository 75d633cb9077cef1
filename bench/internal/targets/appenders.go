package targets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/hashicorp/raft"
	tidwal "github.com/tidwall/wal"
	"golang.org/x/sys/unix"
)

// ErrFull is returned by a limit loop whose preallocated file is used up;
// the driver stops that writer and measures the time until then.
var ErrFull = errors.New("preallocated file is full")

// Appender is a durable log under test. Append returns only after the record
// is on stable storage and is safe for concurrent use (targets without a
// concurrent API are wrapped as their documentation implies).
type Appender interface {
	Append(p *Payload) error
	// Count reads back how many records the log holds.
	Count() (uint64, error)
	Close() error
}

// Target is one kind of Appender.
type Target struct {
	Name string
	// Doc says how the target is driven, for the README and -list.
	Doc string
	// Limit marks a physical-limit loop: single writer only.
	Limit bool
	// Batching marks a peer driven through a group-commit combiner: only
	// meaningful with more than one writer.
	Batching bool
	// Open creates a fresh log in the empty directory dir.
	Open func(dir string, p *Payload) (Appender, error)
}

// Targets lists every append target, bucketlog first, then the peers, then
// the limits.
func Targets() []Target {
	return []Target{
		{Name: "bucketlog", Doc: "localseg.Store.Append from every writer at once (its group commit)",
			Open: openBucketlog},
		{Name: "tidwall-wal", Doc: "tidwall/wal Log.Write with NoSync=false (fsync per write), index assigned and written under one mutex",
			Open: func(dir string, _ *Payload) (Appender, error) { return openTidwall(dir, false) }},
		{Name: "tidwall-wal/batch", Batching: true, Doc: "tidwall/wal WriteBatch of every write pending at the moment (at most 64), one fsync per batch, each writer waiting for its batch",
			Open: func(dir string, _ *Payload) (Appender, error) { return openTidwall(dir, true) }},
		{Name: "raft-wal", Doc: "hashicorp/raft-wal StoreLogs of one entry per call (fsync per call), index assigned and stored under one mutex",
			Open: func(dir string, _ *Payload) (Appender, error) { return openRaftWAL(dir, false) }},
		{Name: "raft-wal/batch", Batching: true, Doc: "hashicorp/raft-wal StoreLogs of every entry pending at the moment (at most 64, as raft's MaxAppendEntries default), one fsync per call",
			Open: func(dir string, _ *Payload) (Appender, error) { return openRaftWAL(dir, true) }},
		{Name: "limit/plain", Limit: true, Doc: "pwrite at the end of a growing file + fdatasync, one record per loop",
			Open: func(dir string, p *Payload) (Appender, error) { return openLimit(dir, p, limitPlain) }},
		{Name: "limit/fallocate", Limit: true, Doc: "pwrite into a file fallocated up front (512 MiB, size already final) + fdatasync",
			Open: func(dir string, p *Payload) (Appender, error) { return openLimit(dir, p, limitFallocate) }},
		{Name: "limit/zerofill", Limit: true, Doc: "pwrite into a file written with zeros and fsynced up front (128 MiB) + fdatasync",
			Open: func(dir string, p *Payload) (Appender, error) { return openLimit(dir, p, limitZerofill) }},
	}
}

// TargetByName finds a target.
func TargetByName(name string) (Target, error) {
	for _, t := range Targets() {
		if t.Name == name {
			return t, nil
		}
	}
	return Target{}, fmt.Errorf("unknown target %q", name)
}

// FsyncCounter is implemented by targets that report their own fsyncs, so
// a run can say how many appends shared one (group commit).
type FsyncCounter interface {
	Fsyncs() (n uint64, total time.Duration)
}

// --- bucketlog ---

type bucketlogAppender struct {
	st    *localseg.Store
	execs []string
	n     atomic.Uint64
	obs   fsyncObserver
}

// fsyncObserver counts the store's fsyncs through its Observer hook; two
// atomic adds per fsync cost nothing next to the fsync.
type fsyncObserver struct {
	n     atomic.Uint64
	ns    atomic.Int64
	seals atomic.Uint64
}

func (o *fsyncObserver) Fsync(d time.Duration)       { o.n.Add(1); o.ns.Add(int64(d)) }
func (o *fsyncObserver) Sealed(localseg.SegmentInfo) { o.seals.Add(1) }

// Seals is how many segments the store sealed (rolled over) since open.
func (a *bucketlogAppender) Seals() uint64 { return a.obs.seals.Load() }

func openBucketlog(dir string, _ *Payload) (Appender, error) {
	return OpenBucketlog(dir, localseg.Options{})
}

// OpenBucketlog opens a bucketlog appender with opts (its Observer is
// replaced by the appender's fsync counter), for the profile command's
// variants: an instrumented FS, preallocation off.
func OpenBucketlog(dir string, opts localseg.Options) (Appender, error) {
	a := &bucketlogAppender{execs: ExecIDs(10000)}
	opts.Observer = &a.obs
	st, err := localseg.Open(localseg.ShardDir(dir, 0), opts)
	if err != nil {
		return nil, err
	}
	a.st = st
	return a, nil
}

// NewIOCountingFS returns an FS over the OS that counts and times the
// store's syncs and writes into c.
func NewIOCountingFS(c *IOCounts) localseg.FS { return newCountingFS(c) }

func (a *bucketlogAppender) Fsyncs() (uint64, time.Duration) {
	return a.obs.n.Load(), time.Duration(a.obs.ns.Load())
}

func (a *bucketlogAppender) Append(p *Payload) error {
	n := a.n.Add(1)
	_, err := a.st.Append(localseg.Event{
		ExecutionID:   a.execs[n%uint64(len(a.execs))],
		TransactionID: TxnID(n),
		Payload:       p.S,
	})
	return err
}

func (a *bucketlogAppender) Count() (uint64, error) { return a.st.Tip(), nil }
func (a *bucketlogAppender) Close() error           { return a.st.Close() }

// --- tidwall/wal ---

type tidwallAppender struct {
	log *tidwal.Log
	mu  sync.Mutex // guards next and serialises Write: indexes must be consecutive
	// next is the index of the next write.
	next uint64
	comb *combiner
}

func tidwallOptions() *tidwal.Options {
	o := *tidwal.DefaultOptions
	o.NoSync = false // fsync after every write (the default, stated for the reader)
	return &o
}

func openTidwall(dir string, batch bool) (Appender, error) {
	l, err := tidwal.Open(filepath.Join(dir, "tidwall"), tidwallOptions())
	if err != nil {
		return nil, err
	}
	last, err := l.LastIndex()
	if err != nil {
		l.Close()
		return nil, err
	}
	a := &tidwallAppender{log: l, next: last + 1}
	if batch {
		b := new(tidwal.Batch)
		a.comb = newCombiner(64, func(ps []*Payload) error {
			b.Clear()
			for _, p := range ps {
				b.Write(a.next, p.B)
				a.next++
			}
			return l.WriteBatch(b)
		})
	}
	return a, nil
}

func (a *tidwallAppender) Append(p *Payload) error {
	if a.comb != nil {
		return a.comb.submit(p)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.log.Write(a.next, p.B); err != nil {
		return err
	}
	a.next++
	return nil
}

func (a *tidwallAppender) Count() (uint64, error) {
	first, err := a.log.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := a.log.LastIndex()
	if err != nil || last == 0 {
		return 0, err
	}
	return last - first + 1, nil
}

func (a *tidwallAppender) Close() error {
	if a.comb != nil {
		a.comb.close()
	}
	return a.log.Close()
}

// --- hashicorp/raft-wal ---

type raftWALAppender struct {
	w    raftWAL
	mu   sync.Mutex // guards next; raft has a single writer of its log
	next uint64
	comb *combiner
}

func openRaftWAL(dir string, batch bool) (Appender, error) {
	w, err := openRaftWALStore(dir)
	if err != nil {
		return nil, err
	}
	last, err := w.LastIndex()
	if err != nil {
		w.Close()
		return nil, err
	}
	a := &raftWALAppender{w: w, next: last + 1}
	if batch {
		a.comb = newCombiner(64, func(ps []*Payload) error {
			logs := make([]*raft.Log, len(ps))
			for i, p := range ps {
				logs[i] = &raft.Log{Index: a.next, Term: 1, Type: raft.LogCommand, Data: p.B}
				a.next++
			}
			return w.StoreLogs(logs)
		})
	}
	return a, nil
}

func (a *raftWALAppender) Append(p *Payload) error {
	if a.comb != nil {
		return a.comb.submit(p)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.w.StoreLogs([]*raft.Log{{Index: a.next, Term: 1, Type: raft.LogCommand, Data: p.B}}); err != nil {
		return err
	}
	a.next++
	return nil
}

func (a *raftWALAppender) Count() (uint64, error) {
	first, err := a.w.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := a.w.LastIndex()
	if err != nil || last == 0 {
		return 0, err
	}
	return last - first + 1, nil
}

func (a *raftWALAppender) Close() error {
	if a.comb != nil {
		a.comb.close()
	}
	return a.w.Close()
}

// --- group-commit combiner for peers without a concurrent API ---

// combiner turns concurrent single appends into batches written by one
// goroutine, the way raft's leader hands its log store every entry waiting
// at that moment. Each submitter returns only after the batch holding its
// record has been written (and so fsynced) by commit.
type combiner struct {
	reqs   chan *combReq
	max    int
	commit func([]*Payload) error
	done   chan struct{}
}

type combReq struct {
	p   *Payload
	err chan error
}

var combReqPool = sync.Pool{New: func() any { return &combReq{err: make(chan error, 1)} }}

func newCombiner(max int, commit func([]*Payload) error) *combiner {
	c := &combiner{reqs: make(chan *combReq, 1024), max: max, commit: commit, done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *combiner) submit(p *Payload) error {
	r := combReqPool.Get().(*combReq)
	r.p = p
	c.reqs <- r
	err := <-r.err
	r.p = nil
	combReqPool.Put(r)
	return err
}

func (c *combiner) loop() {
	defer close(c.done)
	batch := make([]*combReq, 0, c.max)
	ps := make([]*Payload, 0, c.max)
	for r := range c.reqs {
		batch = append(batch[:0], r)
	drain:
		for len(batch) < c.max {
			select {
			case r2, ok := <-c.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r2)
			default:
				break drain
			}
		}
		ps = ps[:0]
		for _, b := range batch {
			ps = append(ps, b.p)
		}
		err := c.commit(ps)
		for _, b := range batch {
			b.err <- err
		}
	}
}

// close stops the combiner; no submit may be running or follow.
func (c *combiner) close() {
	close(c.reqs)
	<-c.done
}

// --- physical limits ---

type limitKind int

const (
	limitPlain limitKind = iota
	limitFallocate
	limitZerofill
)

const (
	fallocateBytes = 512 << 20
	zerofillBytes  = 128 << 20
)

// limitAppender is a single-writer pwrite + fdatasync loop. It takes a mutex
// only so that misuse with several writers stays correct.
type limitAppender struct {
	mu   sync.Mutex
	f    *os.File
	rec  []byte
	off  int64
	size int64 // preallocated size; 0 for a growing file
	n    uint64
}

func openLimit(dir string, p *Payload, kind limitKind) (Appender, error) {
	name := filepath.Join(dir, "limit.dat")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	a := &limitAppender{f: f, rec: LimitRecord(*p)}
	fail := func(err error) (Appender, error) {
		f.Close()
		return nil, err
	}
	switch kind {
	case limitFallocate:
		// Mode 0: the size becomes final and the range reads as zeros;
		// the blocks stay "unwritten" extents until written.
		if err := unix.Fallocate(int(f.Fd()), 0, 0, fallocateBytes); err != nil {
			return fail(fmt.Errorf("fallocate: %w", err))
		}
		a.size = fallocateBytes
	case limitZerofill:
		zero := make([]byte, 1<<20)
		for off := int64(0); off < zerofillBytes; off += int64(len(zero)) {
			if _, err := f.WriteAt(zero, off); err != nil {
				return fail(err)
			}
		}
		a.size = zerofillBytes
	}
	if kind != limitPlain {
		// Make the preallocation itself durable before timing, so the
		// loop's fdatasync commits no size or allocation change from it.
		if err := f.Sync(); err != nil {
			return fail(err)
		}
		if err := syncDir(dir); err != nil {
			return fail(err)
		}
	}
	return a, nil
}

func (a *limitAppender) Append(_ *Payload) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.size > 0 && a.off+int64(len(a.rec)) > a.size {
		return ErrFull
	}
	if _, err := a.f.WriteAt(a.rec, a.off); err != nil {
		return err
	}
	if err := unix.Fdatasync(int(a.f.Fd())); err != nil {
		return err
	}
	a.off += int64(len(a.rec))
	a.n++
	return nil
}

// Count checks the file against the loop's own count: a growing file must
// have exactly the records written.
func (a *limitAppender) Count() (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fi, err := a.f.Stat()
	if err != nil {
		return 0, err
	}
	if a.size == 0 && fi.Size() != a.off {
		return 0, fmt.Errorf("limit file is %d bytes, loop wrote %d", fi.Size(), a.off)
	}
	return a.n, nil
}

func (a *limitAppender) Close() error { return a.f.Close() }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
