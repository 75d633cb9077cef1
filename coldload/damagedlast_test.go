package coldload_test

import (
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// The owner's last tail object landed damaged and the owner could not put
// it again (it stopped, its disk failed; seed 22239 of the simulation):
// the object holds only events beyond the cursor object's shipped_through,
// which no report ever promised, and nothing after it. A restore must not
// brick on that garbage: it restores through shipped_through, skips the
// object and names it (Report.DamagedTails). Every other damaged tail
// object that holds events no intact object holds still fails the restore
// with its key (RED controls): one holding an event at or below
// shipped_through, one without an intact cursor object to say what was
// shipped, and one followed by an intact object (a hole, not the end).
func TestDamagedLastTailBeyondShipped(t *testing.T) {
	bad := blobtier.TailKey(0, 9, 12)
	for _, tc := range []struct {
		name    string
		shipped uint64 // the cursor object's shipped_through
		cursor  string // "ok", "none" or "damaged"
		after   bool   // an intact tail 13..14 after the damaged one
		skip    bool
	}{
		{name: "beyond shipped", shipped: 8, cursor: "ok", skip: true},
		{name: "holds a shipped event", shipped: 10, cursor: "ok"},
		{name: "no cursor object", shipped: 8, cursor: "none"},
		{name: "damaged cursor object", shipped: 8, cursor: "damaged"},
		{name: "an object after it", shipped: 8, cursor: "ok", after: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, raw := memBucket(t)
			put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
			put(t, b, blobtier.TailKey(0, 6, 8), frames(t, evFrames(6, 8, plain)...))
			put(t, b, bad, frames(t, evFrames(9, 12, plain)...))
			if tc.after {
				put(t, b, blobtier.TailKey(0, 13, 14), frames(t, evFrames(13, 14, plain)...))
			}
			if tc.cursor != "none" {
				putCursor(t, b, 0, tailbatch.Cursor{ShippedThrough: tc.shipped, Consumers: map[string]uint64{}})
			}
			if tc.cursor == "damaged" {
				rewriteAtRest(t, raw, blobtier.CursorKey(0), func(d []byte) []byte { return d[:len(d)/2] })
			}
			rewriteAtRest(t, raw, bad, func(d []byte) []byte { d[len(d)/2] ^= 0x10; return d })
			dir := target(t, 0)
			rep, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
			if !tc.skip {
				mustErrIs(t, err, blobtier.ErrCorrupt)
				mustContain(t, err, bad)
				absentOrEmpty(t, dir)
				return
			}
			if err != nil {
				t.Fatalf("hydrate: %v", err)
			}
			wantHistory(t, payloads(t, dir), 8, plain)
			if len(rep.DamagedTails) != 1 || rep.DamagedTails[0] != bad || rep.LastSeq != 8 {
				t.Fatalf("report: damaged tails %v, last %d; want [%s], 8", rep.DamagedTails, rep.LastSeq, bad)
			}
		})
	}
}
