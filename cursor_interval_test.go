package bucketlog

import (
	"testing"
	"time"
)

// bgWaitGuard bounds a test's wait for background work: a hang guard only,
// far above what the work takes even on a loaded machine under -race.
const bgWaitGuard = time.Minute

// waitShipped waits until the log's shipped position reaches want.
func waitShipped(t *testing.T, l *Log, want uint64) {
	t.Helper()
	for deadline := time.Now().Add(bgWaitGuard); l.ShippedThrough() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("shipped %d, want %d", l.ShippedThrough(), want)
		}
	}
}

// TestPeriodicTicksSpaceTheCursorObject: on an active asynchronous shard
// the periodic tick ships every tail, but writes the cursor object at most
// once per cursor interval (shipper Options.CursorInterval, four ticks by
// default): the object is no part of what a restore needs for the events
// (it appends every tail object beyond the cursor), and at the default
// tick its GET and CAS were half the shard's request bill. An explicit
// Ship still writes it, and so does the first tick after the interval; a
// change of the consumers is written at the next tick.
func TestPeriodicTicksSpaceTheCursorObject(t *testing.T) {
	shared := casBucket(t)
	v := newView(shared)
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	o := fenceOpts(t.TempDir(), v, false)
	o.NoBackground, o.Now, o.TailInterval = false, clock.Now, 20*time.Millisecond
	l := mustOpen(t, o)
	defer l.Close()
	if _, err := l.Append(ctxT(t), ev("w", 1)); err != nil {
		t.Fatal(err)
	}
	waitShipped(t, l, 1)
	waitCursor(t, shared, 1) // the first write is never held
	for i := 2; i <= 5; i++ {
		if _, err := l.Append(ctxT(t), ev("w", i)); err != nil {
			t.Fatal(err)
		}
		waitShipped(t, l, uint64(i))
	}
	time.Sleep(100 * time.Millisecond) // several more ticks on the stopped clock
	if got := cursorShipped(t, shared); got != 1 {
		t.Fatalf("the cursor object moved to %d within one cursor interval: written every tick", got)
	}
	// A change of the consumers is written at the next tick (a pull that
	// creates one adds a frame after the last event: no tail object
	// carries it), with the position at that moment.
	if _, err := l.Pull(ctxT(t), "c", 10); err != nil {
		t.Fatal(err)
	}
	waitCursor(t, shared, 5)
	for i := 6; i <= 7; i++ {
		if _, err := l.Append(ctxT(t), ev("w", i)); err != nil {
			t.Fatal(err)
		}
		waitShipped(t, l, uint64(i))
	}
	time.Sleep(100 * time.Millisecond)
	if got := cursorShipped(t, shared); got != 5 {
		t.Fatalf("the cursor object moved to %d within one cursor interval", got)
	}
	clock.add(4 * o.TailInterval)
	waitCursor(t, shared, 7) // the first tick after the interval writes it
	if _, err := l.Append(ctxT(t), ev("w", 8)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctxT(t), false); err != nil {
		t.Fatal(err)
	}
	if got := cursorShipped(t, shared); got != 8 {
		t.Fatalf("an explicit Ship left the cursor object at %d", got)
	}
}

// TestTickSpacesTheCursorObject: Log.Tick, the periodic pass run by hand
// on a simulated clock, follows the same rule: the cursor object's
// shipped_through moves once per four ticks of appends.
func TestTickSpacesTheCursorObject(t *testing.T) {
	shared := casBucket(t)
	v := newView(shared)
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	o := fenceOpts(t.TempDir(), v, false)
	o.Now, o.TailInterval = clock.Now, 15*time.Second
	l := mustOpen(t, o)
	defer l.Close()
	var moves int
	last := uint64(0)
	for i := 1; i <= 12; i++ {
		if _, err := l.Append(ctxT(t), ev("w", i)); err != nil {
			t.Fatal(err)
		}
		clock.add(o.TailInterval)
		if _, err := l.Tick(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if l.ShippedThrough() != uint64(i) {
			t.Fatalf("tick %d shipped through %d", i, l.ShippedThrough())
		}
		if got := cursorShipped(t, shared); got != last {
			moves, last = moves+1, got
		}
	}
	if moves < 3 || moves > 4 {
		t.Fatalf("the cursor object moved %d times in 12 ticks, want once per 4", moves)
	}
}
