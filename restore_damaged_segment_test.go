package bucketlog

import (
	"errors"
	"slices"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// The owner's last segment object is damaged (a seal's put that landed
// damaged before the owner stopped, or bit rot) while the tail objects it
// shipped before the seal hold its events: a restore passes over it by
// name and restores everything (coldload's damagedseg.go). The restored
// store then goes on as the owner, seals and ships above it; a second
// restore passes over the damaged object again, now as one that held no
// event, and restores both owners' events.
func TestRestorePassesOverADamagedLastSegment(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	defer b.Close()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
	for i := 1; i <= 8; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, false); err != nil { // tail 1..8 and the cursor object
		t.Fatal(err)
	}
	// Every put of segment 1 lands damaged and the deletes before each
	// retry fail: the owner's check after the put fails, it keeps the tail
	// objects, and it stops with the damaged object in the bucket.
	bad := blobtier.SegmentKey(0, 1)
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Corrupt, Key: bad})
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpDelete, Kind: faultbucket.Refuse, Key: bad})
	if _, err := l.Ship(ctx, true); err == nil {
		t.Fatal("the seal's ship reported success over a damaged put")
	}
	l.Close()
	fb.Clear()

	dir := t.TempDir()
	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dir})
	if err != nil {
		t.Fatalf("restore over a damaged last segment whose events tail objects hold: %v", err)
	}
	if rep.LastSeq != 8 || !slices.Equal(rep.DamagedSegments, []string{bad}) {
		t.Fatalf("restore: through %d, damaged segments %v; want 8 and [%s]", rep.LastSeq, rep.DamagedSegments, bad)
	}

	l = mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	for i := 9; i <= 12; i++ {
		if _, err := l.Append(ctx, ev("2", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatalf("the restored owner ships above the damaged segment: %v", err)
	}
	l.Close()

	rep, err = Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("second restore: %v", err)
	}
	if rep.LastSeq != 12 || !slices.Equal(rep.DamagedSegments, []string{bad}) {
		t.Fatalf("second restore: through %d, damaged segments %v; want 12 and [%s]", rep.LastSeq, rep.DamagedSegments, bad)
	}

	// RED: an intact object at that id is no damaged leftover but a
	// segment the store never held: the owner refuses to open over it.
	if err := b.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, bad, []byte{}); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(ctx, Options{Dir: dir, Bucket: b, NoBackground: true}); !errors.Is(err, ErrDiverged) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("open with an intact foreign segment at the passed-over id: %v, want ErrDiverged", err)
	}
}
