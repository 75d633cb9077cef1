package coldload

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"

	"github.com/bucketlog/bucketlog/frame"
)

// Which consumers exist after a restore (docs/FORMAT.md §9.1 step 7, issue 12 finding 6).
//
// The restored frames alone can bring back a consumer its owner deleted: a
// ConsumerDelete written after the last event never rides in a tail object
// (a tail object ends at its last Event frame), while the same tick rewrites
// the cursor object without the consumer. The cursor object alone can lose
// one: a consumer created after its last write is only in the frames.
//
// The cursor object was written after every frame that precedes the frame
// of its shipped_through event S (the owner writes it after the tail put
// that shipped S, with the consumers it holds then). So for the frames
// positioned before event S it is the newer word; frames after event S's
// frame may be older or newer than it. The consumers after a restore are
// therefore the cursor object's (clamped to the restored tip) with the
// consumer frames positioned at or after event S replayed on top, in order.
// Replaying frames the cursor object already reflects changes nothing
// (creating a live consumer is a no-op, an ack keeps the higher cursor, and
// a run of frames that deletes a consumer ends in the same state however
// often it is replayed). Without a readable cursor object the frames alone
// decide.
//
// A consumer the cursor object tombstones (its "deleted" field, written
// when the object dropped it) was deleted before the write: its frames at or
// after event S are older than the object unless a ConsumerDelete of it
// comes among them (what follows the last one is newer). Without the
// tombstone a ConsumerCreate after event S that reached the bucket in a
// sealed segment, whose ConsumerDelete did not, brings it back.

// consEffect is what a run of consumer frames does to one consumer.
type consEffect struct {
	reset   bool   // a ConsumerDelete: whatever came before is gone
	exists  bool   // a ConsumerCreate or Ack after the last delete
	created bool   // a ConsumerCreate after the last delete
	ack     uint64 // the highest Ack after the last delete
}

// consEffects is what a run of consumer frames does, per consumer. The zero
// value (nil) is the empty run; add and then need a non-nil map.
type consEffects map[string]consEffect

func (e consEffects) add(f *frame.Frame) {
	c := e[f.Consumer]
	switch f.Kind {
	case frame.KindConsumerCreate:
		c.exists, c.created = true, true
	case frame.KindAck:
		// An Ack also (re-)establishes its consumer, as on replay.
		c.exists, c.ack = true, max(c.ack, f.Seq)
	case frame.KindConsumerDelete:
		c = consEffect{reset: true}
	default:
		return
	}
	e[f.Consumer] = c
}

// then appends the run f after e.
func (e consEffects) then(f consEffects) {
	for name, fc := range f {
		if fc.reset {
			e[name] = fc
			continue
		}
		c := e[name]
		c.exists = c.exists || fc.exists
		c.created = c.created || fc.created
		c.ack = max(c.ack, fc.ack)
		e[name] = c
	}
}

// apply plays the run over state (consumer → cursor).
func (e consEffects) apply(state map[string]uint64) {
	for name, c := range e {
		if c.reset {
			delete(state, name)
		}
		if !c.exists {
			continue
		}
		if cur, ok := state[name]; !ok || c.ack > cur {
			state[name] = c.ack
		}
	}
}

// applyOverCursor plays the run of frames at or after the cursor object's
// event over the cursor object's consumers (state). Unlike replay, an Ack
// alone does not establish a consumer the object does not list: a consumer
// alive at an Ack after the object's write was alive at the write (a new one
// is created by a ConsumerCreate frame, which would be in the run), so the
// Ack predates the write and the object's word, deleted, is the newer. A
// consumer in deleted (the object's tombstones) comes back only by frames
// after a ConsumerDelete of it.
func (e consEffects) applyOverCursor(state map[string]uint64, deleted map[string]uint64) {
	for name, c := range e {
		if _, listed := state[name]; !listed {
			if _, tomb := deleted[name]; tomb && !c.reset || !tomb && !c.created {
				continue
			}
		}
		consEffects{name: c}.apply(state)
	}
}

// consumerTracker gathers the consumer frames of a restore, split at the
// frame of event split (the cursor object's shipped_through): before holds
// those positioned before it, after those at or after it. Positions are the
// last event preceding a frame.
type consumerTracker struct {
	split         uint64
	before, after consEffects
}

func newConsumerTracker(split uint64) *consumerTracker {
	return &consumerTracker{split: split, before: consEffects{}, after: consEffects{}}
}

// add records one consumer frame positioned after event pos.
func (t *consumerTracker) add(pos uint64, f *frame.Frame) {
	if pos < t.split {
		t.before.add(f)
	} else {
		t.after.add(f)
	}
}

// segConsumers is what one segment's consumer frames do: before and after
// the split when the segment holds events, all of them in all when it holds
// none (their position is the previous segment's last event, known only in
// the walk).
type segConsumers struct {
	before, after, all consEffects
}

// scanSegmentConsumers collects the consumer frames of a verified segment
// image. Event frames are skipped by their header (the image was verified:
// sequences run from sum.FirstSeq without a hole); only the consumer frames
// are decoded.
func scanSegmentConsumers(data []byte, sum frame.SegmentSummary, split uint64) (*segConsumers, error) {
	if sum.Frames == sum.Events {
		return nil, nil
	}
	sc := &segConsumers{before: consEffects{}, after: consEffects{}, all: consEffects{}}
	eventPrefix := []byte(`{"Event":`)
	last := sum.FirstSeq - 1 // the last event before the frame at off
	for off := 0; off < len(data); {
		if len(data)-off < frame.HeaderSize {
			return nil, corruptf("frame header at offset %d runs past the end", off)
		}
		n := int(binary.LittleEndian.Uint32(data[off+4:]))
		end := off + frame.HeaderSize + n
		if n < 0 || end > len(data) {
			return nil, corruptf("frame at offset %d runs past the end", off)
		}
		body := data[off+frame.HeaderSize : end]
		if bytes.HasPrefix(body, eventPrefix) {
			last++
			off = end
			continue
		}
		f, _, err := frame.Decode(data[off:end])
		if err != nil {
			return nil, frameErr(off, err)
		}
		switch {
		case f.Kind == frame.KindEvent:
			last++
		case sum.Events == 0:
			sc.all.add(&f)
		case last < split:
			sc.before.add(&f)
		default:
			sc.after.add(&f)
		}
		off = end
	}
	return sc, nil
}

// addSegment appends a segment's consumer frames; prevLast is the last event
// before the segment (used for a segment without events).
func (t *consumerTracker) addSegment(sc *segConsumers, prevLast uint64) {
	if sc == nil {
		return
	}
	// A segment's frames before the split all precede its frames after it,
	// and everything gathered so far precedes both.
	t.before.then(sc.before)
	t.after.then(sc.after)
	if len(sc.all) > 0 {
		if prevLast < t.split {
			t.before.then(sc.all)
		} else {
			t.after.then(sc.all)
		}
	}
}

// consumerPlan is what the restore appends so that the restored store's
// consumers are the right ones.
type consumerPlan struct {
	frames  []frame.Frame
	deleted []string
	clamped []ClampedCursor
	count   int
}

// planConsumers compares the consumers the restored frames produce with the
// ones the cursor object c (clamped to tip) and the frames after its
// shipped_through produce, and returns the frames that make the first into
// the second: a ConsumerDelete for a consumer the cursor object shows was
// deleted, a ConsumerCreate (and Ack) for one only the cursor object knows,
// an Ack where the cursor object is further. A cursor is never lowered: an
// ack in the frames above the cursor object's stays (redelivery is the
// cursor object's promise, never loss).
func planConsumers(t *consumerTracker, c, deleted map[string]uint64, tip uint64) consumerPlan {
	var cp consumerPlan
	restored := map[string]uint64{}
	t.before.apply(restored)
	t.after.apply(restored)
	want := make(map[string]uint64, len(c))
	for _, name := range slices.Sorted(maps.Keys(c)) {
		seq := c[name]
		if seq > tip {
			cp.clamped = append(cp.clamped, ClampedCursor{Consumer: name, Cursor: seq, ClampedTo: tip})
			seq = tip
		}
		want[name] = seq
	}
	t.after.applyOverCursor(want, deleted)
	for _, name := range slices.Sorted(maps.Keys(restored)) {
		if _, ok := want[name]; !ok {
			cp.frames = append(cp.frames, frame.Frame{Kind: frame.KindConsumerDelete, Consumer: name})
			cp.deleted = append(cp.deleted, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		seq := want[name]
		cur, ok := restored[name]
		if !ok {
			cp.frames = append(cp.frames, frame.Frame{Kind: frame.KindConsumerCreate, Consumer: name})
		}
		if seq > 0 && (!ok || seq > cur) {
			cp.frames = append(cp.frames, frame.Frame{Kind: frame.KindAck, Consumer: name, Seq: seq})
		}
	}
	cp.count = len(want)
	return cp
}
