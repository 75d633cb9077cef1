package reclaim

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// Errors. Callers test them with errors.Is.
var (
	// ErrNotOwner: shared reclaim was asked of a process that does not own
	// the shard. Only the shard's single writer may move its watermark.
	ErrNotOwner = errors.New("reclaim: shared reclaim is owner-only")
	// ErrSharedUnsupported: the bucket cannot compare-and-swap, so the
	// watermark could move backward; shared GC is refused. It matches
	// blobtier.ErrUnsupported.
	ErrSharedUnsupported = fmt.Errorf("reclaim: shared GC refused on a bucket without compare-and-swap: %w", blobtier.ErrUnsupported)
	// ErrDiverged: the bucket's watermark names a boundary the local store
	// does not have (a stale or foreign disk). Nothing is changed.
	ErrDiverged = errors.New("reclaim: the bucket's watermark disagrees with the local store")
	// ErrNoDurable: shared reclaim needs to know which segments are durable
	// in the bucket; a nil durable function is refused.
	ErrNoDurable = errors.New("reclaim: shared reclaim needs the durable-in-bucket function")
)

// Role says whether the caller owns the shard it asks to reclaim. The zero
// value is NonOwner, so a caller that forgets to say is refused.
type Role uint8

const (
	NonOwner Role = iota
	Owner
)

// Lister lists one kind of object of one shard (blobtier.Bucket.List).
type Lister interface {
	List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error]
}

// Deleter is what DeleteThrough and CleanupTail need from a bucket.
type Deleter interface {
	Lister
	Delete(ctx context.Context, key string) error
}

// Bucket is what Shared needs from a bucket (blobtier.Bucket has it all).
type Bucket interface {
	watermark.Swapper
	Deleter
}

var _ Bucket = blobtier.Bucket(nil)

// Step names the steps of a shared reclaim pass, in order.
type Step string

const (
	StepAdopt  Step = "adopt"  // the existing watermark is applied locally
	StepCommit Step = "commit" // the new watermark is in the bucket
	StepLocal  Step = "local"  // the local store is reclaimed to it
	StepDelete Step = "delete" // bucket objects at or below it are deleted
)

// SharedResult reports one shared reclaim pass.
type SharedResult struct {
	// Before is the watermark found in the bucket; Adopted is the local
	// reclaim that brought the store up to it (zero when it already was).
	Before  watermark.Mark         `json:"watermark_before"`
	Adopted localseg.ReclaimResult `json:"adopted"`
	Plan    Plan                   `json:"plan"`
	// Watermark is the mark after the pass; Advanced says this pass wrote it.
	Watermark watermark.Mark         `json:"watermark"`
	Advanced  bool                   `json:"advanced"`
	Local     localseg.ReclaimResult `json:"local"`
	Deleted   DeleteResult           `json:"deleted"`
}

// DeleteResult counts the bucket objects a pass removed.
type DeleteResult struct {
	Segments int `json:"segments"`
	Tails    int `json:"tails"`
	// Indexes are derived index objects (docs/FORMAT.md §6.10) of the
	// segments covered.
	Indexes int   `json:"indexes,omitempty"`
	Bytes   int64 `json:"bytes"` // sizes from the listing, before the delete
	// Failed deletes are left for the next pass (a delete is idempotent).
	Failed int `json:"failed"`
	// Unparsed keys under the shard's segment or tail key space are kept.
	Unparsed int `json:"unparsed"`
	// Errors holds the first few delete errors, for the log.
	Errors []string `json:"errors,omitempty"`
}

const maxReportedErrors = 8

func (d *DeleteResult) fail(key string, err error) {
	d.Failed++
	if len(d.Errors) < maxReportedErrors {
		d.Errors = append(d.Errors, fmt.Sprintf("delete %s: %v", key, err))
	}
}

// Shared runs one reclaim pass of a shard that ships to a bucket, in the
// order of docs/FORMAT.md §8.3:
//
//  1. adopt: read the bucket's watermark and reclaim the local store up to
//     it (a pass that crashed after committing it left the store behind);
//  2. plan from the local snapshot, with durable so that only segments
//     durable in the bucket may go;
//  3. commit the watermark (watermark.Advance) when the plan goes past it;
//  4. reclaim the local store to the plan;
//  5. delete the bucket's segment objects at or below the watermark's
//     segment and its tail objects whose last sequence is at or below the
//     watermark's sequence.
//
// Readers skip everything at or below the watermark, so a crash after any
// step leaves only orphans nobody reads, and the next pass removes them.
// The bucket requests run under no lock: only Snapshot and Reclaim take the
// store's own lock, briefly.
//
// It is owner-only: role must be Owner (the engine passes its owned
// store), else ErrNotOwner before any request. A store that cannot reclaim
// (opened read-only: localseg.ErrReadOnly) is refused before any request
// too, so even a caller that claims ownership of a read-only view cannot
// move the watermark. A bucket without
// compare-and-swap is refused with ErrSharedUnsupported, and a nil durable
// with ErrNoDurable. A failed delete does not fail the pass; it is counted in
// Deleted.Failed and retried by the next pass.
func Shared(ctx context.Context, store Store, b Bucket, shard uint32, role Role, pol Policy, durable func(id uint64) bool) (SharedResult, error) {
	return shared(ctx, store, b, shard, role, pol, durable, SharedOptions{}, nil)
}

// SharedOptions tune a shared pass.
type SharedOptions struct {
	// ByKey deletes the segment objects this pass newly covers by their
	// computed keys (from the watermark found at the start of the pass to
	// the one it commits) instead of listing every segment object of the
	// shard, so a pass costs what it removes, not the history the bucket
	// keeps. Leftovers of an earlier pass (a crash before its deletes, a
	// failed delete) are then not swept: the caller passes ByKey only when
	// it knows the previous pass of this process completed its deletes,
	// and sweeps (ByKey false) after a start and after any failure.
	ByKey bool
}

// SharedWith is Shared with options.
func SharedWith(ctx context.Context, store Store, b Bucket, shard uint32, role Role, pol Policy, durable func(id uint64) bool, opts SharedOptions) (SharedResult, error) {
	return shared(ctx, store, b, shard, role, pol, durable, opts, nil)
}

// shared is Shared with a hook called after each step; an error from the
// hook ends the pass there, as a crash would (tests use it).
func shared(ctx context.Context, store Store, b Bucket, shard uint32, role Role, pol Policy,
	durable func(id uint64) bool, opts SharedOptions, after func(Step) error) (SharedResult, error) {
	var res SharedResult
	switch {
	case role != Owner:
		return res, fmt.Errorf("shard %d: %w", shard, ErrNotOwner)
	case !b.CanCAS():
		return res, fmt.Errorf("shard %d: %w", shard, ErrSharedUnsupported)
	case durable == nil:
		return res, fmt.Errorf("shard %d: %w", shard, ErrNoDurable)
	}
	step := func(s Step) error {
		if after == nil {
			return nil
		}
		return after(s)
	}

	snap, err := store.Snapshot()
	if err != nil {
		return res, fmt.Errorf("reclaim: snapshot: %w", err)
	}
	// A store that cannot reclaim (read-only, closed, poisoned) could not
	// follow the watermark this pass would commit: refuse before any
	// request. Reclaiming through the current base is a no-op on a
	// writable store (localseg documents it) and ErrReadOnly on a
	// read-only one.
	if _, err := store.Reclaim(snap.ReclaimedSeg); err != nil {
		return res, fmt.Errorf("shard %d: the local store cannot reclaim: %w", shard, err)
	}

	// 1. Adopt.
	v, err := bucketview.Read(ctx, b, shard, bucketview.Options{Parts: bucketview.Watermark})
	if pe := (*bucketview.PartError)(nil); errors.As(err, &pe) {
		err = pe.Err // the watermark read's own error, as the caller's checks expect
	}
	if err != nil {
		return res, err
	}
	wm := v.Mark
	res.Before, res.Watermark = wm, wm
	if res.Adopted, snap, err = adopt(store, snap, wm); err != nil {
		return res, fmt.Errorf("shard %d: %w", shard, err)
	}
	if err := step(StepAdopt); err != nil {
		return res, err
	}

	// 2. Plan. Its base is never below the watermark after the adopt step,
	// so a plan that removes nothing targets the current mark.
	res.Plan = MakePlan(snap, pol, durable)

	// 3. Commit the watermark. A local base above the mark (a store
	// reclaimed before it shipped) is committed as well, so readers never
	// look for what the owner no longer has.
	if !wm.AtLeast(res.Plan.ThroughSeq, res.Plan.ThroughSegment) {
		m, err := watermark.Advance(ctx, b, shard, res.Plan.ThroughSeq, res.Plan.ThroughSegment)
		if err != nil {
			return res, err
		}
		res.Watermark, res.Advanced = m, true
	}
	if err := step(StepCommit); err != nil {
		return res, err
	}

	// 4. Reclaim locally.
	if res.Local, err = Local(store, res.Plan); err != nil {
		return res, err
	}
	if err := step(StepLocal); err != nil {
		return res, err
	}

	// 5. Delete what the watermark covers.
	if opts.ByKey {
		res.Deleted, err = deleteNewlyCovered(ctx, b, shard, res.Before, res.Watermark, snap.Jumps)
	} else {
		res.Deleted, err = DeleteThrough(ctx, b, shard, res.Watermark)
	}
	if err != nil {
		return res, err
	}
	return res, step(StepDelete)
}

// adopt reclaims the local store up to the bucket's watermark when it is
// behind it, after checking that the store holds the boundary the mark
// names (the same segment ending at the same sequence).
func adopt(store Store, snap localseg.Snapshot, wm watermark.Mark) (localseg.ReclaimResult, localseg.Snapshot, error) {
	var none localseg.ReclaimResult
	if wm.Segment < snap.ReclaimedSeg {
		return none, snap, nil
	}
	if wm.Segment == snap.ReclaimedSeg {
		if wm.Seq != snap.ReclaimedSeq {
			return none, snap, fmt.Errorf("%w: watermark ends segment %d at sequence %d, the local store at %d",
				ErrDiverged, wm.Segment, wm.Seq, snap.ReclaimedSeq)
		}
		return none, snap, nil
	}
	var seg *localseg.SegmentInfo
	for i := range snap.Segments {
		if snap.Segments[i].ID == wm.Segment {
			seg = &snap.Segments[i]
			break
		}
	}
	switch {
	case seg == nil:
		return none, snap, fmt.Errorf("%w: watermark segment %d is not in the local store (base segment %d)",
			ErrDiverged, wm.Segment, snap.ReclaimedSeg)
	case !seg.Sealed:
		return none, snap, fmt.Errorf("%w: watermark segment %d is the local active segment", ErrDiverged, wm.Segment)
	case seg.LastSeq != wm.Seq:
		return none, snap, fmt.Errorf("%w: watermark ends segment %d at sequence %d, the local store at %d",
			ErrDiverged, wm.Segment, wm.Seq, seg.LastSeq)
	}
	res, err := store.Reclaim(wm.Segment)
	if err != nil {
		return res, snap, fmt.Errorf("adopt watermark through segment %d: %w", wm.Segment, err)
	}
	snap, err = store.Snapshot()
	if err != nil {
		return res, snap, fmt.Errorf("reclaim: snapshot: %w", err)
	}
	return res, snap, nil
}

// DeleteThrough deletes the shard's bucket objects that the watermark
// covers: segment and index objects with id ≤ mark.Segment and tail
// objects whose last sequence ≤ mark.Seq. Deletes are idempotent (a missing key is
// success), so running it twice is harmless. A key that does not parse is
// kept and counted. A failed delete is counted and left for the next pass;
// only a failed listing returns an error.
//
// The caller must have committed mark to the bucket first: readers skip
// what it covers, which is what makes the deletes invisible to them.
func DeleteThrough(ctx context.Context, b Deleter, shard uint32, mark watermark.Mark) (DeleteResult, error) {
	var res DeleteResult
	if mark.Segment == 0 && mark.Seq == 0 {
		return res, nil
	}
	// Index objects (derived, docs/FORMAT.md §6.10) go with their segments:
	// one a crash leaves behind is an orphan no reader uses (only segments
	// above the watermark are looked up), which the next sweep deletes.
	v, err := bucketview.Read(ctx, b, shard, bucketview.Options{Parts: bucketview.Segments | bucketview.Indexes})
	res.Unparsed = len(v.Unparsed)
	if err != nil {
		return res, err
	}
	res.Segments = res.deleteUpTo(ctx, b, v.SegmentObjects, mark.Segment)
	res.Indexes = res.deleteUpTo(ctx, b, v.IndexObjects, mark.Segment)
	tails, err := deleteTailsThrough(ctx, b, shard, mark.Seq)
	res.Tails, res.Unparsed = tails.Tails, res.Unparsed+tails.Unparsed
	res.Bytes += tails.Bytes
	res.Failed += tails.Failed
	res.Errors = append(res.Errors, tails.Errors...)
	return res, err
}

// deleteUpTo deletes the listed segment or index objects whose segment id
// is at or below seg, counting bytes and failures in d, and returns how
// many it deleted.
func (d *DeleteResult) deleteUpTo(ctx context.Context, b Deleter, infos []blobtier.ObjectInfo, seg uint64) int {
	n := 0
	for _, info := range infos {
		if info.Parsed.Segment > seg {
			continue
		}
		if err := b.Delete(ctx, info.Key); err != nil {
			d.fail(info.Key, err)
			continue
		}
		n++
		d.Bytes += info.Size
	}
	return n
}

// deleteTailsThrough deletes the shard's tail objects whose last sequence
// is at or below seq, keeping (and counting) keys it does not understand.
func deleteTailsThrough(ctx context.Context, b Deleter, shard uint32, seq uint64) (DeleteResult, error) {
	var res DeleteResult
	v, err := bucketview.Read(ctx, b, shard, bucketview.Options{Parts: bucketview.Tails})
	res.Unparsed = len(v.Unparsed)
	if err != nil {
		return res, err
	}
	for _, info := range v.TailObjects {
		if info.Parsed.LastSeq > seq {
			continue
		}
		if err := b.Delete(ctx, info.Key); err != nil {
			res.fail(info.Key, err)
			continue
		}
		res.Tails++
		res.Bytes += info.Size
	}
	return res, nil
}

// deleteNewlyCovered deletes the segment objects in (before.Segment,
// mark.Segment] by their keys, each after its index object (a failed
// index delete leaves an orphan for the next sweep, nothing a reader uses), and the tail objects at or below mark.Seq
// found by listing the tail key space (tail keys carry sequences, not
// segment ids; cleanup keeps that listing short). The ids of the store's
// segment-id jumps (a takeover's gap of 2^20 ids, docs/FORMAT.md §3.12) are
// stepped over: this writer never held them, and a stale writer's objects
// there go with a sweep.
func deleteNewlyCovered(ctx context.Context, b Deleter, shard uint32, before, mark watermark.Mark, jumps []localseg.Jump) (DeleteResult, error) {
	var res DeleteResult
	for id := before.Segment + 1; id <= mark.Segment; id++ {
		if to, ok := jumpedOver(jumps, id); ok {
			id = to - 1
			continue
		}
		ikey := blobtier.IndexKey(shard, id)
		if err := b.Delete(ctx, ikey); err != nil {
			res.fail(ikey, err)
		} else {
			res.Indexes++
		}
		key := blobtier.SegmentKey(shard, id)
		if err := b.Delete(ctx, key); err != nil {
			res.fail(key, err)
			continue
		}
		res.Segments++
	}
	tails, err := deleteTailsThrough(ctx, b, shard, mark.Seq)
	res.Tails, res.Unparsed = tails.Tails, tails.Unparsed
	res.Bytes += tails.Bytes
	res.Failed += tails.Failed
	res.Errors = append(res.Errors, tails.Errors...)
	return res, err
}

// jumpedOver returns the end of the jump holding id.
func jumpedOver(jumps []localseg.Jump, id uint64) (uint64, bool) {
	for _, j := range jumps {
		if id >= j.From && id < j.To {
			return j.To, true
		}
	}
	return 0, false
}
