package bucketlog

import (
	"errors"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// Simulation class 15: a tail object of ours damaged in the bucket while
// the local store holds its events neither bricks Open nor counts as
// shipped, and the next tick ships its events again: under the same key
// (the newest object: the upload replaces the damaged one) or under
// another (an older one above the cursor object's shipped_through, which
// the rebuilt cursor would count; a restore passes over the damaged
// object left behind). A restore from the bucket alone has every event.
func TestDamagedTailObjectAtStartIsShippedAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  uint64 // the damaged tail object's first sequence
		damage string
	}{{"newest", 9, blobtier.TailKey(0, 9, 10)}, {"above_cursor_object", 6, blobtier.TailKey(0, 6, 8)}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			raw := memblob.OpenBucket(nil)
			fb := faultbucket.New(raw, 1)
			b := blobtier.New(fb.Bucket(), blobtier.Options{})
			defer b.Close()
			opts := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true}
			l := mustOpen(t, opts)
			n := 0
			appendShip := func(k int) {
				for range k {
					n++
					if _, err := l.Append(ctx, ev("1", n)); err != nil {
						t.Fatal(err)
					}
				}
				l.Ship(ctx, false)
			}
			appendShip(5) // tail 1..5, cursor object at 5
			fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: blobtier.CursorKey(0)})
			appendShip(3) // tail 6..8, the cursor object stays at 5
			appendShip(2) // tail 9..10
			l.Close()
			fb.Clear()
			damageAtRest(t, raw, tc.damage)

			l, err := Open(ctx, opts)
			if err != nil {
				t.Fatalf("Open with a damaged tail object of ours and its events on disk: %v", err)
			}
			defer l.Close()
			if got := l.ShippedThrough(); got >= tc.first {
				t.Fatalf("shipped through %d at start, counting the damaged %s", got, tc.damage)
			}
			if _, _, err := b.Get(ctx, tc.damage); !errors.Is(err, blobtier.ErrCorrupt) {
				t.Fatalf("the damaged tail object after Open: %v (Open deletes nothing: a read damaged on the way looks the same)", err)
			}
			if _, err := l.Ship(ctx, false); err != nil || l.ShippedThrough() != 10 {
				t.Fatalf("ship after the restart: shipped %d, %v", l.ShippedThrough(), err)
			}
			rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
			if err != nil || rep.LastSeq != 10 {
				t.Fatalf("restore from the bucket alone: %+v, %v", rep, err)
			}
		})
	}
}

// A damaged tail object whose metadata names other bytes than the local
// store holds for its sequences is no object of ours: Open refuses it as a
// diverged history and deletes nothing.
func TestDamagedForeignTailObjectRefusedAtStart(t *testing.T) {
	ctx := ctxT(t)
	raw := memblob.OpenBucket(nil)
	b := blobtier.New(raw, blobtier.Options{})
	defer b.Close()
	opts := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true}
	l := mustOpen(t, opts)
	for i := 1; i <= 4; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	key := blobtier.TailKey(0, 1, 4)
	foreign := []byte("another writer's frames, of another history")
	if err := raw.WriteAll(ctx, key, foreign[:10], &blob.WriterOptions{Metadata: blobtier.MetaOf(foreign, 0).Encode()}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, opts); !errors.Is(err, ErrDiverged) {
		t.Fatalf("Open over a damaged foreign tail object: %v, want ErrDiverged", err)
	}
	if ok, _ := raw.Exists(ctx, key); !ok {
		t.Fatal("the refused Open deleted the foreign tail object")
	}
}
