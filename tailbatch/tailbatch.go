package tailbatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// MaxBatchBytes is the largest tail object a pass writes by default. A larger
// durable tail is cut at an Event frame boundary into several batches, so a
// tick that ships writes one tail object unless more than this arrived since
// the previous tick.
const MaxBatchBytes = 8 << 20

// DefaultMaxBatchesPerPass bounds how many batches one Prepare returns
// (8 MiB each at most), so one tick after a long outage cannot turn into an
// unbounded burst of puts; the rest ships on the following ticks.
const DefaultMaxBatchesPerPass = 64

// Errors of the package. Callers test them with errors.Is.
var (
	// ErrNotContiguous: Commit was given a batch that does not start at or
	// before the shipped position + 1, so moving the cursor to its end would
	// claim sequences the bucket may not hold. The cursor is left alone.
	ErrNotContiguous = errors.New("tailbatch: batch is not contiguous with the shipped position")
	// ErrBadExtent: the Source returned an extent that breaks its contract
	// (empty, reversed, not starting right after the shipped position, or
	// too large for one object).
	ErrBadExtent = errors.New("tailbatch: source returned an invalid extent")
	// ErrBadBatch: Upload was given a batch that is not well formed, or the
	// bytes read for it do not hold exactly its events.
	ErrBadBatch = errors.New("tailbatch: invalid batch")
	// ErrDamaged: the tail object read back damaged after its put (or an
	// earlier put of ours left it damaged under the key). Upload deleted
	// it; the batch failed and ships again on the next pass.
	ErrDamaged = errors.New("tailbatch: tail object landed damaged")
	// ErrStopped: an earlier upload found a different object under one of
	// this shard's tail keys (a second writer). The replicator refuses
	// every later pass; the returned error also matches
	// blobtier.ErrConflict.
	ErrStopped = errors.New("tailbatch: shipping stopped for this shard")
)

// RangeReader reads durable, immutable bytes of a segment.
type RangeReader interface {
	// ReadRange reads n bytes at off of segment. The range must already be
	// covered by a completed fsync.
	ReadRange(segment uint64, off, n int64) ([]byte, error)
}

// Source is what the replicator needs from a shard's local store.
// *localseg.Store implements it.
type Source interface {
	// TailExtent returns the durable frames after the frame of event
	// afterSeq: whole frames of one segment, ending with the frame of the
	// last Event in the range, at most maxBytes long (cut at an Event frame
	// boundary), every byte covered by a completed fsync. ok is false when
	// no Event after afterSeq is durable yet. It takes the store's own lock
	// only briefly and does no I/O.
	TailExtent(afterSeq uint64, maxBytes int64) (localseg.Extent, bool, error)
	RangeReader
}

// Putter creates write-once objects, reads them back and deletes its own
// damaged ones. blobtier.Bucket implements it.
type Putter interface {
	PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error
	Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error)
	Delete(ctx context.Context, key string) error
}

// Bucket is what Replicate needs: write-once puts for tail objects and the
// rewritable cursor object. blobtier.Bucket implements it.
type Bucket interface {
	Putter
	CursorStore
}

// Batch is a byte range of one local segment to be shipped as one tail
// object. It is a value: Prepare fills it and Upload, Commit and Fail take it
// back unchanged.
type Batch struct {
	Shard   uint32
	Segment uint64
	// Start and End delimit the bytes [Start, End) of the segment file.
	Start, End int64
	// FirstSeq and LastSeq are the first and last Event in the range; they
	// name the object.
	FirstSeq, LastSeq uint64
	// Key is blobtier.TailKey(Shard, FirstSeq, LastSeq).
	Key string
	// Epoch is the writer's ownership epoch, the object's `epoch` metadata
	// (Options.Epoch; 0 without writer fencing).
	Epoch uint64
}

// Len is the object's size in bytes.
func (b Batch) Len() int64 { return b.End - b.Start }

// BatchOf is the batch of extent ext of shard, written with epoch: its
// bytes, events and key.
func BatchOf(shard uint32, ext localseg.Extent, epoch uint64) Batch {
	return Batch{Shard: shard, Segment: ext.Segment, Start: ext.Start, End: ext.End,
		FirstSeq: ext.FirstSeq, LastSeq: ext.LastSeq, Key: blobtier.TailKey(shard, ext.FirstSeq, ext.LastSeq), Epoch: epoch}
}

// Records is the number of events the batch holds.
func (b Batch) Records() uint64 { return b.LastSeq - b.FirstSeq + 1 }

func (b Batch) String() string {
	return fmt.Sprintf("tail batch %s (segment %d bytes [%d,%d))", b.Key, b.Segment, b.Start, b.End)
}

// Options configure a Replicator. The zero value works.
type Options struct {
	// Disabled ships no tail object: Prepare returns no batch and touches
	// no Source, and Replicate writes only the cursor object, when it is
	// due (Advance moved the position, or the consumers changed). It is how
	// "tail replication off" is expressed: the engine still publishes the
	// cursor object as its sealed segments become durable.
	Disabled bool
	// Epoch is the writer's ownership epoch, written on every tail object
	// (0: unfenced, every bucket written before writer fencing).
	Epoch uint64
	// MaxBatchBytes caps one tail object (default MaxBatchBytes = 8 MiB, at
	// most blobtier.MaxObjectBytes). A single Event frame larger than the
	// cap still ships, alone, in its own object.
	MaxBatchBytes int64
	// MaxBatchesPerPass caps the batches one Prepare returns (default
	// DefaultMaxBatchesPerPass).
	MaxBatchesPerPass int
}

func (o Options) maxBatchBytes() int64 {
	switch {
	case o.MaxBatchBytes <= 0:
		return MaxBatchBytes
	case o.MaxBatchBytes > blobtier.MaxObjectBytes:
		return blobtier.MaxObjectBytes
	}
	return o.MaxBatchBytes
}

func (o Options) maxBatchesPerPass() int {
	if o.MaxBatchesPerPass <= 0 {
		return DefaultMaxBatchesPerPass
	}
	return o.MaxBatchesPerPass
}

// Stats are the replicator's counters since New. Every field only grows,
// except ShippedThrough (which only grows too, but is a position) and
// PendingBytes (a gauge). The engine exports them as the tail_* metrics of
// README.md, Metrics: Batches → tail_batches_total, Records → tail_records_total,
// Bytes → tail_bytes_total, Failed → tail_replication_failed_total.
type Stats struct {
	// Batches, Records and Bytes count committed tail objects, the events
	// they hold and their size.
	Batches, Records, Bytes uint64
	// Failed counts batches whose upload failed (the cursor stayed).
	Failed uint64
	// Conflicts counts failures that were a different object under the
	// key: a second writer. The first one stops the replicator.
	Conflicts uint64
	// NotContiguous counts commits refused because they would have skipped
	// sequences.
	NotContiguous uint64
	// CursorWrites and CursorFailed count cursor object writes.
	CursorWrites, CursorFailed uint64
	// ShippedThrough is the highest sequence the bucket holds contiguously
	// as far as this replicator knows.
	ShippedThrough uint64
	// PendingBytes is the size of the batches the latest Prepare found that
	// are not committed yet (an estimate of the unshipped tail).
	PendingBytes int64
	// LastError is the latest upload or cursor failure ("" when the latest
	// pass succeeded).
	LastError string
}

// Result is the outcome of one Replicate pass.
type Result struct {
	// Prepared is the number of batches Prepare found.
	Prepared int
	// Batches, Records and Bytes count what this pass committed.
	Batches int
	Records uint64
	Bytes   int64
	// Failed is 1 when an upload failed (the pass stops at the first
	// failure, since nothing after a gap could be committed).
	Failed int
	// ShippedThrough is the cursor after the pass.
	ShippedThrough uint64
	// CursorWritten reports that the cursor object was written; Cursor is
	// what was written.
	CursorWritten bool
	Cursor        Cursor
	// CursorFailed reports that a due cursor write failed (its error is
	// in the pass's error): cursor_write_failed_total.
	CursorFailed bool
}

// Replicator tracks one shard's tail cursor: the highest sequence the bucket
// holds contiguously. It is safe for concurrent use; its mutex guards only
// in-memory fields and is never held across a Source or bucket call.
type Replicator struct {
	shard uint32
	opts  Options

	// cursorMu serialises the cursor object writes (read, then put or
	// compare-and-swap): on a bucket without compare-and-swap two
	// overlapping writes could otherwise put an older body after a newer
	// one. It is held across the bucket calls; nothing else takes it.
	cursorMu sync.Mutex

	mu      sync.Mutex
	shipped uint64
	// cursorShipped is the shipped_through of the last cursor object this
	// replicator wrote (or the starting position): the cursor object is due
	// when shipped moved past it.
	cursorShipped uint64
	// cursorConsumers are the consumers of the last cursor object this
	// replicator wrote: the object is also due when they change.
	cursorConsumers map[string]uint64
	stats           Stats
	// stopped latches the first second-writer conflict.
	stopped error

	// cursorSeen are consumers snapshotted (alive or deleted) for a cursor
	// write that failed since the last one that succeeded (see
	// tombstone.go).
	cursorSeen map[string]uint64
	// cursorDeleted are the store's recent deletions the last write knew:
	// the object is also due when they change (a consumer created and
	// deleted since, which the consumers alone do not show).
	cursorDeleted map[string]uint64
}

// New returns the replicator of shard whose bucket already holds every
// sequence through shippedThrough contiguously. At start, shippedThrough
// comes from CursorFrom, never from the local tip.
func New(shard uint32, shippedThrough uint64, opts Options) *Replicator {
	r := &Replicator{shard: shard, opts: opts, shipped: shippedThrough, cursorShipped: shippedThrough}
	r.stats.ShippedThrough = shippedThrough
	return r
}

// Shard is the shard this replicator ships.
func (r *Replicator) Shard() uint32 { return r.shard }

// ShippedThrough is the highest sequence the bucket holds contiguously.
func (r *Replicator) ShippedThrough() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shipped
}

// Stats returns a copy of the counters.
func (r *Replicator) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Err is the latched second-writer error, or nil.
func (r *Replicator) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// Advance records that the bucket holds every sequence through seq (for
// example because the sealed segments covering them became durable there),
// so the tail need not ship them. It never moves the cursor backward.
func (r *Replicator) Advance(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq > r.shipped {
		r.shipped = seq
		r.stats.ShippedThrough = seq
	}
}

// Prepare returns the batches of durable frames after the shipped position:
// each within one segment, at most Options.MaxBatchBytes long (cut at an
// Event frame boundary), in sequence order, each starting right after the
// previous one. It performs no bucket I/O and takes no lock of its own
// across the Source calls; the Source's TailExtent takes the store's lock
// briefly. No batch (and no error) means nothing new is durable.
func (r *Replicator) Prepare(src Source) ([]Batch, error) {
	if r.opts.Disabled {
		return nil, nil
	}
	r.mu.Lock()
	after, stopped := r.shipped, r.stopped
	r.mu.Unlock()
	if stopped != nil {
		return nil, stopped
	}
	maxBytes := r.opts.maxBatchBytes()
	var batches []Batch
	var pending int64
	for len(batches) < r.opts.maxBatchesPerPass() {
		ext, ok, err := src.TailExtent(after, maxBytes)
		if err != nil {
			return nil, fmt.Errorf("tailbatch: shard %d: durable tail after sequence %d: %w", r.shard, after, err)
		}
		if !ok {
			break
		}
		if err := checkExtent(ext, after); err != nil {
			return nil, fmt.Errorf("tailbatch: shard %d: %w", r.shard, err)
		}
		b := BatchOf(r.shard, ext, r.opts.Epoch)
		batches = append(batches, b)
		pending += b.Len()
		after = ext.LastSeq
	}
	r.mu.Lock()
	r.stats.PendingBytes = pending
	r.mu.Unlock()
	return batches, nil
}

// checkExtent refuses an extent that would make a wrong or unbounded object:
// the replicator must never name sequences an object does not hold.
func checkExtent(ext localseg.Extent, after uint64) error {
	switch {
	case ext.FirstSeq != after+1:
		return fmt.Errorf("%w: extent of segment %d starts at sequence %d, want %d (a gap in the local log, or a cursor below the reclaim base: call Advance)",
			ErrBadExtent, ext.Segment, ext.FirstSeq, after+1)
	case ext.LastSeq < ext.FirstSeq:
		return fmt.Errorf("%w: extent of segment %d has sequences %d..%d", ErrBadExtent, ext.Segment, ext.FirstSeq, ext.LastSeq)
	case ext.Start < 0 || ext.End <= ext.Start:
		return fmt.Errorf("%w: extent of segment %d has byte range [%d,%d)", ErrBadExtent, ext.Segment, ext.Start, ext.End)
	case ext.End-ext.Start > blobtier.MaxObjectBytes:
		return fmt.Errorf("%w: extent of segment %d is %d bytes, above the %d-byte object limit",
			ErrBadExtent, ext.Segment, ext.End-ext.Start, blobtier.MaxObjectBytes)
	case ext.LastSeq-ext.FirstSeq >= uint64(ext.End-ext.Start)/localseg.HeaderSize:
		// Every event needs at least a frame header: fewer bytes than that
		// cannot hold the sequences the key would name.
		return fmt.Errorf("%w: extent of segment %d is %d bytes, too short for events %d..%d",
			ErrBadExtent, ext.Segment, ext.End-ext.Start, ext.FirstSeq, ext.LastSeq)
	}
	return nil
}

// Commit records that batch is in the bucket. The cursor moves to
// batch.LastSeq only when that is forward and the batch is contiguous with
// the shipped position (it starts at or before ShippedThrough()+1). A batch
// past a gap is ignored, counted and reported as ErrNotContiguous; a batch
// the cursor already covers (Advance ran meanwhile) is a no-op.
func (r *Replicator) Commit(b Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case b.Shard != r.shard:
		return fmt.Errorf("%w: %v belongs to shard %d, not %d", ErrBadBatch, b, b.Shard, r.shard)
	case b.LastSeq < b.FirstSeq:
		return fmt.Errorf("%w: %v has sequences %d..%d", ErrBadBatch, b, b.FirstSeq, b.LastSeq)
	case b.FirstSeq > r.shipped+1:
		r.stats.NotContiguous++
		return fmt.Errorf("%w: %v starts at %d but the bucket holds only through %d", ErrNotContiguous, b, b.FirstSeq, r.shipped)
	case b.LastSeq <= r.shipped:
		return nil
	}
	r.shipped = b.LastSeq
	r.stats.ShippedThrough = b.LastSeq
	r.stats.Batches++
	r.stats.Records += b.Records()
	r.stats.Bytes += uint64(b.Len())
	r.stats.PendingBytes = max(0, r.stats.PendingBytes-b.Len())
	r.stats.LastError = ""
	return nil
}

// Fail records that batch's upload failed with err. The cursor stays, so the
// next Prepare returns the same events again. A conflict (a different object
// under the batch's key, errors.Is(err, blobtier.ErrConflict)) means a second
// writer: it is counted and stops the replicator for good.
func (r *Replicator) Fail(b Batch, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Failed++
	if err == nil {
		err = errors.New("unknown failure")
	}
	r.stats.LastError = fmt.Sprintf("%v: %v", b, err)
	if errors.Is(err, blobtier.ErrConflict) {
		r.stats.Conflicts++
		if r.stopped == nil {
			r.stopped = &StoppedError{Shard: r.shard, Key: b.Key, Err: err}
		}
	}
}

// StoppedError is the latched second-writer error. It matches both
// ErrStopped and blobtier.ErrConflict.
type StoppedError struct {
	Shard uint32
	Key   string
	Err   error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("tailbatch: shard %d: shipping stopped, a different object exists under %s (second writer): %v", e.Shard, e.Key, e.Err)
}
func (e *StoppedError) Unwrap() error        { return e.Err }
func (e *StoppedError) Is(target error) bool { return target == ErrStopped }
