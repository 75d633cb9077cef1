package coldload_test

import (
	"context"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"testing"
)

// Finding 5: a damaged cursor object does not stop a restore. The restore
// goes on from the segments and tail objects, takes the consumers from the
// frames, skips the shipped_through check and reports the damage; verify
// lists it as a problem and still checks everything else.
func TestDamagedCursorObjectDoesNotBrickTheRestore(t *testing.T) {
	damages := []struct {
		name string
		do   func(t *testing.T, b blobtier.Bucket, raw func(string, func([]byte) []byte))
	}{
		{"flipped at rest", func(t *testing.T, b blobtier.Bucket, raw func(string, func([]byte) []byte)) {
			raw(blobtier.CursorKey(0), func(d []byte) []byte { d[3] ^= 0x40; return d })
		}},
		{"valid digest, body does not decode", func(t *testing.T, b blobtier.Bucket, _ func(string, func([]byte) []byte)) {
			if err := b.Put(context.Background(), blobtier.CursorKey(0), []byte(`{"v":1,"shipped_through":`)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			b, rawB := memBucket(t)
			o := newOwner(t, b, 0, 1024)
			o.append(10)
			o.pullAck("c", 4)
			o.append(20)
			o.seal()
			o.publish()
			o.append(5)
			o.ship()
			want := o.records()
			d.do(t, b, func(key string, f func([]byte) []byte) { rewriteAtRest(t, rawB, key, f) })

			dir, rep := mustHydrate(t, b, 0, coldload.Options{})
			if !rep.CursorDamaged || rep.LastSeq != 35 || rep.ShippedThrough != 0 {
				t.Fatalf("report %+v", rep)
			}
			sameRecords(t, allRecords(t, openRO(t, dir)), want)
			if got := consumersOf(t, dir); len(got) != 1 || got["c"] != 4 {
				t.Fatalf("consumers %+v, want c at 4 from the frames", got)
			}

			vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(vr.Problems) != 1 || vr.Problems[0].Key != blobtier.CursorKey(0) || vr.Problems[0].Class != coldload.ProblemCorrupt {
				t.Fatalf("verify problems %+v", vr.Problems)
			}
			if s := vr.Shards[0]; s.Through != 35 || s.Segments == 0 {
				t.Fatalf("verify stopped at the cursor object: %+v", s)
			}
		})
	}
}
