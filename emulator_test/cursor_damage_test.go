package emulator_test

import (
	"maps"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// Issue 12 finding 5 (the owner's half), on buckets with compare-and-swap:
// the owner starts over a damaged cursor object and rebuilds it.
func TestOwnerRebuildsADamagedCursorObject(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := ctxT(t)
			v := newEnv(t, be, false)
			root := t.TempDir()
			opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true}
			l := open(t, opts)
			appendN(t, l, execsOf(0, 1, 3), 0, 40, 1)
			if _, err := l.Pull(ctx, "c", 100); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Ack(ctx, "c", 17); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			closeLog(t, l)
			damageObject(t, v, blobtier.CursorKey(0))
			l = open(t, opts)
			c, _, err := tailbatch.ReadCursor(ctx, v.b, 0)
			if err != nil {
				t.Fatalf("the cursor object was not rebuilt: %v", err)
			}
			if c.ShippedThrough != 40 || !maps.Equal(c.Consumers, map[string]uint64{"c": 17}) {
				t.Fatalf("rebuilt cursor object %+v", c)
			}
			closeLog(t, l)
		})
	}
}
