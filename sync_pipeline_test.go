package bucketlog

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestSyncSecondGroupDoesNotWaitForTheFirstPut: while the first group's
// tail put hangs, the next group's put starts (shipper/tailpipe.go); its
// object holds both groups, so both are acknowledged, and a restore from
// the bucket alone holds both — the hung lower put never lands.
// (shipper's pipelineMin is 8: a second group of 8 starts a pass.)
func TestSyncSecondGroupDoesNotWaitForTheFirstPut(t *testing.T) {
	shared := casBucket(t)
	v := newView(shared)
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	l := syncBackgroundLog(t, v, clock)
	got := acked{}
	if err := got.append(t, l, ev("w", 0)); err != nil {
		t.Fatal(err)
	}
	waitCursor(t, shared, 1)
	release, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	first := true
	v.setHooks(func(op blobtier.Op, key string) error {
		if op != blobtier.OpPut || kindOf(key) != blobtier.KindTail.String() {
			return nil
		}
		mu.Lock()
		hang := first
		first = false
		mu.Unlock()
		if hang {
			close(blocked)
			<-release
			return errors.New("injected: the hung put fails")
		}
		return nil
	}, nil)
	defer func() { once.Do(func() { close(release) }); l.Close() }()
	var gotMu sync.Mutex
	results := make(chan error, 16)
	appendOne := func(i int) {
		a := acked{}
		err := a.append(t, l, ev("w", i))
		gotMu.Lock()
		for k, x := range a {
			got[k] = x
		}
		gotMu.Unlock()
		results <- err
	}
	go appendOne(1)
	select {
	case <-blocked:
	case <-time.After(bgWaitGuard):
		t.Fatal("the first group's put never came")
	}
	// A group of pipelineMin appenders: a smaller one waits for a pass to end.
	const group = 8
	for i := range group {
		go appendOne(2 + i)
	}
	for range 1 + group {
		select {
		case err := <-results:
			if err != nil {
				t.Fatalf("synchronous append: %v", err)
			}
		case <-time.After(bgWaitGuard): // a hang guard: a group that waited for the hung put fails at SyncWait
			t.Fatal("no acknowledgement while the first group's put hangs: the second group waited for it")
		}
	}
	gotMu.Lock()
	defer gotMu.Unlock()
	rep, err := Restore(ctxT(t), RestoreOptions{Bucket: shared, Dir: t.TempDir()})
	if err != nil || rep.LastSeq != 2+group {
		t.Fatalf("restore from the bucket alone: last %d, %v; want %d", rep.LastSeq, err, 2+group)
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
	once.Do(func() { close(release) })
}
