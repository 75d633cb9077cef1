package coldload_test

import (
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// A segment object whose bytes fail verification (a seal's put that landed
// damaged before its owner stopped, or bit rot) is passed over in two cases
// only (docs/FORMAT.md §9.2):
//   - it is the last segment listed: the restore goes on from the segment
//     before it with the tail objects, which hold the same events, and must
//     reach an intact cursor object's shipped_through (seeds 2028960,
//     2029595 and 2030972 of the simulation);
//   - the next segment starts right where the one before it ended, so it
//     held no event of the log, and an intact cursor object's
//     shipped_through is at or above that start (its consumer frames, if
//     any, are older than the cursor object).
//
// Every other damaged segment still fails the restore naming its key (the
// RED cases below): events it held that no intact object holds, or that a
// report promised, would otherwise be lost without a word.
func TestDamagedSegmentPassedOver(t *testing.T) {
	bad := blobtier.SegmentKey(0, 2)
	type tc struct {
		name    string
		tails   [][2]uint64 // intact tail objects beyond segment 1 (1..5)
		badSeg  [2]uint64   // the damaged segment 2's events
		next    [2]uint64   // an intact segment 3 (0,0: none)
		shipped uint64      // the cursor object's shipped_through
		cursor  string      // "ok", "none" or "damaged"
		want    uint64      // restored through (0: refused)
	}
	for _, c := range []tc{
		{name: "last, tails hold its events", tails: [][2]uint64{{6, 8}, {9, 10}}, badSeg: [2]uint64{6, 10}, shipped: 10, cursor: "ok", want: 10},
		{name: "last, tails reach beyond it", tails: [][2]uint64{{6, 10}, {11, 12}}, badSeg: [2]uint64{6, 10}, shipped: 12, cursor: "ok", want: 12},
		{name: "last, its unshipped events", tails: [][2]uint64{{6, 8}}, badSeg: [2]uint64{6, 10}, shipped: 8, cursor: "ok", want: 8},
		{name: "last, no tail and nothing shipped", badSeg: [2]uint64{6, 10}, shipped: 5, cursor: "ok", want: 5},
		{name: "next starts where the previous ended", badSeg: [2]uint64{6, 10}, next: [2]uint64{6, 12}, shipped: 12, cursor: "ok", want: 12},
		// RED: a shipped event only the damaged segment held.
		{name: "last, holds a shipped event", tails: [][2]uint64{{6, 8}}, badSeg: [2]uint64{6, 10}, shipped: 10, cursor: "ok"},
		{name: "last, a hole before the tails", tails: [][2]uint64{{9, 10}}, badSeg: [2]uint64{6, 10}, shipped: 10, cursor: "ok"},
		{name: "last, no cursor object", tails: [][2]uint64{{6, 10}}, badSeg: [2]uint64{6, 10}, cursor: "none"},
		{name: "last, damaged cursor object", tails: [][2]uint64{{6, 10}}, badSeg: [2]uint64{6, 10}, shipped: 10, cursor: "damaged"},
		// RED: in the middle, it held events (the next starts later),
		// even when tail objects hold them.
		{name: "middle, held events", tails: [][2]uint64{{6, 10}}, badSeg: [2]uint64{6, 10}, next: [2]uint64{11, 12}, shipped: 12, cursor: "ok"},
		{name: "middle, consumer frames newer than the cursor object", badSeg: [2]uint64{6, 10}, next: [2]uint64{6, 12}, shipped: 5, cursor: "ok"},
		{name: "middle, no cursor object", badSeg: [2]uint64{6, 10}, next: [2]uint64{6, 12}, cursor: "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, raw := memBucket(t)
			put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
			put(t, b, bad, frames(t, evFrames(c.badSeg[0], c.badSeg[1], plain)...))
			if c.next != [2]uint64{} {
				put(t, b, blobtier.SegmentKey(0, 3), frames(t, evFrames(c.next[0], c.next[1], plain)...))
			}
			for _, r := range c.tails {
				put(t, b, blobtier.TailKey(0, r[0], r[1]), frames(t, evFrames(r[0], r[1], plain)...))
			}
			if c.cursor != "none" {
				putCursor(t, b, 0, tailbatch.Cursor{ShippedThrough: c.shipped, Consumers: map[string]uint64{}})
			}
			if c.cursor == "damaged" {
				rewriteAtRest(t, raw, blobtier.CursorKey(0), func(d []byte) []byte { return d[:len(d)/2] })
			}
			rewriteAtRest(t, raw, bad, func(d []byte) []byte { d[len(d)/3] ^= 0x04; return d })
			dir := target(t, 0)
			rep, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
			if c.want == 0 {
				mustErrIs(t, err, blobtier.ErrCorrupt)
				mustContain(t, err, bad)
				absentOrEmpty(t, dir)
				return
			}
			if err != nil {
				t.Fatalf("hydrate: %v", err)
			}
			wantHistory(t, payloads(t, dir), c.want, plain)
			if !slices.Equal(rep.DamagedSegments, []string{bad}) || rep.LastSeq != c.want {
				t.Fatalf("report: damaged segments %v, last %d; want [%s], %d", rep.DamagedSegments, rep.LastSeq, bad, c.want)
			}
			// The damaged id is a recorded jump (no file the bucket's object
			// could be compared with), and the restored store's ids go on
			// above every listed one: it never writes a key the bucket holds.
			ids := segmentFiles(t, dir)
			jumps, err := localseg.ReadJumps(localseg.OSFS{}, dir)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(ids, 2) || !slices.ContainsFunc(jumps, func(j localseg.Jump) bool { return j.From <= 2 && 2 < j.To }) || slices.Max(ids) < rep.NextSegment {
				t.Fatalf("segment files %v, jumps %v, next segment %d: want 2 a jump and the next above every listed id", ids, jumps, rep.NextSegment)
			}
			st := openRW(t, dir)
			if st.Tip() != c.want {
				t.Fatalf("the restored store opens at tip %d, want %d", st.Tip(), c.want)
			}
		})
	}
}

// A lazy hydrate that would leave segments 1 and 2 in the bucket cannot
// tell where the damaged last segment 3 starts (seed 2030972): it
// downloads everything instead, and the full download passes over segment
// 3 with the tail objects that hold its events.
func TestDamagedLastSegmentAfterRemoteOnesDownloadsAll(t *testing.T) {
	b, raw := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 10, plain)...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(11, 20, plain)...))
	last := frames(t, evFrames(21, 30, plain)...)
	bad := blobtier.SegmentKey(0, 3)
	put(t, b, bad, last)
	put(t, b, blobtier.TailKey(0, 21, 30), frames(t, evFrames(21, 30, plain)...))
	putCursor(t, b, 0, tailbatch.Cursor{V: 1, ShippedThrough: 30, Consumers: map[string]uint64{}})
	rewriteAtRest(t, raw, bad, func(d []byte) []byte { d[7] ^= 0x01; return d })
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: int64(len(last))})
	if rep.Lazy == nil || rep.Lazy.FullBecause == "" || !slices.Equal(rep.DamagedSegments, []string{bad}) {
		t.Fatalf("report %+v, lazy %+v: want a full download that passed over %s", rep, rep.Lazy, bad)
	}
	wantHistory(t, payloads(t, dir), 30, plain)
}

// The same with a damaged segment that held no event between the remote
// ones and an intact local one: the lazy walk cannot tell that the next
// segment starts where the remote ones end, so it downloads everything,
// and the full download passes over the empty damaged one.
func TestDamagedEmptySegmentAfterRemoteOnesDownloadsAll(t *testing.T) {
	b, raw := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 10, plain)...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(11, 20, plain)...))
	bad := blobtier.SegmentKey(0, 3)
	empty := frames(t, localseg.Frame{Kind: localseg.KindConsumerCreate, Consumer: "c"})
	put(t, b, bad, empty)
	last := frames(t, evFrames(21, 30, plain)...)
	put(t, b, blobtier.SegmentKey(0, 4), last)
	putCursor(t, b, 0, tailbatch.Cursor{V: 1, ShippedThrough: 30, Consumers: map[string]uint64{"c": 0}})
	rewriteAtRest(t, raw, bad, func(d []byte) []byte { d[7] ^= 0x01; return d })
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: int64(len(last) + len(empty))})
	if rep.Lazy == nil || rep.Lazy.FullBecause == "" || !slices.Equal(rep.DamagedSegments, []string{bad}) {
		t.Fatalf("report %+v, lazy %+v: want a full download that passed over %s", rep, rep.Lazy, bad)
	}
	wantHistory(t, payloads(t, dir), 30, plain)
}
