package bucketlog

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// Synchronous acknowledgement before the cursor object (shipper/tail.go):
// a group is acknowledged once its tail object is put, the fence HEAD found
// no newer claim and the shipped position covers it; the cursor object is
// not part of it (restore appends every tail object beyond the cursor,
// docs/FORMAT.md §9.1 step 6).

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// syncBackgroundLog opens a fenced writer in synchronous mode with its tick
// loop running (an hour apart: only the synchronous kicks ship) on view.
func syncBackgroundLog(t *testing.T, view *writerView, clock *testClock) *Log {
	t.Helper()
	o := fenceOpts(t.TempDir(), view, true)
	o.NoBackground = false
	o.Now = clock.Now
	return mustOpen(t, o)
}

// cursorShipped reads the cursor object's shipped_through straight from b.
func cursorShipped(t *testing.T, b blobtier.Bucket) uint64 {
	t.Helper()
	data, _, err := b.Get(ctxT(t), blobtier.CursorKey(0))
	if err != nil {
		t.Fatalf("read the cursor object: %v", err)
	}
	var c struct {
		ShippedThrough uint64 `json:"shipped_through"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("cursor object %q: %v", data, err)
	}
	return c.ShippedThrough
}

// waitCursor waits until the cursor object in b says shipped_through want.
func waitCursor(t *testing.T, b blobtier.Bucket, want uint64) {
	t.Helper()
	for deadline := time.Now().Add(bgWaitGuard); ; time.Sleep(time.Millisecond) {
		if _, _, err := b.Get(ctxT(t), blobtier.CursorKey(0)); err == nil && cursorShipped(t, b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cursor object with shipped_through %d", want)
		}
	}
}

// TestSyncAckBeforeCursorWriteIsRestorable: the writer is "killed" between
// the tail commit and the cursor object's write (the write hangs and never
// lands). The append was acknowledged anyway, and a restore from the bucket
// alone holds it with its payload.
func TestSyncAckBeforeCursorWriteIsRestorable(t *testing.T) {
	shared := casBucket(t)
	v := newView(shared)
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	l := syncBackgroundLog(t, v, clock)
	// The first cursor write returns to the shipper late, after the object
	// landed: the test's clock moves while the shipper is still in it, as
	// on a fast machine (CI once found the pass's book kept the later time,
	// so the next pass deferred the cursor object).
	v.setHooks(nil, func(op blobtier.Op, key string, err error) error {
		if op == blobtier.OpCAS && key == blobtier.CursorKey(0) {
			time.Sleep(100 * time.Millisecond)
		}
		return err
	})
	got := acked{}
	if err := got.append(t, l, ev("w", 0)); err != nil {
		t.Fatal(err)
	}
	waitCursor(t, shared, 1)
	// The next pass is due to write the cursor object (a tick's worth of
	// time passed); that write hangs, as in a process killed right there.
	clock.add(2 * time.Hour)
	release := make(chan struct{})
	reached := make(chan struct{}, 1)
	v.setHooks(func(op blobtier.Op, key string) error {
		if op == blobtier.OpCAS && key == blobtier.CursorKey(0) {
			select {
			case reached <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	}, nil)
	defer func() { close(release); v.setHooks(nil, nil); l.Close() }()
	start := time.Now()
	if err := got.append(t, l, ev("w", 1)); err != nil {
		t.Fatalf("synchronous append with the cursor write hanging: %v after %v (acknowledgement waited for the cursor object)", err, time.Since(start))
	}
	const seq = 2
	select {
	case <-reached:
	case <-time.After(bgWaitGuard):
		t.Fatal("the pass never reached the cursor object's write")
	}
	if s := cursorShipped(t, shared); s >= seq {
		t.Fatalf("the cursor object already covers %d (shipped_through %d): not the kill point", seq, s)
	}
	rep, err := Restore(ctxT(t), RestoreOptions{Bucket: shared, Dir: t.TempDir()})
	if err != nil || rep.LastSeq != seq {
		t.Fatalf("restore from the bucket alone: last %d, %v; want %d", rep.LastSeq, err, seq)
	}
	bucket, _, err := lineageOracle(ctxT(t), shared)
	if err != nil {
		t.Fatal(err)
	}
	for seq, want := range got {
		if bucket[seq] != want {
			t.Fatalf("acknowledged sequence %d: bucket holds %q, want %q", seq, bucket[seq], want)
		}
	}
}

// TestSyncPassesDeferTheCursorObject: passes a synchronous append kicks
// write no cursor object while one was written within the tick interval
// (the appenders would wait for its three requests before their next
// group); the periodic tick and Close write it.
func TestSyncPassesDeferTheCursorObject(t *testing.T) {
	shared := casBucket(t)
	v := newView(shared)
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	l := syncBackgroundLog(t, v, clock)
	if err := (acked{}).append(t, l, ev("w", 0)); err != nil {
		t.Fatal(err)
	}
	// The first pass writes the cursor object (none was written yet),
	// after its appender was woken: wait for it.
	waitCursor(t, shared, 1)
	v.resetCounts()
	for i := 1; i <= 5; i++ {
		if err := (acked{}).append(t, l, ev("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.count(blobtier.OpCAS, blobtier.KindCursor.String()) + v.count(blobtier.OpPut, blobtier.KindCursor.String()); n != 0 {
		t.Fatalf("%d cursor object writes during 5 synchronous appends within one tick, want 0", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if s := cursorShipped(t, shared); s != 6 {
		t.Fatalf("after Close the cursor object says shipped_through %d, want 6", s)
	}
}
