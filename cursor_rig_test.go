package bucketlog

import (
	"context"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// faultShard is the setup the cursor object's hold, repair and tombstone
// tests share: a memblob bucket (raw, to damage objects at rest) behind a
// fault injector (fb), and the options of a shard that ships to it with no
// background loop, so every ship pass is the test's.
type faultShard struct {
	raw  *blob.Bucket
	fb   *faultbucket.Bucket
	b    blobtier.Bucket
	opts Options
}

func newFaultShard(t *testing.T, bopts blobtier.Options) faultShard {
	t.Helper()
	raw := memblob.OpenBucket(nil)
	fb := faultbucket.New(raw, 1)
	b := blobtier.New(fb.Bucket(), bopts)
	t.Cleanup(func() { b.Close() })
	opts := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, StartupTimeout: 2 * time.Second, Logger: quiet()}
	return faultShard{raw: raw, fb: fb, b: b, opts: opts}
}

// appendEvents appends events from..to of execution "1".
func appendEvents(t *testing.T, ctx context.Context, l *Log, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// shipThrough runs a ship pass (sealing the active segment first when
// seal) and wants it to answer shipped through want.
func shipThrough(t *testing.T, ctx context.Context, l *Log, seal bool, want uint64) {
	t.Helper()
	if rep, err := l.Ship(ctx, seal); err != nil || rep.ShippedThrough != want {
		t.Fatalf("ship: %+v %v (want shipped through %d)", rep, err, want)
	}
}
