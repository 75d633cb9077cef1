package bucketlog

import (
	"context"
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

// A damaged last tail object with no intact copy anywhere, holding only
// events beyond the cursor object's shipped_through (here its events were
// shipped, then damaged at rest while the cursor write was refused; a put
// that landed damaged and was never put again leaves the same bucket): a
// restore cannot tell it from garbage no report promised, and it must not
// brick on garbage, so it keeps everything through shipped_through and
// names the skipped object in its report (never a silently shorter log:
// coldload's damagedtail.go; TestDamagedLastTailBeyondShipped in coldload
// keeps every other damaged object a hard error naming its key).
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
		rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir(), AllowPartial: partial})
		if err != nil {
			t.Fatalf("restore (partial %v) over a damaged last tail object beyond shipped_through: %v", partial, err)
		}
		if rep.LastSeq != 5 || len(rep.DamagedTails) != 1 || rep.DamagedTails[0] != key {
			t.Fatalf("restore (partial %v): through %d, damaged tails %v; want 5 and [%s]", partial, rep.LastSeq, rep.DamagedTails, key)
		}
	}
}
