package watermark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// Errors. Callers test them with errors.Is.
var (
	// ErrMalformed reports a watermark object whose body does not decode.
	// It is also a blobtier.ErrCorrupt: the object is there but cannot be
	// trusted, and a reader must stop rather than guess a boundary.
	ErrMalformed = fmt.Errorf("watermark: malformed object: %w", blobtier.ErrCorrupt)
	// ErrInconsistent reports a target that is neither at nor above the
	// stored mark on both coordinates (a higher sequence in a lower segment,
	// or the reverse). Two consistent histories never produce one, so it is
	// refused instead of being merged into a mark that names no real
	// boundary.
	ErrInconsistent = errors.New("watermark: target disagrees with the stored mark")
	// ErrContention reports that Advance lost every compare-and-swap it
	// tried. It also matches blobtier.ErrPrecondition.
	ErrContention = fmt.Errorf("watermark: too many concurrent writers: %w", blobtier.ErrPrecondition)
)

// MaxAttempts bounds the compare-and-swap attempts of one Advance. Each lost
// attempt means another writer moved the mark; with a single owner per
// shard a second attempt is already rare.
const MaxAttempts = 64

// Mark is the reclaim watermark of a shard: every event at or below Seq and
// every segment at or below Segment is reclaimed (or about to be), and a
// reader must skip them. V increases with every write, so no two writes of
// the object are byte-identical (an S3 ETag is the MD5 of the content, and a
// compare-and-swap on an unchanged ETag would not detect a rewrite).
//
// The JSON field names are part of the wire format; do not change them.
type Mark struct {
	Seq     uint64 `json:"seq"`
	Segment uint64 `json:"segment"`
	V       uint64 `json:"v"`
	// DurableSeq is the committed durable end (docs/FORMAT.md §6.5): every
	// event at or below it is in a durable segment of the shard's lineage,
	// so tail cleanup may delete tail objects whose last sequence is at or
	// below it. Kept canonical: 0 (absent: it reads as Seq, see Durable)
	// or above Seq.
	DurableSeq uint64 `json:"durable_seq,omitempty"`
}

// AtLeast reports whether m covers seq and segment on both coordinates.
func (m Mark) AtLeast(seq, segment uint64) bool { return m.Seq >= seq && m.Segment >= segment }

// Durable returns the committed durable end: DurableSeq, never below Seq.
func (m Mark) Durable() uint64 { return max(m.DurableSeq, m.Seq) }

// above is the canonical DurableSeq: d when it is above seq, else 0.
func above(d, seq uint64) uint64 {
	if d > seq {
		return d
	}
	return 0
}

// Encode returns the object body {"seq":N,"segment":M,"v":K}, with
// ,"durable_seq":D before the brace when D is above N (a missing field
// reads as N, so the body of a mark whose durable end is its seq is the
// legacy one).
func (m Mark) Encode() []byte {
	if d := m.Durable(); d > m.Seq {
		return fmt.Appendf(nil, `{"seq":%d,"segment":%d,"v":%d,"durable_seq":%d}`, m.Seq, m.Segment, m.V, d)
	}
	return fmt.Appendf(nil, `{"seq":%d,"segment":%d,"v":%d}`, m.Seq, m.Segment, m.V)
}

// Decode parses a watermark body. It is strict: the body must be one JSON
// object carrying all three fields as non-negative integers, with nothing
// after it; unknown fields are ignored (a newer writer may add some). A
// positive Seq in segment 0 is refused: events live in segments 1 and up.
// An optional "durable_seq" sets DurableSeq; absent or below Seq it reads
// as Seq.
func Decode(b []byte) (Mark, error) {
	var raw struct {
		Seq     *uint64 `json:"seq"`
		Segment *uint64 `json:"segment"`
		V       *uint64 `json:"v"`
		Durable *uint64 `json:"durable_seq"`
	}
	// A body must be an object; json.Unmarshal would accept "null" and leave
	// every field nil, which the checks below report, but a clearer error
	// helps whoever reads the log.
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return Mark{}, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Mark{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case raw.Seq == nil:
		return Mark{}, fmt.Errorf("%w: missing \"seq\"", ErrMalformed)
	case raw.Segment == nil:
		return Mark{}, fmt.Errorf("%w: missing \"segment\"", ErrMalformed)
	case raw.V == nil:
		return Mark{}, fmt.Errorf("%w: missing \"v\"", ErrMalformed)
	}
	m := Mark{Seq: *raw.Seq, Segment: *raw.Segment, V: *raw.V}
	if raw.Durable != nil {
		m.DurableSeq = *raw.Durable
	}
	m.DurableSeq = above(m.DurableSeq, m.Seq)
	if m.Seq > 0 && m.Segment == 0 {
		return Mark{}, fmt.Errorf("%w: sequence %d in segment 0", ErrMalformed, m.Seq)
	}
	return m, nil
}

// Reader is what Read needs from a bucket.
type Reader interface {
	GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error)
}

// Swapper is what Advance needs from a bucket.
type Swapper interface {
	Reader
	CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error
	CanCAS() bool
}

// ReadAttempts bounds the reads of one Read whose bytes fail verification.
const ReadAttempts = 8

// Read returns the shard's watermark and its version token. An absent
// object is the zero Mark with version "" (nothing reclaimed yet).
//
// A read whose bytes fail the bucket's verification is tried again, up to
// ReadAttempts times with a short random pause: on S3 and GCS the metadata
// and the bytes come from two requests, so a read racing a replacement can
// pair the new bytes with the old digest (seen with 16 concurrent writers
// on both emulators). Corruption at rest fails every attempt and is
// returned (blobtier.ErrCorrupt); a body that verifies but does not decode
// is never retried (ErrMalformed).
func Read(ctx context.Context, b Reader, shard uint32) (Mark, blobtier.Version, error) {
	key := blobtier.WatermarkKey(shard)
	var (
		data []byte
		ver  blobtier.Version
		err  error
	)
	for attempt := 0; attempt < ReadAttempts; attempt++ {
		data, ver, err = b.GetVersioned(ctx, key)
		if !errors.Is(err, blobtier.ErrCorrupt) || attempt == ReadAttempts-1 {
			break
		}
		if perr := pause(ctx, attempt); perr != nil {
			return Mark{}, "", fmt.Errorf("read watermark %s: %w (after %w)", key, perr, err)
		}
	}
	if errors.Is(err, blobtier.ErrNotFound) {
		return Mark{}, "", nil
	}
	if err != nil {
		// A damaged object's version comes back with the error (see Repair).
		return Mark{}, ver, fmt.Errorf("read watermark %s: %w", key, err)
	}
	m, err := Decode(data)
	if err != nil {
		return Mark{}, ver, fmt.Errorf("read watermark %s: %w", key, err)
	}
	return m, ver, nil
}

// Damaged reports whether a Read failed because the stored object is
// damaged (it fails verification or does not decode), as opposed to the
// bucket failing.
func Damaged(err error) bool {
	return errors.Is(err, blobtier.ErrCorrupt) || errors.Is(err, ErrMalformed)
}

// Repair replaces a damaged watermark object with (seq, segment), by
// compare-and-swap on the damaged object's version, and returns the mark
// written. It writes nothing when the object reads fine (use Advance) or is
// absent.
//
// Only the shard's owner may call it, with its local reclaim base: the
// owner deletes bucket objects only after reclaiming them locally (its own
// damaged segment object, deleted to be put again, after tail objects hold
// its events, so the delete leaves no hole that reads as reclaimed unless
// those puts and the put again all fail), so
// every object ever deleted is at or below its base, and a restore that skips
// what the repaired mark covers skips nothing that still matters — while a
// damaged watermark would stop GC and every restore. V restarts from the
// clock so it stays above any counter it replaces. durable is the repaired
// durable_seq (raised to seq): the owner passes the highest durable end it
// knows committed, so a repair does not move durable_seq backward.
func Repair(ctx context.Context, b Swapper, shard uint32, seq, segment, durable uint64) (Mark, error) {
	if !b.CanCAS() {
		return Mark{}, fmt.Errorf("repair watermark of shard %d: %w", shard, blobtier.ErrUnsupported)
	}
	key := blobtier.WatermarkKey(shard)
	cur, ver, err := Read(ctx, b, shard)
	switch {
	case err == nil:
		return cur, nil
	case !Damaged(err) || ver == "":
		return Mark{}, err
	}
	next := Mark{Seq: seq, Segment: segment, V: uint64(time.Now().UnixNano()), DurableSeq: above(durable, seq)}
	if err := b.CompareAndSwap(ctx, key, next.Encode(), ver); err != nil {
		return Mark{}, fmt.Errorf("repair watermark %s: %w", key, err)
	}
	return next, nil
}

// Advance moves the shard's watermark up to (seq, segment) and returns the
// mark stored afterwards. It never writes the mark backward: when the stored
// mark already covers the target it returns it unchanged and writes nothing.
// Otherwise it writes the target with V+1 by compare-and-swap on the version
// it read; when another writer got there first it reads again and retries,
// up to MaxAttempts times with a short random pause, so concurrent writers
// end at the highest target any of them asked for.
//
// A bucket that cannot compare-and-swap is refused with
// blobtier.ErrUnsupported before anything is read or written: without it two
// writers could overwrite each other and move the mark backward.
func Advance(ctx context.Context, b Swapper, shard uint32, seq, segment uint64) (Mark, error) {
	if !b.CanCAS() {
		return Mark{}, fmt.Errorf("advance watermark of shard %d: %w", shard, blobtier.ErrUnsupported)
	}
	if seq > 0 && segment == 0 {
		return Mark{}, fmt.Errorf("advance watermark of shard %d: sequence %d in segment 0: %w", shard, seq, ErrInconsistent)
	}
	key := blobtier.WatermarkKey(shard)
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		cur, ver, err := Read(ctx, b, shard)
		if err != nil {
			return Mark{}, err
		}
		if cur.AtLeast(seq, segment) {
			return cur, nil
		}
		if cur.Seq > seq || cur.Segment > segment {
			return cur, fmt.Errorf("advance watermark %s to seq %d segment %d over seq %d segment %d: %w",
				key, seq, segment, cur.Seq, cur.Segment, ErrInconsistent)
		}
		// durable_seq is kept (never backward), raised to the new seq.
		next := Mark{Seq: seq, Segment: segment, V: cur.V + 1, DurableSeq: above(cur.DurableSeq, seq)}
		err = b.CompareAndSwap(ctx, key, next.Encode(), ver)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, blobtier.ErrPrecondition) {
			return Mark{}, fmt.Errorf("advance watermark %s: %w", key, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return Mark{}, fmt.Errorf("advance watermark %s: %w", key, err)
		}
	}
	return Mark{}, fmt.Errorf("advance watermark %s after %d attempts: %w", key, MaxAttempts, ErrContention)
}

// AdvanceDurable moves the shard's committed durable end (the mark's
// DurableSeq) up to durable and returns the mark stored afterwards; seq,
// segment and the other fields are kept. Like Advance it never moves
// backward: when the stored durable end is at or above durable it returns
// the stored mark and writes nothing; otherwise it writes by
// compare-and-swap on the version it read, retrying when another writer
// won. An absent object is created (seq and segment 0). The caller passes
// its own contiguous durable end, never more.
func AdvanceDurable(ctx context.Context, b Swapper, shard uint32, durable uint64) (Mark, error) {
	if !b.CanCAS() {
		return Mark{}, fmt.Errorf("advance the durable end of shard %d: %w", shard, blobtier.ErrUnsupported)
	}
	key := blobtier.WatermarkKey(shard)
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		cur, ver, err := Read(ctx, b, shard)
		if err != nil {
			return Mark{}, err
		}
		if cur.Durable() >= durable {
			return cur, nil
		}
		next := cur
		next.V, next.DurableSeq = cur.V+1, durable
		err = b.CompareAndSwap(ctx, key, next.Encode(), ver)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, blobtier.ErrPrecondition) {
			return Mark{}, fmt.Errorf("advance the durable end %s: %w", key, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return Mark{}, fmt.Errorf("advance the durable end %s: %w", key, err)
		}
	}
	return Mark{}, fmt.Errorf("advance the durable end %s after %d attempts: %w", key, MaxAttempts, ErrContention)
}

// pause waits a random time that grows with the attempt (full jitter, capped
// at 50 ms), so writers that lost together do not collide again together.
func pause(ctx context.Context, attempt int) error {
	ceiling := time.Millisecond << min(attempt, 6)
	ceiling = min(ceiling, 50*time.Millisecond)
	return blobtier.Wait(ctx, rand.N(ceiling)+time.Millisecond)
}

// Contiguous returns the contiguous durable watermark of a run of segments:
// walking the sealed segments in id order, it advances over each segment that
// is durable in the bucket and stops at the first that is not, at the first
// unsealed (active) segment, and at a hole in the sequences (ids may skip a
// segment-id jump). throughSeq is the last
// event sequence of the last segment it passed, throughSegment that
// segment's id; (0, 0) when the first segment already stops it.
//
// It is never a maximum over the durable segments: a durable segment beyond
// one that exists only locally does not make the events of the local one
// safe to delete anywhere.
//
// The segments are taken as given, above the local reclaim base; the result
// says nothing about what lies below the first one. A caller that knows the
// range below is covered (for example by the bucket's reclaim watermark) may
// take the maximum of the two. durable must not be nil.
func Contiguous(segs []localseg.SegmentInfo, durable func(id uint64) bool) (throughSeq, throughSegment uint64) {
	sorted := segs
	if !slices.IsSortedFunc(segs, func(a, b localseg.SegmentInfo) int { return cmpID(a.ID, b.ID) }) {
		sorted = slices.SortedFunc(slices.Values(segs), func(a, b localseg.SegmentInfo) int { return cmpID(a.ID, b.ID) })
	}
	for i, s := range sorted {
		if !s.Sealed || !durable(s.ID) {
			break
		}
		// Ids may skip a recorded jump (a takeover's start_segment,
		// docs/FORMAT.md §3.11): the store lists every segment it holds,
		// so the walk steps over it; the sequences must continue.
		if i > 0 && s.FirstSeq != sorted[i-1].LastSeq+1 {
			break
		}
		throughSeq, throughSegment = s.LastSeq, s.ID
	}
	return throughSeq, throughSegment
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
