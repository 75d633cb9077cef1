package coldload_test

import (
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

// TestLineageOnEmulators: the zombie-after-cut bucket on each
// real-protocol emulator, where the epoch travels as object metadata: the
// restore holds the new owner's history and counts the zombie's object;
// read without the lineage (the RED control) it holds the zombie's.
func TestLineageOnEmulators(t *testing.T) {
	if testing.Short() {
		t.Skip("emulators in -short mode")
	}
	starts := map[string]func() (emu, error){
		"gofakes3":        func() (emu, error) { return emulator.StartS3() },
		"fake-gcs-server": func() (emu, error) { return emulator.StartGCS() },
	}
	for name, start := range starts {
		t.Run(name, func(t *testing.T) {
			e, err := start()
			if err != nil {
				t.Fatalf("start %s: %v", name, err)
			}
			t.Cleanup(func() { e.Close() })
			if err := e.CreateBucket("log"); err != nil {
				t.Fatal(err)
			}
			raw, err := e.OpenBucket(ctxT(t), "log")
			if err != nil {
				t.Fatal(err)
			}
			b := blobtier.New(raw, blobtier.Options{})
			t.Cleanup(func() { b.Close() })
			zombieAfterCut(t, b, true)
			dir, rep := mustHydrate(t, b, 0, coldload.Options{})
			wantHistory(t, payloads(t, dir), 11, func(s uint64) string {
				if s > 8 {
					return ownerPayload(s)
				}
				return plain(s)
			})
			if rep.ZombieObjects != 1 {
				t.Fatalf("zombie objects %d", rep.ZombieObjects)
			}
			// RED control: without the lineage the two histories collide.
			_, err = coldload.Hydrate(ctxT(t), noLineage{b}, 0, target(t, 0), coldload.Options{})
			mustErrIs(t, err, coldload.ErrConflict)
		})
	}
}
