package coldload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/frame"
)

// flushBytes is how many bytes of recovered frames the tail phase gathers
// before one AppendRecovered (one fsync): large enough that a tail of many
// small objects does not cost an fsync each, small enough to bound memory.
const flushBytes = 4 << 20

// tailResult is what the tail phase did.
type tailResult struct {
	cursor     uint64 // highest sequence recovered contiguously
	used       int    // objects that contributed at least one event
	superseded int    // objects whose every event was already recovered
	records    int    // events recovered from tail objects
	gaps       []*GapError
	damaged    []string // damaged tail objects skipped beyond shipped_through
}

// ref is a recovered event frame kept for comparison with later objects.
type ref struct {
	key string
	raw []byte
}

// window holds the frames of the events recovered from tail objects that a
// later object may still repeat. Objects come sorted by first sequence, so
// once an object starting at F is processed no later one needs anything
// below F: the window stays as wide as the overlap between objects.
type window struct {
	lo   uint64 // sequence of refs[0]
	refs []ref
}

func (w *window) trim(below uint64) {
	if below <= w.lo {
		return
	}
	n := min(uint64(len(w.refs)), below-w.lo)
	clear(w.refs[:n])
	w.refs = w.refs[n:]
	w.lo += n
}

func (w *window) reset(next uint64) { w.refs, w.lo = nil, next }

func (w *window) add(seq uint64, r ref) {
	if len(w.refs) == 0 {
		w.lo = seq
	}
	w.refs = append(w.refs, r)
}

func (w *window) get(seq uint64) (ref, bool) {
	if seq < w.lo || seq-w.lo >= uint64(len(w.refs)) {
		return ref{}, false
	}
	return w.refs[seq-w.lo], true
}

// tailPhase recovers the events beyond the segments from tail objects, in
// ascending order. start is the last sequence the segments cover: tail
// objects ending at or below it were already compared with the segments and
// are superseded. Every other object is read (at most h.conc at once, in
// order), verified, and de-duplicated by sequence: events at or below the
// recovered position are compared with the frame already recovered (a
// different frame is a conflict naming both keys) and dropped, the rest are
// handed to apply in order. A hole before an object is a gap: Hydrate stops
// there (and fails unless allowPartial); Verify records it and resumes at
// the object.
//
// Consumer frames ride along: those positioned after the last event already
// recovered are kept, those among dropped events are dropped with them.
//
// In Hydrate a tail object that fails verification (damaged at rest, or a
// put that landed damaged) is passed over: when other objects hold its
// events (its owner shipped them again under another key), nothing is
// lost. When none does — a hole where it lies, or it held the last events —
// its verification error is returned, naming the key, with or without
// allowPartial: a real loss is a hard error, never a shortened replay. The
// one exception is the last events beyond the cursor object's
// shipped_through (unshippedDamage in damagedtail.go).
// Verify reports the damaged object itself.
func (h *run) tailPhase(ctx context.Context, start uint64, allowPartial bool, apply func([]frame.Frame) error) (tailResult, error) {
	res := tailResult{cursor: start}
	var todo []int
	for i, t := range h.p.tails {
		if h.zomb.isTail(i) {
			continue // a stale writer's, found while comparing with a segment
		}
		if t.last <= start {
			res.superseded++
			continue
		}
		todo = append(todo, i)
	}
	var (
		win              window
		pending          []frame.Frame
		pendingBytes     int
		prevKey          string
		fromKey, thruKey string            // the objects the pending frames come from
		damaged          = map[int]error{} // tail objects passed over as damaged (Hydrate)
	)
	// lost is the error of a damaged object holding sequences in [from, to].
	lost := func(from, to uint64) error {
		for i, err := range damaged {
			if t := h.p.tails[i]; t.last >= from && t.first <= to {
				return err
			}
		}
		return nil
	}
	flush := func() error {
		if apply == nil || len(pending) == 0 {
			return nil
		}
		err := apply(pending)
		clear(pending)
		pending, pendingBytes = pending[:0], 0
		if err != nil {
			return fmt.Errorf("coldload: append the frames of %s … %s: %w", fromKey, thruKey, err)
		}
		fromKey = ""
		return nil
	}
	err := fetchOrdered(ctx, h, todo, func(i int, frames []decoded) (bool, error) {
		t := h.p.tails[i]
		if t.first > res.cursor+1 {
			if err := lost(res.cursor+1, t.first-1); err != nil {
				return true, err
			}
			g := &GapError{Shard: h.p.shard, FromSeq: res.cursor + 1, ToSeq: t.first - 1,
				After: prevKey, Before: t.key}
			res.gaps = append(res.gaps, g)
			if !h.collect {
				if !allowPartial {
					return true, g
				}
				return true, nil
			}
			h.fail(g)
			res.cursor = t.first - 1
			win.reset(t.first)
		}
		win.trim(t.first)
		from := res.cursor // events at or below it are already recovered
		lastEvent := t.first - 1
		kept := 0
		var keep []decoded
		for _, d := range frames {
			if d.f.Kind != frame.KindEvent {
				if lastEvent >= from {
					keep = append(keep, d)
				}
				continue
			}
			lastEvent = d.f.Seq
			if d.f.Seq <= from {
				if r, ok := win.get(d.f.Seq); ok && !bytes.Equal(r.raw, d.raw) {
					c := &ConflictError{Seq: d.f.Seq, Key: r.key, OtherKey: t.key}
					if !h.collect {
						return true, c
					}
					h.fail(c)
					break
				}
				continue
			}
			keep = append(keep, d)
			kept++
		}
		if kept == 0 {
			res.superseded++
			return false, nil
		}
		res.used++
		res.records += kept
		for _, d := range keep {
			if d.f.Kind == frame.KindEvent {
				win.add(d.f.Seq, ref{key: t.key, raw: d.raw})
				res.cursor = d.f.Seq
			} else if h.cons != nil {
				h.cons.add(res.cursor, &d.f)
			}
			if apply != nil {
				pending = append(pending, d.f)
				pendingBytes += len(d.raw)
			}
		}
		if fromKey == "" {
			fromKey = t.key
		}
		thruKey = t.key
		prevKey = t.key
		if pendingBytes >= flushBytes {
			if err := flush(); err != nil {
				return true, err
			}
		}
		return false, nil
	}, func(i int, err error) { damaged[i] = err })
	if err != nil {
		return res, err
	}
	if err := lost(res.cursor+1, ^uint64(0)); err != nil {
		// Events only a damaged object held, and no object after it:
		// garbage when they were never shipped (damagedtail.go).
		if res.damaged = h.unshippedDamage(res.cursor, damaged); res.damaged == nil {
			return res, err
		}
	}
	return res, flush()
}

// fetched is one tail object read and decoded by fetchOrdered.
type fetched struct {
	frames []decoded
	err    error
}

// fetchOrdered reads and decodes the tail objects todo (indexes into
// h.p.tails) with up to h.conc reads in flight, and hands them to fn
// strictly in order. At most h.conc objects are held at once (read but not
// yet handed over), so memory is bounded by the window, not by the number
// of objects. fn returns stop to end early; fetchOrdered then cancels the
// reads still in flight and waits for them.
//
// damaged, when not nil and in Hydrate (not h.collect), is told of an
// object that failed verification instead of ending the walk; the walk
// goes on without it.
func fetchOrdered(ctx context.Context, h *run, todo []int, fn func(i int, frames []decoded) (stop bool, err error), damaged func(i int, err error)) error {
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Cancel first, then wait: the launcher may be blocked on a slot that
	// only an ended read or a cancellation frees.
	defer func() {
		cancel()
		wg.Wait()
	}()
	results := make([]chan fetched, len(todo))
	for k := range results {
		results[k] = make(chan fetched, 1)
	}
	slots := make(chan struct{}, h.conc)
	wg.Go(func() {
		for k, i := range todo {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				t := h.p.tails[i]
				data, meta, err := h.r.Get(ctx, t.key)
				if err != nil && errors.Is(err, blobtier.ErrCorrupt) && h.damagedZombie(ctx, i) {
					// A stale writer's, whatever its bytes (damagedtail.go):
					// a zombie to Verify too, not a problem.
					results[k] <- fetched{}
					return
				}
				if err != nil {
					results[k] <- fetched{err: &ObjectError{Key: t.key, Err: err}}
					return
				}
				h.read(len(data), i)
				frames, err := decodeTail(t, data)
				if err == nil {
					// The lineage rule: only the valid prefix goes on; an
					// object with none is a stale writer's, skipped.
					var valid bool
					if frames, valid = h.p.filterTail(t, meta.Epoch, frames); !valid {
						h.zomb.tail(i)
					}
				}
				results[k] <- fetched{frames: frames, err: err}
			})
		}
	})
	for k, i := range todo {
		var f fetched
		select {
		case f = <-results[k]:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-slots
		if f.err != nil {
			if !h.collect && damaged != nil && errors.Is(f.err, blobtier.ErrCorrupt) {
				damaged(i, f.err)
				continue
			}
			if !h.collect {
				return f.err
			}
			h.fail(f.err)
			continue
		}
		if h.zomb.isTail(i) {
			continue
		}
		stop, err := fn(i, f.frames)
		if stop || err != nil {
			return err
		}
	}
	return nil
}
