package bucketlog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// Issue 12 finding 6 on an older copy of the volume (internal/sim seeds 660
// and 5867): the disk is replaced by a copy taken before a consumer was
// deleted; the start-up checks accept it (the bucket holds no event it
// lacks), and it must not bring the deleted consumer back. The bucket's
// cursor object, written after the deletion, is the newer word: it names
// the consumer in a tombstone (the delete is the last frame), or it no
// longer lists a consumer whose frames all sit before its shipped_through
// event (the deletion's record was lost in a restart before the write).
func TestOlderDiskDoesNotBringBackADeletedConsumer(t *testing.T) {
	ctx := ctxT(t)
	for _, lostInRestart := range []bool{false, true} {
		fb := faultbucket.New(memblob.OpenBucket(nil), 1)
		b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: time.Second})
		defer b.Close()
		root := t.TempDir()
		live, old := filepath.Join(root, "live"), filepath.Join(root, "old")
		o := Options{Dir: live, Bucket: b, NoBackground: true, ShutdownShipTimeout: time.Second, Logger: quiet()}
		l := mustOpen(t, o)
		for i := 1; i <= 3; i++ {
			if _, err := l.Append(ctx, ev("1", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Pull(ctx, "kept", 10); err != nil {
			t.Fatal(err)
		}
		if !lostInRestart {
			if _, err := l.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Pull(ctx, "gone", 10); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Ack(ctx, "gone", 2); err != nil {
			t.Fatal(err)
		}
		if lostInRestart {
			// "gone" sits before event 4; no cursor write ever lists it.
			if _, err := l.Append(ctx, ev("1", 4)); err != nil {
				t.Fatal(err)
			}
		} else if _, err := l.Ship(ctx, false); err != nil { // cursor {gone:2, kept:0} at 3
			t.Fatal(err)
		}
		// The older copy: crash-consistent, taken while the log is open.
		if err := os.CopyFS(old, os.DirFS(live)); err != nil {
			t.Fatal(err)
		}
		if err := l.DeleteConsumer(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if lostInRestart {
			// The shutdown shipment fails: the deletion is recorded only on
			// the disk, and the next open's pass must carry it.
			id := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "*", Code: gcerrors.Internal})
			_ = l.Close()
			fb.Remove(id)
			l = mustOpen(t, o)
		}
		if _, err := l.Ship(ctx, false); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if c := cursorObject(t, ctx, b); len(c.Consumers) != 1 {
			t.Fatalf("lostInRestart=%v: the cursor object holds %v, want only kept", lostInRestart, c.Consumers)
		}
		o.Dir = old
		l = mustOpen(t, o)
		snap, err := l.Store().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Close()
		if _, ok := snap.Consumers["gone"]; ok || len(snap.Consumers) != 1 {
			t.Fatalf("lostInRestart=%v: consumers on the accepted older copy %v, want only kept (gone was deleted and shipped)", lostInRestart, snap.Consumers)
		}
	}
}

// The control: on the owner's own disk a consumer created after the cursor
// object's last write (and one created again after its tombstoned delete)
// survives a restart whose shutdown shipment failed.
func TestRestartKeepsConsumersNewerThanTheCursorObject(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: time.Second})
	defer b.Close()
	o := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, ShutdownShipTimeout: time.Second, Logger: quiet()}
	l := mustOpen(t, o)
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Pull(ctx, "again", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteConsumer(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil { // cursor {} at 3, "again" tombstoned
		t.Fatal(err)
	}
	if c := cursorObject(t, ctx, b); len(c.Deleted) != 1 {
		t.Fatalf("the cursor object's tombstones %v, want again", c.Deleted)
	}
	if _, err := l.Pull(ctx, "again", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Pull(ctx, "fresh", 10); err != nil {
		t.Fatal(err)
	}
	id := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "*", Code: gcerrors.Internal})
	_ = l.Close()
	fb.Remove(id)
	l = mustOpen(t, o)
	defer l.Close()
	snap, err := l.Store().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Consumers) != 2 {
		t.Fatalf("consumers after the restart %v, want again and fresh", snap.Consumers)
	}
}
