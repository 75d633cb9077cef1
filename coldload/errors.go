package coldload

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// Errors. Callers test them with errors.Is; the typed errors below carry the
// details (keys, ranges) and match these sentinels.
var (
	// ErrNotEmpty: the target directory already holds something. A restore
	// never writes over an existing store.
	ErrNotEmpty = errors.New("coldload: target directory is not empty")
	// ErrWrongShard: the target directory is named for another shard
	// (shard-NNNN with a different number).
	ErrWrongShard = errors.New("coldload: directory is named for another shard")
	// ErrEmpty: the bucket holds no object at all for the shard (no
	// watermark, cursor, segment or tail object). A wrong prefix or URL must
	// not look like an empty log, so Hydrate refuses unless AllowEmpty.
	ErrEmpty = errors.New("coldload: the bucket holds nothing for the shard")
	// ErrGap: the bucket's history of the shard has a hole (a missing
	// segment id or sequence range). See *GapError.
	ErrGap = errors.New("coldload: gap in the bucket's history")
	// ErrShort: the restore ended below the cursor object's shipped_through,
	// so objects the owner had shipped are gone. See *ShortError.
	ErrShort = errors.New("coldload: restore ended below the cursor object's shipped_through")
	// ErrConflict: two objects hold different bytes for one sequence (two
	// writers on one shard). See *ConflictError.
	ErrConflict = errors.New("coldload: two objects hold different bytes for one sequence")
	// ErrCorrupt: an object fails verification (length, digest, a frame, or
	// sequences that disagree with its key or with its neighbours). See
	// *ObjectError, which names the key.
	ErrCorrupt = errors.New("coldload: corrupt object")
	// ErrWatermarkAhead: the reclaim watermark claims more than the bucket's
	// own objects support (above the cursor object's shipped_through and
	// above every sequence the segment and tail objects hold): a forged or
	// misplaced watermark would otherwise restore as an empty log and let a
	// new owner append far above the real history. See *WatermarkAheadError;
	// it also matches localseg.ErrInvalidState.
	ErrWatermarkAhead = errors.New("coldload: the watermark is ahead of what the bucket holds")
)

// ObjectError names the bucket object an error is about. It matches
// ErrCorrupt when the object failed verification at either layer
// (blobtier.ErrCorrupt: length or digest; localseg.ErrCorrupt: a frame or a
// sequence), and blobtier.ErrNotFound when it vanished after being listed.
type ObjectError struct {
	Key string
	Err error
}

func (e *ObjectError) Error() string {
	msg := e.Err.Error()
	if strings.Contains(msg, e.Key) {
		// blobtier's errors name the key already.
		return "coldload: " + msg
	}
	return fmt.Sprintf("coldload: object %s: %s", e.Key, msg)
}
func (e *ObjectError) Unwrap() error { return e.Err }

// Is makes every verification failure of an object match ErrCorrupt,
// whichever layer found it.
func (e *ObjectError) Is(target error) bool {
	return target == ErrCorrupt &&
		(errors.Is(e.Err, blobtier.ErrCorrupt) || errors.Is(e.Err, localseg.ErrCorrupt))
}

// GapError describes a hole in a shard's history. FromSegment..ToSegment
// are the missing segment ids (both 0 when the ids are contiguous and only
// the sequences jump); FromSeq..ToSeq the missing sequences (ToSeq 0 when
// the upper end is unknown: the object after the hole could not be read).
// CoveredByTail reports that tail objects' keys cover the missing sequences:
// AllowPartial then recovers them (prefix plus tail objects).
type GapError struct {
	Shard         uint32 `json:"shard"`
	FromSegment   uint64 `json:"from_segment,omitempty"`
	ToSegment     uint64 `json:"to_segment,omitempty"`
	FromSeq       uint64 `json:"from_sequence"`
	ToSeq         uint64 `json:"to_sequence"`
	CoveredByTail bool   `json:"covered_by_tail"`
	// After names the last object before the hole ("" when the hole starts
	// at the watermark), Before the first object after it ("" when none).
	After  string `json:"after,omitempty"`
	Before string `json:"before,omitempty"`
}

func (e *GapError) Error() string {
	var s string
	if e.FromSegment != 0 {
		s = fmt.Sprintf("coldload: shard %d: segments %d..%d missing", e.Shard, e.FromSegment, e.ToSegment)
	} else {
		s = fmt.Sprintf("coldload: shard %d: sequences missing", e.Shard)
	}
	switch {
	case e.ToSeq != 0 && e.ToSeq < e.FromSeq:
		s += " (they held no event)"
	case e.ToSeq != 0:
		s += fmt.Sprintf(" (sequences %d..%d)", e.FromSeq, e.ToSeq)
	default:
		s += fmt.Sprintf(" (sequences from %d)", e.FromSeq)
	}
	if e.After != "" {
		s += " after " + e.After
	}
	if e.Before != "" {
		s += " before " + e.Before
	}
	if e.CoveredByTail {
		s += "; tail objects cover the missing sequences (AllowPartial recovers them)"
	}
	return s
}

func (e *GapError) Is(target error) bool { return target == ErrGap }

// ShortError reports a restore that reached Reached while the cursor object
// says the owner had shipped ShippedThrough.
type ShortError struct {
	Shard          uint32 `json:"shard"`
	Reached        uint64 `json:"reached"`
	ShippedThrough uint64 `json:"shipped_through"`
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("coldload: shard %d: restored through sequence %d but the cursor object says %d were shipped",
		e.Shard, e.Reached, e.ShippedThrough)
}

func (e *ShortError) Is(target error) bool { return target == ErrShort }

// ConflictError names two objects holding different frames for one
// sequence: the mark of a second writer.
type ConflictError struct {
	Seq      uint64
	Key      string // the object read first (a segment, or the earlier tail object)
	OtherKey string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("coldload: sequence %d differs between %s and %s (two writers?)", e.Seq, e.Key, e.OtherKey)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// corruptf makes a content error (the bytes verify but disagree with the key
// or the neighbours) that matches ErrCorrupt and localseg.ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{localseg.ErrCorrupt}, args...)...)
}

// WatermarkAheadError describes a watermark the bucket's objects do not
// support. HasCursor reports whether a readable cursor object was found
// (ShippedThrough is its value); HighestTailSeq is the highest last sequence
// of any tail object's key (0 when none); HighestSegment the highest segment
// id listed (0 when none).
type WatermarkAheadError struct {
	Shard            uint32 `json:"shard"`
	WatermarkSeq     uint64 `json:"watermark_sequence"`
	WatermarkSegment uint64 `json:"watermark_segment"`
	HasCursor        bool   `json:"has_cursor"`
	ShippedThrough   uint64 `json:"shipped_through"`
	HighestTailSeq   uint64 `json:"highest_tail_sequence"`
	HighestSegment   uint64 `json:"highest_segment"`
	// SegmentEnds is the last sequence of the segment object named by the
	// watermark, when one is listed and holds events (0 otherwise).
	SegmentEnds uint64 `json:"watermark_segment_ends,omitempty"`
}

func (e *WatermarkAheadError) Error() string {
	cur := "no cursor object"
	if e.HasCursor {
		cur = fmt.Sprintf("the cursor object's shipped_through is %d", e.ShippedThrough)
	}
	seg := "no segment object"
	if e.HighestSegment > 0 {
		seg = fmt.Sprintf("the highest segment object is %d", e.HighestSegment)
		if e.SegmentEnds > 0 {
			seg += fmt.Sprintf(" (segment %d ends at sequence %d)", e.WatermarkSegment, e.SegmentEnds)
		}
	}
	tail := "no tail object"
	if e.HighestTailSeq > 0 {
		tail = fmt.Sprintf("tail objects reach sequence %d", e.HighestTailSeq)
	}
	return fmt.Sprintf("coldload: shard %d: the watermark %s says sequences through %d (segment %d) were reclaimed, "+
		"but %s, %s, and %s: a forged or misplaced watermark? (restore --allow-watermark-ahead accepts it)",
		e.Shard, blobtier.WatermarkKey(e.Shard), e.WatermarkSeq, e.WatermarkSegment, cur, seg, tail)
}

func (e *WatermarkAheadError) Is(target error) bool {
	return target == ErrWatermarkAhead || target == localseg.ErrInvalidState
}
