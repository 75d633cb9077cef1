// Package bucketview reads one shard's state in the bucket in one place:
// the reclaim watermark, the cursor object, the segment and tail objects in
// order, the orphans the watermark covers, and the keys it does not
// understand. Reconcile at start, GC, tail cleanup, the cursor rebuild and
// cold loads (hydrate, restore, verify) consume a View rather than listing
// the bucket by hand, so there is one rule for which keys are understood.
//
// A caller reads only the parts it needs (Options.Parts): a part not asked
// for issues no request, so a path that listed nothing before lists nothing
// now. The parts are read in DefaultOrder (or Options.Order), and the first
// failure ends the read. The writer-fencing parts (start records, claims;
// fencing.go) come after the data listings, in FencingOrder.
package bucketview

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// Lister is what Read needs from a bucket to read the listed parts
// (Segments, Tails).
type Lister interface {
	List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error]
}

// Bucket is what Read needs for every part. blobtier.Bucket implements it.
type Bucket interface {
	Lister
	GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error)
}

// Parts selects what Read reads.
type Parts uint8

const (
	Watermark Parts = 1 << iota // the reclaim watermark (one read)
	Tails                       // the tail objects (one listing)
	Cursor                      // the cursor object (one read)
	Segments                    // the segment objects (one listing)

	All = Watermark | Tails | Cursor | Segments
)

// DefaultOrder is safe while the owner runs: the watermark first, so
// anything it reclaims is skipped; the cursor object before the listings,
// so every sequence its shipped_through claims was in the bucket before
// the listing started (the owner writes the cursor object only after the
// tail put it describes succeeded).
var DefaultOrder = []Parts{Watermark, Cursor, Segments, Tails}

// Options configure Read.
type Options struct {
	Parts Parts
	// KeepDamagedWatermark reports a damaged watermark object (it fails
	// verification or does not decode) in View.WatermarkDamaged and reads
	// on; without it the damage is Read's error.
	KeepDamagedWatermark bool
	// KeepDamagedCursor does the same for the cursor object.
	KeepDamagedCursor bool
	// Order is the order the parts are read in (nil: DefaultOrder).
	Order []Parts
	// Check, when set, runs after each part is read (done names it) and
	// may refuse: its error ends the read before the next part's requests,
	// so a verdict reached early costs no further request.
	Check func(v *View, done Parts) error
	// ReadClaims reads every claim's body with the Claims part (an
	// operator's view: who claimed each epoch); without it Claims is a
	// listing only.
	ReadClaims bool
	// ListStartsOnly lists the start records with the StartRecords part
	// without reading them: HighestStart only, and Lineage is an error
	// (the takeover's first listing, which needs only the highest epoch).
	ListStartsOnly bool
}

// View is one shard's bucket state as one Read found it.
type View struct {
	Shard uint32
	Parts Parts // what was read

	// Mark is the reclaim watermark (zero when absent or damaged), Version
	// its version token (returned also for a damaged object, so its owner
	// can replace it). WatermarkErr is the damage when WatermarkDamaged.
	Mark             watermark.Mark
	Version          blobtier.Version
	WatermarkDamaged bool
	WatermarkErr     error

	// Cur is the cursor object (the zero Cursor with an empty consumer map
	// when absent; the zero Cursor when damaged).
	Cur           tailbatch.Cursor
	CursorVersion blobtier.Version
	CursorDamaged bool
	CursorErr     error

	// SegmentObjects and TailObjects are the understood objects of each
	// kind, every one of them, in key order (which is numeric order: keys
	// are fixed-width hex).
	SegmentObjects []blobtier.ObjectInfo
	TailObjects    []blobtier.ObjectInfo
	// IndexObjects are the understood index objects (the Indexes part),
	// in key order.
	IndexObjects []blobtier.ObjectInfo
	// Orphans are the objects of SegmentObjects, TailObjects and
	// IndexObjects that the watermark covers (a segment or an index at or
	// below its segment, a tail object ending at or below its sequence):
	// GC deletes them. Filled only when the watermark was read.
	Orphans []blobtier.ObjectInfo
	// Unparsed are the keys listed under this shard's prefixes that are not
	// understood: never read, never deleted, only counted.
	Unparsed []blobtier.ObjectInfo

	// The fencing parts (fencing.go): start records, claims, the lineage.
	fencingState
}

// Understood reports whether a listed object is one this shard's code
// knows how to judge: a key that parses, of the kind and shard listed, and
// for a tail object a range a writer of this format makes (it starts at
// sequence 1 or later, and does not end before it starts).
// Anything else is left alone: not understanding an object in an event-log
// bucket is a reason to leave it there.
func Understood(info blobtier.ObjectInfo, shard uint32, kind blobtier.Kind) bool {
	k := info.Parsed
	if info.ParseErr != nil || k.Kind != kind || k.Shard != shard {
		return false
	}
	return kind != blobtier.KindTail || (k.FirstSeq > 0 && k.FirstSeq <= k.LastSeq)
}

// Read reads the parts of shard's bucket state that o asks for. b must be
// a Bucket when o asks for the watermark or the cursor object; a Lister
// serves the listed parts.
func Read(ctx context.Context, b Lister, shard uint32, o Options) (View, error) {
	v := View{Shard: shard, Parts: o.Parts}
	rb, canRead := b.(Bucket)
	if (o.Parts&(Watermark|Cursor) != 0 || (o.Parts&StartRecords != 0 && !o.ListStartsOnly) || (o.Parts&Claims != 0 && o.ReadClaims)) && !canRead {
		return v, fmt.Errorf("bucketview: shard %d: the bucket cannot read objects", shard)
	}
	order := o.Order
	if order == nil {
		order = FencingOrder // DefaultOrder, then the fencing parts
	}
	for _, part := range order {
		if o.Parts&part == 0 {
			continue
		}
		if err := v.read(ctx, b, rb, part, o); err != nil {
			return v, err
		}
		if o.Check != nil {
			if err := o.Check(&v, part); err != nil {
				return v, err
			}
		}
	}
	return v, nil
}

// read reads one part; a failure is a *PartError.
func (v *View) read(ctx context.Context, b Lister, rb Bucket, part Parts, o Options) error {
	var err error
	switch part {
	case Watermark:
		var m watermark.Mark
		m, v.Version, err = watermark.Read(ctx, rb, v.Shard)
		switch {
		case watermark.Damaged(err) && o.KeepDamagedWatermark:
			v.WatermarkDamaged, v.WatermarkErr, err = true, err, nil
		case err == nil:
			v.Mark = m
		}
	case Cursor:
		var c tailbatch.Cursor
		c, v.CursorVersion, err = tailbatch.ReadCursor(ctx, rb, v.Shard)
		switch {
		case err != nil && CursorDamaged(err) && o.KeepDamagedCursor:
			v.CursorDamaged, v.CursorErr, err = true, err, nil
		case err == nil:
			v.Cur = c
		}
	case Segments:
		v.SegmentObjects, err = v.list(ctx, b, blobtier.KindSegment)
	case Tails:
		v.TailObjects, err = v.list(ctx, b, blobtier.KindTail)
	case Indexes:
		v.IndexObjects, err = v.list(ctx, b, blobtier.KindIndex)
	case StartRecords:
		err = v.readStarts(ctx, b, rb, o.ListStartsOnly)
	case Claims:
		err = v.readClaims(ctx, b, rb, o.ReadClaims)
	}
	if err != nil {
		return &PartError{Part: part, Shard: v.Shard, Err: err}
	}
	return nil
}

// PartError is a failed read of one part: a bucket failure, or a damaged
// watermark or cursor object the caller did not ask to keep.
type PartError struct {
	Part  Parts
	Shard uint32
	Err   error
}

func (e *PartError) Error() string {
	switch e.Part {
	case Watermark:
		return "read the reclaim watermark: " + e.Err.Error()
	case Cursor:
		return "read the cursor object: " + e.Err.Error()
	case Segments:
		return fmt.Sprintf("list segments of shard %d: %v", e.Shard, e.Err)
	case Tails:
		return fmt.Sprintf("list tail objects of shard %d: %v", e.Shard, e.Err)
	case Indexes:
		return fmt.Sprintf("list index objects of shard %d: %v", e.Shard, e.Err)
	case StartRecords:
		return fmt.Sprintf("read the start records of shard %d: %v", e.Shard, e.Err)
	case Claims:
		return fmt.Sprintf("list the claims of shard %d: %v", e.Shard, e.Err)
	}
	return e.Err.Error()
}

func (e *PartError) Unwrap() error { return e.Err }

// CursorDamaged reports whether reading the cursor object failed because
// the stored object is damaged (it fails verification or does not decode),
// as opposed to the bucket failing.
func CursorDamaged(err error) bool {
	return errors.Is(err, blobtier.ErrCorrupt) || errors.Is(err, tailbatch.ErrBadCursor)
}

// list lists one kind, sorting understood objects from the rest and
// noting the orphans.
func (v *View) list(ctx context.Context, b Lister, kind blobtier.Kind) ([]blobtier.ObjectInfo, error) {
	var out []blobtier.ObjectInfo
	for info, err := range b.List(ctx, v.Shard, kind) {
		if err != nil {
			return out, err
		}
		if !Understood(info, v.Shard, kind) {
			v.Unparsed = append(v.Unparsed, info)
			continue
		}
		out = append(out, info)
		if v.Parts&Watermark != 0 && v.Covered(info.Parsed) {
			v.Orphans = append(v.Orphans, info)
		}
	}
	return out, nil
}

// Covered reports whether the watermark covers the object under k.
func (v *View) Covered(k blobtier.Key) bool {
	switch k.Kind {
	case blobtier.KindSegment, blobtier.KindIndex:
		return k.Segment <= v.Mark.Segment
	case blobtier.KindTail:
		return k.LastSeq <= v.Mark.Seq
	}
	return false
}
