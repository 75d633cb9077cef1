// Package bucketview reads one shard's state in the bucket in one place:
// the reclaim watermark, the cursor object, the segment and tail objects in
// order, the orphans the watermark covers, and the keys it does not
// understand. Reconcile at start, GC, tail cleanup and the cursor rebuild
// consume a View rather than listing the bucket by hand, so there is one
// rule for which keys are understood.
//
// A caller reads only the parts it needs (Options.Parts): a part not asked
// for issues no request, so a path that listed nothing before lists nothing
// now. The parts are read in a fixed order — watermark, tail objects,
// cursor object, segments — and the first failure ends the read.
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

// Bucket is what Read needs from a bucket. blobtier.Bucket implements it.
type Bucket interface {
	List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error]
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

// Options configure Read.
type Options struct {
	Parts Parts
	// KeepDamagedWatermark reports a damaged watermark object (it fails
	// verification or does not decode) in View.WatermarkDamaged and reads
	// on; without it the damage is Read's error.
	KeepDamagedWatermark bool
	// KeepDamagedCursor does the same for the cursor object.
	KeepDamagedCursor bool
	// Check, when set, runs after each part is read (done names it) and
	// may refuse: its error ends the read before the next part's requests,
	// so a verdict reached early costs no further request.
	Check func(v *View, done Parts) error
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
	// Orphans are the objects of SegmentObjects and TailObjects that the
	// watermark covers (a segment at or below its segment, a tail object
	// ending at or below its sequence): GC deletes them. Filled only when
	// the watermark was read.
	Orphans []blobtier.ObjectInfo
	// Unparsed are the keys listed under this shard's prefixes that are not
	// understood: never read, never deleted, only counted.
	Unparsed []blobtier.ObjectInfo
}

// Understood reports whether a listed object is one this shard's code
// knows how to judge: a key that parses, of the kind and shard listed.
// Anything else is left alone: not understanding an object in an event-log
// bucket is a reason to leave it there.
func Understood(info blobtier.ObjectInfo, shard uint32, kind blobtier.Kind) bool {
	return info.ParseErr == nil && info.Parsed.Kind == kind && info.Parsed.Shard == shard
}

// Read reads the parts of shard's bucket state that o asks for.
func Read(ctx context.Context, b Bucket, shard uint32, o Options) (View, error) {
	v := View{Shard: shard, Parts: o.Parts}
	if o.Parts&Watermark != 0 {
		m, ver, err := watermark.Read(ctx, b, shard)
		v.Version = ver
		switch {
		case watermark.Damaged(err) && o.KeepDamagedWatermark:
			v.WatermarkDamaged, v.WatermarkErr = true, err
		case err != nil:
			return v, fmt.Errorf("read the reclaim watermark: %w", err)
		default:
			v.Mark = m
		}
		if err := v.check(o, Watermark); err != nil {
			return v, err
		}
	}
	if o.Parts&Tails != 0 {
		var err error
		if v.TailObjects, err = v.list(ctx, b, blobtier.KindTail); err != nil {
			return v, fmt.Errorf("list tail objects: %w", err)
		}
		if err := v.check(o, Tails); err != nil {
			return v, err
		}
	}
	if o.Parts&Cursor != 0 {
		c, ver, err := tailbatch.ReadCursor(ctx, b, shard)
		v.CursorVersion = ver
		switch {
		case err != nil && CursorDamaged(err) && o.KeepDamagedCursor:
			v.CursorDamaged, v.CursorErr = true, err
		case err != nil:
			return v, fmt.Errorf("read the cursor object: %w", err)
		default:
			v.Cur = c
		}
		if err := v.check(o, Cursor); err != nil {
			return v, err
		}
	}
	if o.Parts&Segments != 0 {
		var err error
		if v.SegmentObjects, err = v.list(ctx, b, blobtier.KindSegment); err != nil {
			return v, fmt.Errorf("list segments: %w", err)
		}
		if err := v.check(o, Segments); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (v *View) check(o Options, done Parts) error {
	if o.Check == nil {
		return nil
	}
	return o.Check(v, done)
}

// CursorDamaged reports whether reading the cursor object failed because
// the stored object is damaged (it fails verification or does not decode),
// as opposed to the bucket failing.
func CursorDamaged(err error) bool {
	return errors.Is(err, blobtier.ErrCorrupt) || errors.Is(err, tailbatch.ErrBadCursor)
}

// list lists one kind, sorting understood objects from the rest and
// noting the orphans.
func (v *View) list(ctx context.Context, b Bucket, kind blobtier.Kind) ([]blobtier.ObjectInfo, error) {
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
	case blobtier.KindSegment:
		return k.Segment <= v.Mark.Segment
	case blobtier.KindTail:
		return k.LastSeq <= v.Mark.Seq
	}
	return false
}
