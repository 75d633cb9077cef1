package bucketlog

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// damageAtRest rewrites key with the first half of its bytes and its
// metadata kept: our own object, damaged where it lies.
func damageAtRest(t *testing.T, raw *blob.Bucket, key string) {
	t.Helper()
	ctx := context.Background()
	attrs, err := raw.Attributes(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := raw.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.WriteAll(ctx, key, data[:len(data)/2], &blob.WriterOptions{Metadata: attrs.Metadata}); err != nil {
		t.Fatal(err)
	}
}

// A damaged tail object with no intact copy anywhere (the disk that held
// its events is gone) is a real loss: a restore fails naming the object,
// with or without AllowPartial, also when it was the last object and the
// cursor object never vouched for its events (a restore that passes over
// damaged objects must not return a silently shorter log).
func TestRestoreReportsADamagedLastTailObject(t *testing.T) {
	ctx := ctxT(t)
	raw := memblob.OpenBucket(nil)
	fb := faultbucket.New(raw, 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	defer b.Close()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
	for i := 1; i <= 8; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			l.Ship(ctx, false) // tail 1..5, cursor object at 5
			fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: blobtier.CursorKey(0)})
		}
	}
	l.Ship(ctx, false) // tail 6..8; the cursor object stays at 5
	l.Close()
	fb.Clear()
	key := blobtier.TailKey(0, 6, 8)
	damageAtRest(t, raw, key)

	for _, partial := range []bool{false, true} {
		_, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir(), AllowPartial: partial})
		if !errors.Is(err, blobtier.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Fatalf("restore (partial %v) over a damaged last tail object: %v, want a verification error naming %s", partial, err, key)
		}
	}
}
