package emulator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
)

// TestFenceHydrateOverZombieTail, on each emulator: A (epoch 1) ships
// 1..3; B takes over (epoch 2, cut at 3); A appends 4..5 and ships them as
// a zombie tail object (epoch 1, beyond the cut) before its HEAD fences it.
// A third owner C hydrating an empty disk follows the chain (3 events) and
// opens: its start-up checks do not read the zombie tail as the bucket's
// tip. Then C's own 4 ships and a restore holds 1..3 of A and C's 4.
func TestFenceHydrateOverZombieTail(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			v := newEnv(t, be, false)
			ctx := ctxT(t)
			execs := execsOf(0, 1, 3)
			opts := func(dir string) bucketlog.Options {
				return bucketlog.Options{Dir: dir, Bucket: v.b, NoBackground: true, TailInterval: time.Hour, SealMaxAge: -1}
			}
			a := open(t, opts(t.TempDir()))
			appendN(t, a, execs, 1, 4, 1)
			if _, err := a.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			b := open(t, opts(t.TempDir()))
			closeLog(t, b)
			appendN(t, a, execs, 4, 6, 1)
			if _, err := a.Ship(ctx, false); !errors.Is(err, bucketlog.ErrFenced) {
				t.Fatalf("A's tick after the takeover: %v, want fenced", err)
			}
			c := open(t, opts(t.TempDir()))
			if s := snapshot(t, c); s.Tip != 3 {
				t.Fatalf("C's tip %d, want 3", s.Tip)
			}
			want := appendN(t, c, execs, 6, 7, 1)
			if _, err := c.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			closeLog(t, c)
			dir, rep := restore(t, v.b, 0, bucketlog.RestoreOptions{})
			got := readOnlyRecords(t, dir, 0, 1)
			if len(got.Records) != 4 || got.Records[3].Payload != want[0].Payload || rep.ZombieObjects == 0 {
				t.Fatalf("restore: %d records (last %+v), zombie objects %d", len(got.Records), got.Records[len(got.Records)-1], rep.ZombieObjects)
			}
		})
	}
}
