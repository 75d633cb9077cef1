package faultbucket_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/backendtest"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// fixture is a blobtier.Bucket over a fault wrapper over memblob, plus the
// raw memblob underneath (the truth at rest).
type fixture struct {
	f   *faultbucket.Bucket
	b   blobtier.Bucket
	raw *blob.Bucket
}

func newFixture(t *testing.T, seed uint64) fixture {
	t.Helper()
	raw := memblob.OpenBucket(nil)
	f := faultbucket.New(raw, seed)
	b := blobtier.New(f.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	t.Cleanup(func() { b.Close() })
	return fixture{f: f, b: b, raw: raw}
}

func (x fixture) add(t *testing.T, r faultbucket.Rule) int {
	t.Helper()
	id, err := x.f.Add(r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (x fixture) atRest(t *testing.T, key string) ([]byte, bool) {
	t.Helper()
	data, err := x.raw.ReadAll(context.Background(), key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return data, true
}

var (
	ctx  = context.Background()
	seg  = blobtier.SegmentKey(1, 1)
	data = []byte("0123456789abcdefghijklmnopqrstuvwxyz")
)

// With no rules the wrapper is invisible: the whole conformance suite passes
// through it, and a hung bucket is a delay rule.
func TestConformanceThroughWrapper(t *testing.T) {
	var mu sync.Mutex
	raws := map[blobtier.Bucket]*blob.Bucket{}
	backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
		raw := memblob.OpenBucket(nil)
		b := blobtier.New(faultbucket.New(raw, 1).Bucket(), blobtier.Options{})
		mu.Lock()
		raws[b] = raw
		mu.Unlock()
		return b
	}, backendtest.Caps{
		Races: true,
		PutRaw: func(t *testing.T, b blobtier.Bucket, key string, data []byte, meta map[string]string) {
			mu.Lock()
			raw := raws[b]
			mu.Unlock()
			if err := raw.WriteAll(ctx, key, data, &blob.WriterOptions{Metadata: meta}); err != nil {
				t.Fatal(err)
			}
		},
		Hung: func(t *testing.T, timeout time.Duration) blobtier.Bucket {
			f := faultbucket.New(memblob.OpenBucket(nil), 1)
			f.MustAdd(faultbucket.Rule{Kind: faultbucket.Delay, Delay: time.Hour})
			return blobtier.New(f.Bucket(), blobtier.Options{Timeout: timeout})
		},
	})
}

// Compare-and-swap still works through the wrapper on S3 (As and the
// BeforeWrite hook are forwarded), and a refused CAS is a precondition.
func TestCASThroughWrapperOnS3(t *testing.T) {
	s, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateBucket("fb"); err != nil {
		t.Fatal(err)
	}
	raw, err := s.OpenBucket(ctx, "fb")
	if err != nil {
		t.Fatal(err)
	}
	f := faultbucket.New(raw, 7)
	b := blobtier.New(f.Bucket(), blobtier.Options{})
	defer b.Close()
	if !b.CanCAS() {
		t.Fatal("CanCAS() = false through the wrapper")
	}
	key := blobtier.WatermarkKey(1)
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":1}`), ""); err != nil {
		t.Fatal(err)
	}
	_, tok, err := b.GetVersioned(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":2}`), tok); err != nil {
		t.Fatal(err)
	}
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":3}`), tok); !errors.Is(err, blobtier.ErrPrecondition) {
		t.Fatalf("stale swap through the wrapper: %v", err)
	}
	// An injected 412 reads as a lost race.
	f.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.FailedPrecondition, Times: 1})
	_, tok, _ = b.GetVersioned(ctx, key)
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":4}`), tok); !errors.Is(err, blobtier.ErrPrecondition) {
		t.Fatalf("injected 412: %v", err)
	}
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":4}`), tok); err != nil {
		t.Fatalf("after the one-time refusal: %v", err)
	}
	if got := f.Count(faultbucket.Refuse); got != 1 {
		t.Fatalf("refusals counted %d, want 1", got)
	}
}

func TestRefuseWriteWritesNothing(t *testing.T) {
	for _, code := range []gcerrors.ErrorCode{gcerrors.Internal, gcerrors.PermissionDenied, gcerrors.ResourceExhausted, gcerrors.Unknown} {
		x := newFixture(t, 1)
		x.add(t, faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: code})
		err := x.b.PutIfAbsent(ctx, seg, data, 0)
		if err == nil || errors.Is(err, blobtier.ErrConflict) {
			t.Fatalf("%v: PutIfAbsent = %v", code, err)
		}
		if gcerrors.Code(err) != code {
			t.Fatalf("code %v, want %v", gcerrors.Code(err), code)
		}
		var fe *faultbucket.Error
		if !errors.As(err, &fe) || fe.Key != seg {
			t.Fatalf("error %v is not the injected fault", err)
		}
		if _, ok := x.atRest(t, seg); ok {
			t.Fatalf("%v: a refused write landed", code)
		}
		if x.f.Count(faultbucket.Refuse) != 1 || x.f.Total() != 1 {
			t.Fatalf("counts %v", x.f.Counts())
		}
	}
}

// A refused create with 412 where nothing exists: blobtier stats, finds
// nothing, and retries; the retry succeeds once the fault is spent.
func TestRefusedCreateWithNothingThereIsRetried(t *testing.T) {
	x := newFixture(t, 1)
	x.add(t, faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.FailedPrecondition, Times: 1})
	if err := x.b.PutIfAbsent(ctx, seg, data, 0); err != nil {
		t.Fatal(err)
	}
	if got, ok := x.atRest(t, seg); !ok || !bytes.Equal(got, data) {
		t.Fatalf("at rest: %q", got)
	}
}

// A lost answer: the put landed but reported failure; the retry finds
// identical bytes and succeeds.
func TestLostAckWriteThenIdenticalRetry(t *testing.T) {
	x := newFixture(t, 1)
	id := x.add(t, faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.LostAck, Code: gcerrors.DeadlineExceeded, Times: 1})
	if err := x.b.PutIfAbsent(ctx, seg, data, 0); err == nil {
		t.Fatal("the lost answer was not reported")
	}
	if got, ok := x.atRest(t, seg); !ok || !bytes.Equal(got, data) {
		t.Fatalf("the write did not land: %q", got)
	}
	if err := x.b.PutIfAbsent(ctx, seg, data, 0); err != nil {
		t.Fatalf("retry of a landed put: %v", err)
	}
	if x.f.Fired(id) != 1 || x.f.Count(faultbucket.LostAck) != 1 {
		t.Fatalf("fired %d, counts %v", x.f.Fired(id), x.f.Counts())
	}
}

func TestMutationsOnReadAndWrite(t *testing.T) {
	for _, kind := range []faultbucket.Kind{faultbucket.Truncate, faultbucket.Extend, faultbucket.Corrupt} {
		t.Run(string(kind)+"/read", func(t *testing.T) {
			x := newFixture(t, 3)
			if err := x.b.PutIfAbsent(ctx, seg, data, 0); err != nil {
				t.Fatal(err)
			}
			id := x.add(t, faultbucket.Rule{Op: faultbucket.OpRead, Kind: kind})
			if _, _, err := x.b.Get(ctx, seg); !errors.Is(err, blobtier.ErrCorrupt) {
				t.Fatalf("Get through a %s read: %v", kind, err)
			}
			if got, _ := x.atRest(t, seg); !bytes.Equal(got, data) {
				t.Fatal("a read fault changed the object at rest")
			}
			x.f.Remove(id)
			if got, _, err := x.b.Get(ctx, seg); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("after removing the rule: %q, %v", got, err)
			}
			if x.f.Count(kind) == 0 {
				t.Fatal("not counted")
			}
		})
		t.Run(string(kind)+"/write", func(t *testing.T) {
			x := newFixture(t, 3)
			x.add(t, faultbucket.Rule{Op: faultbucket.OpWrite, Kind: kind, Key: "noetl.ehdb.seg.*"})
			if err := x.b.PutIfAbsent(ctx, seg, data, 0); err != nil {
				t.Fatalf("the damaged write should land silently: %v", err)
			}
			got, _ := x.atRest(t, seg)
			if bytes.Equal(got, data) {
				t.Fatalf("%s write stored the original bytes", kind)
			}
			switch kind {
			case faultbucket.Truncate:
				if len(got) >= len(data) {
					t.Fatalf("truncated to %d bytes", len(got))
				}
			case faultbucket.Extend:
				if len(got) != len(data)+1 {
					t.Fatalf("extended to %d bytes", len(got))
				}
			case faultbucket.Corrupt:
				if len(got) != len(data) || bitsDiffer(got, data) != 1 {
					t.Fatalf("corrupt: %d bytes, %d bits differ", len(got), bitsDiffer(got, data))
				}
			}
			if _, _, err := x.b.Get(ctx, seg); !errors.Is(err, blobtier.ErrCorrupt) {
				t.Fatalf("Get of the damaged object: %v", err)
			}
			// The pattern spares other kinds.
			tail := blobtier.TailKey(1, 1, 2)
			if err := x.b.PutIfAbsent(ctx, tail, data, 0); err != nil {
				t.Fatal(err)
			}
			if got, _, err := x.b.Get(ctx, tail); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("tail key hit by a segment rule: %v", err)
			}
		})
	}
}

func bitsDiffer(a, b []byte) int {
	n := 0
	for i := range a {
		for x := a[i] ^ b[i]; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

// The same seed corrupts the same bit; the seed is what varies it.
func TestCorruptionIsDeterministicPerSeed(t *testing.T) {
	corrupted := func(seed uint64) []byte {
		x := newFixture(t, seed)
		x.add(t, faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Corrupt})
		big := bytes.Repeat([]byte{0}, 4096)
		if err := x.b.PutIfAbsent(ctx, seg, big, 0); err != nil {
			t.Fatal(err)
		}
		got, _ := x.atRest(t, seg)
		return got
	}
	a, b := corrupted(42), corrupted(42)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different corruption")
	}
	differs := false
	for seed := uint64(1); seed <= 5 && !differs; seed++ {
		differs = !bytes.Equal(a, corrupted(seed))
	}
	if !differs {
		t.Fatal("five other seeds corrupt exactly the same bit")
	}
}

func TestDelayHonoursDeadline(t *testing.T) {
	x := newFixture(t, 1)
	x.add(t, faultbucket.Rule{Op: faultbucket.OpStat, Kind: faultbucket.Delay, Delay: time.Hour})
	c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := x.b.Stat(c, seg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stat under an hour's delay: %v", err)
	}
	// A short delay just delays.
	x.f.Clear()
	x.add(t, faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Delay, Delay: time.Millisecond})
	if err := x.b.PutIfAbsent(ctx, seg, data, 0); err != nil {
		t.Fatal(err)
	}
	if x.f.Count(faultbucket.Delay) != 2 {
		t.Fatalf("delays counted %d, want 2", x.f.Count(faultbucket.Delay))
	}
}

func listKeys(t *testing.T, b blobtier.Bucket, kind blobtier.Kind) []string {
	t.Helper()
	var ks []string
	for info, err := range b.List(ctx, 1, kind) {
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, info.Key)
	}
	return ks
}

func TestHideForNListings(t *testing.T) {
	x := newFixture(t, 1)
	for id := uint64(1); id <= 3; id++ {
		if err := x.b.PutIfAbsent(ctx, blobtier.SegmentKey(1, id), data, 0); err != nil {
			t.Fatal(err)
		}
	}
	hidden := blobtier.SegmentKey(1, 2)
	x.add(t, faultbucket.Rule{Kind: faultbucket.Hide, Key: hidden, Listings: 2})
	all := []string{blobtier.SegmentKey(1, 1), hidden, blobtier.SegmentKey(1, 3)}
	without := []string{blobtier.SegmentKey(1, 1), blobtier.SegmentKey(1, 3)}
	for i, want := range [][]string{without, without, all, all} {
		if got := listKeys(t, x.b, blobtier.KindSegment); !slices.Equal(got, want) {
			t.Fatalf("listing %d: %v, want %v", i+1, got, want)
		}
	}
	// Hidden from listings only: a read still finds it.
	if _, _, err := x.b.Get(ctx, hidden); err != nil {
		t.Fatal(err)
	}
	if got := x.f.Count(faultbucket.Hide); got != 2 {
		t.Fatalf("hides counted %d, want 2", got)
	}
}

func TestHideForADuration(t *testing.T) {
	x := newFixture(t, 1)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	x.f.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	tail := blobtier.TailKey(1, 1, 5)
	if err := x.b.PutIfAbsent(ctx, tail, data, 0); err != nil {
		t.Fatal(err)
	}
	x.add(t, faultbucket.Rule{Kind: faultbucket.Hide, Key: "noetl.ehdb.tail.*", For: time.Minute})
	if got := listKeys(t, x.b, blobtier.KindTail); len(got) != 0 {
		t.Fatalf("listed during the hide: %v", got)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if got := listKeys(t, x.b, blobtier.KindTail); !slices.Equal(got, []string{tail}) {
		t.Fatalf("after the hide: %v", got)
	}
}

func TestFailedDeletes(t *testing.T) {
	x := newFixture(t, 1)
	if err := x.b.PutIfAbsent(ctx, seg, data, 0); err != nil {
		t.Fatal(err)
	}
	id := x.add(t, faultbucket.Rule{Op: faultbucket.OpDelete, Kind: faultbucket.Refuse, Code: gcerrors.PermissionDenied})
	if err := x.b.Delete(ctx, seg); gcerrors.Code(err) != gcerrors.PermissionDenied {
		t.Fatalf("refused delete: %v", err)
	}
	if _, ok := x.atRest(t, seg); !ok {
		t.Fatal("a refused delete deleted")
	}
	x.f.Remove(id)
	x.add(t, faultbucket.Rule{Op: faultbucket.OpDelete, Kind: faultbucket.LostAck})
	if err := x.b.Delete(ctx, seg); err == nil {
		t.Fatal("the lost answer of a delete was not reported")
	}
	if _, ok := x.atRest(t, seg); ok {
		t.Fatal("the delete did not land")
	}
	x.f.Clear()
	if err := x.b.Delete(ctx, seg); err != nil {
		t.Fatalf("retried delete: %v", err)
	}
	if c := x.f.Counts(); c[faultbucket.Refuse] != 1 || c[faultbucket.LostAck] != 1 || x.f.Total() != 2 {
		t.Fatalf("counts %v", c)
	}
}

func TestRefuseListAndStat(t *testing.T) {
	x := newFixture(t, 1)
	x.add(t, faultbucket.Rule{Op: faultbucket.OpList, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*"})
	x.add(t, faultbucket.Rule{Op: faultbucket.OpStat, Kind: faultbucket.Refuse, Code: gcerrors.NotFound})
	for _, err := range x.b.List(ctx, 1, blobtier.KindTail) {
		if gcerrors.Code(err) != gcerrors.Internal {
			t.Fatalf("refused listing: %v", err)
		}
	}
	if got := listKeys(t, x.b, blobtier.KindSegment); len(got) != 0 {
		t.Fatalf("segment listing: %v", got)
	}
	if err := x.b.PutIfAbsent(ctx, seg, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := x.b.Stat(ctx, seg); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("stat refused with NotFound: %v", err)
	}
}

func TestSkipTimesAndProbability(t *testing.T) {
	x := newFixture(t, 1)
	id := x.add(t, faultbucket.Rule{Op: faultbucket.OpStat, Kind: faultbucket.Refuse, Skip: 2, Times: 3})
	var outcomes []bool
	for range 8 {
		_, err := x.b.Stat(ctx, seg)
		outcomes = append(outcomes, gcerrors.Code(err) == gcerrors.Internal)
	}
	if want := []bool{false, false, true, true, true, false, false, false}; !slices.Equal(outcomes, want) {
		t.Fatalf("refusals %v, want %v", outcomes, want)
	}
	if x.f.Fired(id) != 3 {
		t.Fatalf("fired %d", x.f.Fired(id))
	}
	run := func(seed uint64) []bool {
		y := newFixture(t, seed)
		y.add(t, faultbucket.Rule{Op: faultbucket.OpStat, Kind: faultbucket.Refuse, Prob: 0.5})
		var hits []bool
		for range 64 {
			_, err := y.b.Stat(ctx, seg)
			hits = append(hits, gcerrors.Code(err) == gcerrors.Internal)
		}
		return hits
	}
	a, b := run(9), run(9)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different faults")
	}
	n := 0
	for _, h := range a {
		if h {
			n++
		}
	}
	if n == 0 || n == 64 {
		t.Fatalf("probability 0.5 hit %d of 64", n)
	}
}

func TestAddRefusesBadRules(t *testing.T) {
	x := newFixture(t, 1)
	for _, r := range []faultbucket.Rule{
		{Kind: "explode"},
		{Op: "rename", Kind: faultbucket.Refuse},
		{Kind: faultbucket.Refuse, Key: "[unclosed"},
		{Kind: faultbucket.Delay},
		{Op: faultbucket.OpStat, Kind: faultbucket.Corrupt},
		{Kind: faultbucket.Truncate},
		{Op: faultbucket.OpRead, Kind: faultbucket.LostAck},
		{Op: faultbucket.OpWrite, Kind: faultbucket.Hide},
		{Kind: faultbucket.Refuse, Prob: 1.5},
		{Kind: faultbucket.Refuse, Times: -1},
	} {
		if _, err := x.f.Add(r); !errors.Is(err, faultbucket.ErrBadRule) {
			t.Errorf("Add(%+v) = %v, want ErrBadRule", r, err)
		}
	}
	if x.f.Total() != 0 {
		t.Fatal("counted")
	}
}

// Every fault counts once, by kind, under concurrent use.
func TestCountsUnderConcurrency(t *testing.T) {
	x := newFixture(t, 1)
	x.add(t, faultbucket.Rule{Op: faultbucket.OpStat, Kind: faultbucket.Refuse})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 25 {
				_, _ = x.b.Stat(ctx, blobtier.SegmentKey(uint32(i), uint64(j)))
			}
		}()
	}
	wg.Wait()
	if got := x.f.Count(faultbucket.Refuse); got != 200 {
		t.Fatalf("refusals counted %d, want 200", got)
	}
	if fmt.Sprint(x.f.Counts()[faultbucket.Corrupt]) != "0" {
		t.Fatal("Counts misses a zero kind")
	}
}

// A mutation of a read that finds no object alters nothing, so it does not
// count as fired: a rule for the next read of a key that is not there yet
// still alters the first read that returns bytes.
func TestReadMutationOfAMissingObjectDoesNotFire(t *testing.T) {
	ctx := context.Background()
	// memcas: a Get is one GET there, so the read reaches the missing key.
	f := faultbucket.NewDriver(memcas.New(nil), 3)
	b := blobtier.New(f.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	t.Cleanup(func() { b.Close() })
	x := fixture{f: f, b: b}
	key := blobtier.WatermarkKey(2)
	id := x.add(t, faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Corrupt, Key: key, Times: 1})
	if _, _, err := x.b.Get(ctx, key); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	if n, total := x.f.Fired(id), x.f.Total(); n != 0 || total != 0 {
		t.Fatalf("a read of a missing object fired the mutation (fired %d, total %d)", n, total)
	}
	if err := x.b.PutIfAbsent(ctx, key, []byte(`{"v":1}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := x.b.Get(ctx, key); !errors.Is(err, blobtier.ErrCorrupt) {
		t.Fatalf("first read with bytes under the rule: %v, want ErrCorrupt", err)
	}
	if n := x.f.Fired(id); n != 1 {
		t.Fatalf("fired %d, want 1", n)
	}
}
