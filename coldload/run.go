package coldload

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/bucketlog/bucketlog/localseg"
)

// Progress reports a long cold load. Objects counts segment and tail
// objects read (each once, however often it is read); Bytes their bytes.
// The totals come from the listing and may be passed when a restore reads
// an object twice or stops early.
type Progress struct {
	Objects      int   `json:"objects"`
	ObjectsTotal int   `json:"objects_total"`
	Bytes        int64 `json:"bytes"`
	BytesTotal   int64 `json:"bytes_total"`
}

// progress serialises the Progress callback, so the caller's function
// needs no locking of its own.
type progress struct {
	mu sync.Mutex
	fn func(Progress)
	p  Progress
}

func (pr *progress) setTotal(objects int, bytes int64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.p.ObjectsTotal, pr.p.BytesTotal = objects, bytes
	pr.reportLocked()
}

func (pr *progress) add(n int64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.p.Objects++
	pr.p.Bytes += n
	pr.reportLocked()
}

func (pr *progress) reportLocked() {
	if pr.fn != nil {
		pr.fn(pr.p)
	}
}

// run is one pass over one shard: a Hydrate attempt (dir set: segments are
// written there) or a Verify of the shard (collect set: every problem is
// recorded and the pass goes on).
type run struct {
	r       Reader
	p       *plan
	fsys    localseg.FS
	dir     string
	collect bool
	conc    int
	prog    *progress

	// reads and readBytes count every object read (Report.Objects/Bytes).
	reads     atomic.Int64
	readBytes atomic.Int64
	// seen marks the tail objects read at least once (progress, and Verify:
	// which tail objects still need a check of their own).
	seen []atomic.Bool
	// zomb counts the objects skipped under the lineage rule (lineage.go).
	zomb zombies

	// cons, when set (a Hydrate with a readable cursor object), gathers
	// the restored consumer frames around the cursor object's
	// shipped_through (see consumers.go).
	cons *consumerTracker
	// consFinal is the restored store's consumers (a lazy hydrate's
	// checkpoint); lazyStats the metadata reads of its remote segments.
	consFinal  map[string]uint64
	lazyStats  int
	lazyRanges int // and the ranged reads of their heads (lazyfirst.go)

	// cancel aborts the whole pass (Hydrate only) after a fatal error.
	cancel context.CancelFunc

	mu sync.Mutex
	// fatal holds errors that end a Hydrate whatever AllowPartial says (a
	// conflict, a corrupt tail object read during the segment phase); in
	// Verify, every problem.
	fatal []error
}

// fail records a problem. In Verify it is one more line of the report; in
// Hydrate it ends the attempt.
func (h *run) fail(err error) {
	h.mu.Lock()
	h.fatal = append(h.fatal, err)
	h.mu.Unlock()
	if !h.collect && h.cancel != nil {
		h.cancel()
	}
}

func (h *run) firstFatal() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.fatal) == 0 {
		return nil
	}
	return h.fatal[0]
}

// read counts one object read; first reports whether it is the first read of
// a tail object (index i, or -1 for other objects).
func (h *run) read(n int, tail int) {
	h.reads.Add(1)
	h.readBytes.Add(int64(n))
	if tail >= 0 && h.seen[tail].Swap(true) {
		return
	}
	h.prog.add(int64(n))
}
