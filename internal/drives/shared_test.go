package drives

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
)

// memBucket is a fresh in-memory bucket, closed with the test.
func memBucket(t *testing.T) blobtier.Bucket {
	t.Helper()
	b, err := blobtier.Open(context.Background(), "mem://", blobtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// s3Bucket is a bucket on an in-process gofakes3, closed with the test.
func s3Bucket(t *testing.T) blobtier.Bucket {
	t.Helper()
	e, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBucket("drives"); err != nil {
		t.Fatal(err)
	}
	bb, err := e.OpenBucket(context.Background(), "drives")
	if err != nil {
		t.Fatal(err)
	}
	b := blobtier.New(bb, blobtier.Options{Timeout: time.Minute})
	t.Cleanup(func() { b.Close() })
	return b
}

// TestSharedDriveHolds: the shared-tier drive holds with 2 and 4 shards on
// an in-memory bucket and with 2 on gofakes3, and with 2 its JSON is the
// seed's (CHECKLIST §3.9).
func TestSharedDriveHolds(t *testing.T) {
	cases := []struct {
		name   string
		shards int
		bucket func(*testing.T) blobtier.Bucket
	}{
		{"mem/shards=2", 2, memBucket},
		{"mem/shards=4", 4, memBucket},
		{"s3/shards=2", 2, s3Bucket},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Shared(filepath.Join(t.TempDir(), "pool"), tc.shards, tc.bucket(t))
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Holds() || !rep.SharedTierHolds {
				t.Fatalf("drive does not hold: %+v (divergence %v)", rep.Report, deref(rep.Report.Divergence))
			}
			d := rep.Report
			// One sealed segment per shard: the drive's events fit in one.
			if d.ShardCount != tc.shards || d.Executions != tc.shards || d.SharedSegments != tc.shards {
				t.Fatalf("counts %+v", d)
			}
			if tc.shards == 2 {
				want := `{"shared_tier_holds":true,"report":{"shard_count":2,"executions":2,"shared_segments":2,"owner_published_ok":true,"nonowner_coldload_from_shared_ok":true,"crash_recovery_from_shared_ok":true,"shared_miss_ok":true,"parity_ok":true,"divergence":null}}`
				if got := mustJSON(t, rep); got != want {
					t.Fatalf("JSON\n got %s\nwant %s", got, want)
				}
			}
		})
	}
}

// TestSharedDriveRefuses: a single shard (or fewer), too many shards, no
// bucket, an empty or used root and a bucket that already holds objects of
// the pool's shards are refused, and a refused drive creates nothing.
func TestSharedDriveRefuses(t *testing.T) {
	for _, n := range []int{1, 0, -1, MaxSharedShards + 1} {
		root := filepath.Join(t.TempDir(), "pool")
		if _, err := Shared(root, n, memBucket(t)); !errors.Is(err, ErrUsage) {
			t.Errorf("%d shards: err = %v, want ErrUsage", n, err)
		}
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%d shards: a refused drive created its root", n)
		}
	}
	if _, err := Shared(filepath.Join(t.TempDir(), "pool"), 2, nil); !errors.Is(err, ErrUsage) {
		t.Errorf("nil bucket: err = %v", err)
	}
	if _, err := Shared("", 2, memBucket(t)); !errors.Is(err, ErrUsage) {
		t.Errorf("empty root: err = %v", err)
	}
	used := t.TempDir()
	os.WriteFile(filepath.Join(used, "keep"), []byte("x"), 0o644)
	if _, err := Shared(used, 2, memBucket(t)); !errors.Is(err, ErrUsage) {
		t.Errorf("used root: err = %v", err)
	}

	// A bucket that already holds a shard's object would mix its history
	// with the drive's.
	for _, key := range []string{blobtier.SegmentKey(1, 1), blobtier.TailKey(0, 1, 2), blobtier.CursorKey(1)} {
		b := memBucket(t)
		if err := b.Put(context.Background(), key, []byte("foreign")); err != nil {
			t.Fatal(err)
		}
		root := filepath.Join(t.TempDir(), "pool")
		if _, err := Shared(root, 2, b); !errors.Is(err, ErrUsage) {
			t.Errorf("bucket holding %s: err = %v, want ErrUsage", key, err)
		}
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("bucket holding %s: a refused drive created its root", key)
		}
	}
	// Objects of a shard outside the pool do not matter.
	b := memBucket(t)
	if err := b.Put(context.Background(), blobtier.CursorKey(7), []byte("other pool")); err != nil {
		t.Fatal(err)
	}
	if rep, err := Shared(filepath.Join(t.TempDir(), "pool"), 2, b); err != nil || !rep.Holds() {
		t.Errorf("bucket with another pool's shard: %v %+v", err, rep.Report)
	}
}

// TestSharedDriveRedNoShip is the RED control: owners that never ship
// leave the bucket empty, so the non-owner cold loads miss every event,
// the owner's disk loss loses everything, and the drive does not hold.
func TestSharedDriveRedNoShip(t *testing.T) {
	rep, err := sharedDrive(filepath.Join(t.TempDir(), "pool"), 2, memBucket(t), sharedHooks{skipShip: true})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Report
	if rep.Holds() || rep.SharedTierHolds {
		t.Fatalf("the drive holds without shipping: %+v", d)
	}
	if d.OwnerPublishedOK || d.NonownerColdloadFromSharedOK || d.CrashRecoveryFromSharedOK || d.SharedSegments != 0 {
		t.Fatalf("flags %+v", d)
	}
	// Nothing was shipped, so a miss is still an empty read.
	if !d.SharedMissOK {
		t.Fatalf("shared miss: %+v", d)
	}
	if d.Divergence == nil {
		t.Fatal("no divergence reported")
	}
	t.Logf("divergence: %s", *d.Divergence)
}

// TestSharedDriveRedNoTail is the RED control of the tail: with tail
// replication off, the sealed segments ship but the events appended after
// the seal do not, so a cold load misses them and the crash recovery loses
// them.
func TestSharedDriveRedNoTail(t *testing.T) {
	rep, err := sharedDrive(filepath.Join(t.TempDir(), "pool"), 2, memBucket(t), sharedHooks{disableTail: true})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Report
	if rep.Holds() {
		t.Fatalf("the drive holds without tail replication: %+v", d)
	}
	if d.OwnerPublishedOK || d.NonownerColdloadFromSharedOK || d.CrashRecoveryFromSharedOK {
		t.Fatalf("flags %+v", d)
	}
	// The sealed segments did ship.
	if d.SharedSegments != 2 {
		t.Fatalf("shared segments %d, want 2", d.SharedSegments)
	}
	t.Logf("divergence: %s", deref(d.Divergence))
}

// TestSharedDriveRedOwnerAhead is the RED control of parity: an owner
// that appends after its last shipment serves an event the bucket lacks,
// so the non-owner's cold load (which matches everything that was shipped)
// no longer equals the owner's page.
func TestSharedDriveRedOwnerAhead(t *testing.T) {
	hooks := sharedHooks{afterPublish: func(d *sharedRun) error {
		r := d.pool[0]
		_, err := r.log.Append(d.ctx, localseg.Event{ExecutionID: r.exec, TransactionID: "unshipped", Payload: "only on the owner's disk"})
		return err
	}}
	rep, err := sharedDrive(filepath.Join(t.TempDir(), "pool"), 2, memBucket(t), hooks)
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Report
	if rep.Holds() || d.ParityOK {
		t.Fatalf("parity holds with the owner ahead of the bucket: %+v", d)
	}
	if !d.NonownerColdloadFromSharedOK || !d.OwnerPublishedOK {
		t.Fatalf("flags %+v", d)
	}
	t.Logf("divergence: %s", deref(d.Divergence))
}

// TestSharedDriveLeavesOtherShardsAlone: the drive writes only the keys of
// its pool's shards.
func TestSharedDriveLeavesOtherShardsAlone(t *testing.T) {
	b := memBucket(t)
	rep, err := Shared(filepath.Join(t.TempDir(), "pool"), 3, b)
	if err != nil || !rep.Holds() {
		t.Fatalf("%v %+v", err, rep.Report)
	}
	for s := uint32(3); s < 8; s++ {
		if key, err := anyObject(context.Background(), b, s); err != nil || key != "" {
			t.Fatalf("shard %d: %q %v", s, key, err)
		}
	}
	for s := uint32(0); s < 3; s++ {
		key, err := anyObject(context.Background(), b, s)
		if err != nil || key == "" {
			t.Fatalf("shard %d holds nothing: %v", s, err)
		}
	}
}
