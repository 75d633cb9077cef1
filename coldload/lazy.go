package coldload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// A lazy hydrate (Options.Lazy; docs/FORMAT.md §9.4) downloads only the
// newest segment objects within Options.LocalBytes (at least one), the
// tail objects beyond them and the cursor object, and records every older
// segment as evicted (localseg.ImportEvicted) from its listing, its
// metadata (one HEAD each: length, xxh64, epoch) and the first event its
// head gives (one ranged GET each, lazyfirst.go); their bytes stay in the
// bucket and are read on demand, verified against that record. It
// then writes the checkpoint (localseg.ImportCheckpoint), so the store's
// first open replays nothing and its index leaves the evicted segments
// pending until a read needs them.
//
// It decides before it writes a byte, and takes the full download instead
// (Report.Lazy.FullBecause says why) whenever what it would not read might
// matter: no readable cursor object (the consumers would come from every
// frame), a hole in the segment ids, an older segment of an epoch off the
// chain or of a stale writer (SkipSegment), the cursor object's
// shipped_through below the first local event (consumer frames after it
// could sit in an evicted segment), an older segment of an ended epoch
// whose end lies below the first local event (some of its events could be
// invalid), or no event in what it downloads. What a lazy hydrate does not
// check that a full one does: the older segments' frames, their sequence
// continuity (checked by the first read of each and by the full index a
// per-execution read builds), and tail objects overlapping them (not read).
//
// A remote segment whose head did not give a plausible first event stays
// unknown to the store until read (localseg.FirstUnknown). An owner's
// start and GC read those ranges from the store's snapshot (with them
// unknown the simulation found the cursor object's shipped_through
// rebuilt lower and an adoption refused as diverged: seeds 4, 109, 176),
// so an owner's open resolves every unknown one first (localseg
// Options.ResolveFirsts: one verified fetch each, the firsts then
// recorded in evicted.json) or is refused changing nothing;
// the engine's Open of an empty directory with LocalRetentionBytes
// hydrates lazily again on that basis.

// LazyReport says what a lazy hydrate left in the bucket.
type LazyReport struct {
	// Budget is Options.LocalBytes.
	Budget int64 `json:"budget_bytes"`
	// FullBecause is set when the hydrate downloaded everything instead,
	// to the reason; the other fields are then zero.
	FullBecause string `json:"full_because,omitempty"`
	// Remote: the segment objects recorded as evicted, not downloaded.
	RemoteSegments int   `json:"remote_segments"`
	RemoteBytes    int64 `json:"remote_bytes"`
	// RemoteFirstSegment..RemoteLastSegment are their ids.
	RemoteFirstSegment uint64 `json:"remote_first_segment"`
	RemoteLastSegment  uint64 `json:"remote_last_segment"`
	// FirstLocalSeq is the first event on the disk: every event below it
	// (and above the base) is read from the bucket.
	FirstLocalSeq uint64 `json:"first_local_sequence"`
	// Stats counts the metadata reads of the remote segments.
	Stats int `json:"metadata_reads"`
	// RangeReads counts the ranged reads of their heads (lazyfirst.go);
	// FirstsKnown the remote segments whose first event they gave (the
	// others stay unknown until an owner's open or a read resolves them).
	RangeReads  int `json:"range_reads"`
	FirstsKnown int `json:"firsts_known"`
}

// statReader is the part of a bucket a lazy hydrate needs beyond Reader.
type statReader interface {
	Stat(ctx context.Context, key string) (blobtier.ObjectInfo, error)
}

// errFull asks Hydrate to run the attempt again as a full download.
type errFull struct{ reason string }

func (e *errFull) Error() string { return "coldload: lazy hydrate not possible: " + e.reason }

// lazySplit chooses the items that stay remote (items[:k]), reads their
// metadata and marks them evicted and done. k is 0 when nothing stays
// remote; an *errFull when the hydrate must download everything.
func (h *run) lazySplit(ctx context.Context, items []*segItem, budget int64) (int, error) {
	if !h.p.hasCursor {
		return 0, &errFull{"no readable cursor object"}
	}
	st, ok := h.r.(statReader)
	if !ok {
		return 0, &errFull{"the bucket reader cannot read metadata alone"}
	}
	rg, _ := h.r.(blobtier.RangeGetter)
	var reads atomic.Int64
	for _, it := range items {
		if it.probe {
			return 0, &errFull{fmt.Sprintf("a hole in the segment ids before %s", it.key)}
		}
	}
	k, sum := len(items), int64(0)
	for k > 0 && (k == len(items) || sum+items[k-1].size <= budget) {
		k--
		sum += items[k].size
	}
	if k == 0 {
		return 0, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(h.conc)
	for _, it := range items[:k] {
		g.Go(func() error {
			info, err := st.Stat(gctx, it.key)
			if err != nil {
				return &ObjectError{Key: it.key, Err: err}
			}
			if info.Meta.Length != it.size || info.Size != it.size {
				return &ObjectError{Key: it.key, Err: fmt.Errorf("%w: listed with %d bytes, its metadata says %d (%d stored)",
					blobtier.ErrCorrupt, it.size, info.Meta.Length, info.Size)}
			}
			it.meta = info.Meta
			if rg != nil {
				var n int
				it.first, n = firstEventHint(gctx, rg, it.key, it.size)
				reads.Add(int64(n))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	for _, it := range items[:k] {
		if !h.p.lin.OnChain(it.meta.Epoch) || h.p.lin.SkipSegment(it.meta.Epoch, it.id) {
			return 0, &errFull{fmt.Sprintf("%s is of epoch %d, not on the lineage here", it.key, it.meta.Epoch)}
		}
		it.evicted, it.done = true, true
	}
	h.lazyStats, h.lazyRanges = k, int(reads.Load())
	return k, nil
}

// lazyCheck decides, once the local items are read, whether the remote
// ones may stay remote; it returns what the report says of them.
func (h *run) lazyCheck(items []*segItem, k int, lastSeq uint64, budget int64) (*LazyReport, error) {
	first := uint64(0)
	for _, it := range items[k:] {
		if it.sum.Events > 0 {
			first = it.sum.FirstSeq
			break
		}
	}
	if first == 0 && lastSeq > h.p.mark.Seq && h.p.tailCoverage(lastSeq+1) > lastSeq {
		first = lastSeq + 1 // the tail objects hold the first local events
	}
	if first == 0 {
		return nil, &errFull{"the newest segments within the budget hold no event"}
	}
	if s := h.p.cursor.ShippedThrough; s < first {
		return nil, &errFull{fmt.Sprintf("the cursor object's shipped_through %d is below the first local event %d", s, first)}
	}
	rep := &LazyReport{Budget: budget, FirstLocalSeq: first, Stats: h.lazyStats, RangeReads: h.lazyRanges,
		RemoteFirstSegment: items[0].id, RemoteLastSegment: items[k-1].id}
	for _, it := range items[:k] {
		if end, ended := h.p.lin.End(it.meta.Epoch); ended && end < first-1 {
			return nil, &errFull{fmt.Sprintf("%s is of epoch %d, which ended at %d, below the first local event %d", it.key, it.meta.Epoch, end, first)}
		}
		rep.RemoteSegments++
		rep.RemoteBytes += it.size
	}
	firsts := make([]uint64, k)
	for i, it := range items[:k] {
		firsts[i] = it.first
	}
	plausibleFirsts(firsts, h.p.mark.Seq, first)
	for i, it := range items[:k] {
		if it.first = firsts[i]; it.first != 0 {
			rep.FirstsKnown++
		}
	}
	return rep, nil
}

// lazyImport records the remote items as evicted in dir and writes the
// checkpoint with the consumers the restore arrived at.
func lazyImport(fsys localseg.FS, dir string, items []*segItem, cons map[string]uint64) error {
	segs := make([]localseg.EvictedSegment, 0, len(items))
	for _, it := range items {
		segs = append(segs, localseg.EvictedSegment{ID: it.id, Size: it.size, XXH64: it.meta.XXH64, First: it.first})
	}
	if err := localseg.ImportEvicted(fsys, dir, segs); err != nil {
		return fmt.Errorf("coldload: record the remote segments: %w", err)
	}
	if err := localseg.ImportCheckpoint(fsys, dir, cons); err != nil {
		return fmt.Errorf("coldload: write the checkpoint of a lazy hydrate: %w", err)
	}
	return nil
}

// consumersAfter is the consumer state the restored frames (t) and the
// cursor plan's frames give: what the restored store's consumers are.
func consumersAfter(t *consumerTracker, frames []frame.Frame) map[string]uint64 {
	state := map[string]uint64{}
	if t != nil {
		t.before.apply(state)
		t.after.apply(state)
	}
	for _, f := range frames {
		switch f.Kind {
		case frame.KindConsumerCreate:
			if _, ok := state[f.Consumer]; !ok {
				state[f.Consumer] = 0
			}
		case frame.KindAck:
			state[f.Consumer] = max(state[f.Consumer], f.Seq)
		case frame.KindConsumerDelete:
			delete(state, f.Consumer)
		}
	}
	return maps.Clone(state)
}

// asFull reports whether err asks for a full download, and why.
func asFull(err error) (string, bool) {
	var f *errFull
	if errors.As(err, &f) {
		return f.reason, true
	}
	return "", false
}
