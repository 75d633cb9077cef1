package emulator_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// flipLocal flips one byte in the middle of segment id's file in dir and
// returns the bytes it held before.
func flipLocal(t *testing.T, dir string, id uint64) (before, after []byte) {
	t.Helper()
	p := filepath.Join(dir, localseg.SegmentFileName(id))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	before = bytes.Clone(b)
	b[len(b)/2] ^= 0x08
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return before, b
}

// TestHealFromTheBucket (issue 16, self-healing) on both emulators: a
// flipped byte in an old sealed segment no longer fails every read. The
// segment is replaced by its bucket copy at the first read that finds it,
// or by the next start. Then every event reads back byte for byte through
// scan, per-execution read, pull and stream. With no good copy in the
// bucket, the shard reports the segment and is not ready, and nothing on
// the disk changes. Once the object is back, a read heals it.
func TestHealFromTheBucket(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			v := newEnv(t, be, false)
			ctx := ctxT(t)
			opts := bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true}
			l := open(t, opts)
			execs := execsOf(0, 1, 5)
			var want []localseg.Record
			for i := 0; i < 400; i++ {
				e := evictEvent(execs, i)
				res, err := l.Append(ctx, e)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
			}
			if _, err := l.Ship(ctx, true); err != nil {
				t.Fatal(err)
			}
			snap, err := l.Store().Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			for _, seg := range snap.Segments {
				if seg.Sealed {
					ids = append(ids, seg.ID)
				}
			}
			if len(ids) < 8 {
				t.Fatalf("only %d sealed segments", len(ids))
			}
			dir := l.Dir()

			// At a read.
			flipLocal(t, dir, ids[2])
			readAllBack(t, l, execs, want)
			if st := l.Store().RemoteStats(); st.Healed != 1 || st.Corrupt != 0 || !l.Store().IsEvicted(ids[2]) {
				t.Fatalf("after a read over the flipped segment: %+v", st)
			}
			if ok, why := l.Ready(); !ok {
				t.Fatalf("not ready after the heal: %s", why)
			}
			closeLog(t, l)

			// At the next start (the open would refuse it as a divergence
			// before self-healing).
			flipLocal(t, dir, ids[4])
			l = open(t, opts)
			if st := l.Store().RemoteStats(); st.Healed != 1 || !l.Store().IsEvicted(ids[4]) {
				t.Fatalf("after a start over the flipped segment: %+v", st)
			}
			readAllBack(t, l, execs, want)

			// No good copy: the object is gone.
			key := blobtier.SegmentKey(0, ids[6])
			good, _, err := v.b.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.b.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			_, flipped := flipLocal(t, dir, ids[6])
			if _, err := l.Scan(ctx, 0, len(want)); !errors.Is(err, localseg.ErrCorrupt) {
				t.Fatalf("a scan over a corrupt segment with no copy: %v", err)
			}
			if p, err := l.Scan(ctx, want[len(want)-10].Seq, 100); err != nil || len(p.Records) != 9 {
				t.Fatalf("a scan past the corrupt segment: %d records, %v", len(p.Records), err)
			}
			ok, why := l.Ready()
			if ok || !strings.Contains(why, "segment") {
				t.Fatalf("ready %v (%q) with a corrupt segment and no copy", ok, why)
			}
			if st := l.Store().RemoteStats(); st.Corrupt != 1 || st.Healed != 1 {
				t.Fatalf("stats with no copy: %+v", st)
			}
			if now, err := os.ReadFile(filepath.Join(dir, localseg.SegmentFileName(ids[6]))); err != nil || !bytes.Equal(now, flipped) {
				t.Fatalf("the refused heal changed the segment file: %v", err)
			}
			late := evictEvent(execs, 9999)
			res, err := l.Append(ctx, late)
			if err != nil {
				t.Fatalf("appends must go on: %v", err)
			}
			want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: late.ExecutionID, TransactionID: late.TransactionID, Payload: late.Payload})

			// The object is put back: the next read heals.
			if err := v.b.PutIfAbsent(ctx, key, good, l.Status().Epoch); err != nil {
				t.Fatal(err)
			}
			readAllBack(t, l, execs, want)
			if st := l.Store().RemoteStats(); st.Corrupt != 0 || st.Healed != 2 {
				t.Fatalf("stats after the object came back: %+v", st)
			}
			if ok, why := l.Ready(); !ok {
				t.Fatalf("not ready after the heal: %s", why)
			}
			closeLog(t, l)
		})
	}
}
