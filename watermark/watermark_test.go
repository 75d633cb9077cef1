package watermark_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

func TestEncodeIsTheWireFormat(t *testing.T) {
	got := string(watermark.Mark{Seq: 30, Segment: 7, V: 3}.Encode())
	const want = `{"seq":30,"segment":7,"v":3}`
	if got != want {
		t.Fatalf("Encode = %s, want %s", got, want)
	}
	m, err := watermark.Decode([]byte(want))
	if err != nil || m != (watermark.Mark{Seq: 30, Segment: 7, V: 3}) {
		t.Fatalf("Decode(%s) = %+v, %v", want, m, err)
	}
}

func TestDecodeIsStrict(t *testing.T) {
	cases := []struct {
		name string
		body string
		want watermark.Mark
		ok   bool
	}{
		{"plain", `{"seq":1,"segment":1,"v":1}`, watermark.Mark{Seq: 1, Segment: 1, V: 1}, true},
		{"field order free", `{"v":9,"segment":4,"seq":20}`, watermark.Mark{Seq: 20, Segment: 4, V: 9}, true},
		{"unknown field ignored", `{"seq":5,"segment":2,"v":1,"writer":"x","extra":{"a":[1]}}`, watermark.Mark{Seq: 5, Segment: 2, V: 1}, true},
		{"blanks around", " \n{\"seq\":0,\"segment\":0,\"v\":0}\n", watermark.Mark{}, true},
		{"max uint64", `{"seq":18446744073709551615,"segment":1,"v":1}`, watermark.Mark{Seq: 1<<64 - 1, Segment: 1, V: 1}, true},
		{"segment only (consumer-frame segment)", `{"seq":0,"segment":1,"v":1}`, watermark.Mark{Segment: 1, V: 1}, true},
		{"empty", ``, watermark.Mark{}, false},
		{"null", `null`, watermark.Mark{}, false},
		{"array", `[1,2,3]`, watermark.Mark{}, false},
		{"string", `"seq"`, watermark.Mark{}, false},
		{"empty object", `{}`, watermark.Mark{}, false},
		{"missing seq", `{"segment":1,"v":1}`, watermark.Mark{}, false},
		{"missing segment", `{"seq":1,"v":1}`, watermark.Mark{}, false},
		{"missing v", `{"seq":1,"segment":1}`, watermark.Mark{}, false},
		{"null seq", `{"seq":null,"segment":1,"v":1}`, watermark.Mark{}, false},
		{"negative", `{"seq":-1,"segment":1,"v":1}`, watermark.Mark{}, false},
		{"float", `{"seq":1.5,"segment":1,"v":1}`, watermark.Mark{}, false},
		{"exponent", `{"seq":1e3,"segment":1,"v":1}`, watermark.Mark{}, false},
		{"quoted number", `{"seq":"1","segment":1,"v":1}`, watermark.Mark{}, false},
		{"overflow", `{"seq":18446744073709551616,"segment":1,"v":1}`, watermark.Mark{}, false},
		{"trailing object", `{"seq":1,"segment":1,"v":1}{}`, watermark.Mark{}, false},
		{"trailing garbage", `{"seq":1,"segment":1,"v":1}x`, watermark.Mark{}, false},
		{"truncated", `{"seq":1,"segment":1,"v":`, watermark.Mark{}, false},
		{"sequence in segment 0", `{"seq":4,"segment":0,"v":1}`, watermark.Mark{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := watermark.Decode([]byte(tc.body))
			if tc.ok {
				if err != nil || m != tc.want {
					t.Fatalf("Decode = %+v, %v; want %+v", m, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode accepted %q as %+v", tc.body, m)
			}
			if !errors.Is(err, watermark.ErrMalformed) || !errors.Is(err, blobtier.ErrCorrupt) {
				t.Fatalf("error %v is not ErrMalformed/blobtier.ErrCorrupt", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"seq":30,"segment":7,"v":3}`, `{"v":1,"segment":2,"seq":3,"x":null}`, `{}`, `null`,
		`{"seq":-1,"segment":1,"v":1}`, `{"seq":1e2,"segment":1,"v":1}`, `{"seq":1,"segment":0,"v":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := watermark.Decode(b)
		if err != nil {
			if !errors.Is(err, watermark.ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if m.Seq > 0 && m.Segment == 0 {
			t.Fatalf("accepted %+v: a sequence in segment 0", m)
		}
		back, err := watermark.Decode(m.Encode())
		if err != nil || back != m {
			t.Fatalf("re-decode of %s = %+v, %v; want %+v", m.Encode(), back, err, m)
		}
	})
}

// fakeCAS is an in-memory bucket with compare-and-swap semantics: every
// write gets a new version token. failNext makes the next n CAS calls lose
// as if another writer had won.
type fakeCAS struct {
	mu       sync.Mutex
	data     []byte
	gen      int
	cas      bool
	failNext int
	writes   int
	getErr   error
	gets     int
	tornLeft int // reads that fail verification before one succeeds
}

func (f *fakeCAS) GetVersioned(_ context.Context, key string) ([]byte, blobtier.Version, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.tornLeft > 0 {
		f.tornLeft--
		return nil, "", fmt.Errorf("get %s: %w: xxh64 mismatch", key, blobtier.ErrCorrupt)
	}
	if f.getErr != nil {
		return nil, "", f.getErr
	}
	if f.data == nil {
		return nil, "", fmt.Errorf("get %s: %w", key, blobtier.ErrNotFound)
	}
	return append([]byte(nil), f.data...), blobtier.Version(strconv.Itoa(f.gen)), nil
}

func (f *fakeCAS) CompareAndSwap(_ context.Context, key string, data []byte, expect blobtier.Version) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cas {
		return blobtier.ErrUnsupported
	}
	cur := blobtier.Version("")
	if f.data != nil {
		cur = blobtier.Version(strconv.Itoa(f.gen))
	}
	if f.failNext > 0 {
		f.failNext--
		return fmt.Errorf("cas %s: %w", key, blobtier.ErrPrecondition)
	}
	if cur != expect {
		return fmt.Errorf("cas %s: %w", key, blobtier.ErrPrecondition)
	}
	f.data = append([]byte(nil), data...)
	f.gen++
	f.writes++
	return nil
}

func (f *fakeCAS) CanCAS() bool { return f.cas }

func TestReadAbsentIsZero(t *testing.T) {
	m, v, err := watermark.Read(context.Background(), &fakeCAS{cas: true}, 3)
	if err != nil || m != (watermark.Mark{}) || v != "" {
		t.Fatalf("Read of an absent mark = %+v, %q, %v", m, v, err)
	}
}

func TestReadMalformedIsCorrupt(t *testing.T) {
	b := &fakeCAS{cas: true, data: []byte(`{"seq":1}`), gen: 1}
	_, _, err := watermark.Read(context.Background(), b, 3)
	if !errors.Is(err, blobtier.ErrCorrupt) || !strings.Contains(err.Error(), blobtier.WatermarkKey(3)) {
		t.Fatalf("Read of a malformed mark: %v; want ErrCorrupt naming the key", err)
	}
	// A malformed mark must stop Advance too: guessing would risk moving it
	// backward.
	if _, err := watermark.Advance(context.Background(), b, 3, 10, 2); !errors.Is(err, blobtier.ErrCorrupt) {
		t.Fatalf("Advance over a malformed mark: %v", err)
	}
}

// TestReadRetriesAReadThatRacedAWrite: a read pairing new bytes with old
// metadata fails verification once or twice and then succeeds; corruption
// at rest fails every attempt and is reported as corruption.
func TestReadRetriesAReadThatRacedAWrite(t *testing.T) {
	ctx := context.Background()
	b := &fakeCAS{cas: true, data: []byte(`{"seq":9,"segment":2,"v":4}`), gen: 4, tornLeft: 2}
	m, v, err := watermark.Read(ctx, b, 1)
	if err != nil || m != (watermark.Mark{Seq: 9, Segment: 2, V: 4}) || v != "4" || b.gets != 3 {
		t.Fatalf("Read = %+v %q %v after %d gets", m, v, err, b.gets)
	}
	b = &fakeCAS{cas: true, getErr: fmt.Errorf("get: %w: bit rot", blobtier.ErrCorrupt)}
	_, _, err = watermark.Read(ctx, b, 1)
	if !errors.Is(err, blobtier.ErrCorrupt) || b.gets != watermark.ReadAttempts {
		t.Fatalf("Read of a corrupt mark = %v after %d gets; want ErrCorrupt after %d", err, b.gets, watermark.ReadAttempts)
	}
	// A body that verifies but does not decode is not read again.
	b = &fakeCAS{cas: true, data: []byte(`{"seq":9}`), gen: 1}
	if _, _, err = watermark.Read(ctx, b, 1); !errors.Is(err, watermark.ErrMalformed) || b.gets != 1 {
		t.Fatalf("Read of a malformed mark = %v after %d gets", err, b.gets)
	}
}

func TestAdvanceIsMonotonic(t *testing.T) {
	ctx := context.Background()
	b := &fakeCAS{cas: true}
	steps := []struct {
		seq, seg uint64
		want     watermark.Mark
		writes   int
	}{
		{10, 2, watermark.Mark{Seq: 10, Segment: 2, V: 1}, 1},
		{10, 2, watermark.Mark{Seq: 10, Segment: 2, V: 1}, 1}, // same target: no write
		{5, 1, watermark.Mark{Seq: 10, Segment: 2, V: 1}, 1},  // lower target: kept, no write
		{30, 7, watermark.Mark{Seq: 30, Segment: 7, V: 2}, 2},
		{30, 8, watermark.Mark{Seq: 30, Segment: 8, V: 3}, 3}, // a consumer-frame-only segment
		{0, 0, watermark.Mark{Seq: 30, Segment: 8, V: 3}, 3},
	}
	for i, s := range steps {
		got, err := watermark.Advance(ctx, b, 0, s.seq, s.seg)
		if err != nil || got != s.want {
			t.Fatalf("step %d: Advance(%d, %d) = %+v, %v; want %+v", i, s.seq, s.seg, got, err, s.want)
		}
		if b.writes != s.writes {
			t.Fatalf("step %d: %d writes, want %d", i, b.writes, s.writes)
		}
		stored, _, err := watermark.Read(ctx, b, 0)
		if err != nil || stored != s.want {
			t.Fatalf("step %d: stored %+v, %v; want %+v", i, stored, err, s.want)
		}
	}
}

func TestAdvanceRefusesAnInconsistentTarget(t *testing.T) {
	ctx := context.Background()
	b := &fakeCAS{cas: true}
	if _, err := watermark.Advance(ctx, b, 0, 30, 7); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ seq, seg uint64 }{{40, 6}, {20, 9}, {5, 0}} {
		_, err := watermark.Advance(ctx, b, 0, tc.seq, tc.seg)
		if !errors.Is(err, watermark.ErrInconsistent) {
			t.Fatalf("Advance(%d, %d) over {30 7}: %v; want ErrInconsistent", tc.seq, tc.seg, err)
		}
	}
	if m, _, _ := watermark.Read(ctx, b, 0); m != (watermark.Mark{Seq: 30, Segment: 7, V: 1}) {
		t.Fatalf("stored mark changed to %+v", m)
	}
}

func TestAdvanceRetriesALostSwap(t *testing.T) {
	ctx := context.Background()
	b := &fakeCAS{cas: true, failNext: 5}
	got, err := watermark.Advance(ctx, b, 0, 12, 3)
	if err != nil || got != (watermark.Mark{Seq: 12, Segment: 3, V: 1}) {
		t.Fatalf("Advance after 5 lost swaps = %+v, %v", got, err)
	}

	b = &fakeCAS{cas: true, failNext: watermark.MaxAttempts}
	_, err = watermark.Advance(ctx, b, 0, 12, 3)
	if !errors.Is(err, watermark.ErrContention) || !errors.Is(err, blobtier.ErrPrecondition) {
		t.Fatalf("Advance losing every swap: %v; want ErrContention", err)
	}
	if b.data != nil {
		t.Fatalf("a mark was written: %s", b.data)
	}
}

func TestAdvanceWithoutCASIsRefused(t *testing.T) {
	b := &fakeCAS{cas: false, getErr: errors.New("must not be read")}
	_, err := watermark.Advance(context.Background(), b, 0, 10, 2)
	if !errors.Is(err, blobtier.ErrUnsupported) {
		t.Fatalf("Advance on a bucket without CAS: %v; want ErrUnsupported", err)
	}
	if b.writes != 0 {
		t.Fatal("something was written")
	}
}

// seg builds a sealed segment ending at last and holding n events.
func seg(id, first, last uint64) localseg.SegmentInfo {
	return localseg.SegmentInfo{ID: id, Sealed: true, FirstSeq: first, LastSeq: last, Events: int(last - first + 1), Size: 100}
}

func durableSet(ids ...uint64) func(uint64) bool {
	set := map[uint64]bool{}
	for _, id := range ids {
		set[id] = true
	}
	return func(id uint64) bool { return set[id] }
}

// TestContiguousStopsAtTheFirstNotDurable is the safety case: segments
// durable / not yet uploaded / durable. The watermark stops after the first;
// a maximum over the durable ones (24) would authorise deleting tail objects
// that hold the only off-box copy of segment 2's events.
func TestContiguousStopsAtTheFirstNotDurable(t *testing.T) {
	segs := []localseg.SegmentInfo{seg(1, 1, 8), seg(2, 9, 16), seg(3, 17, 24),
		{ID: 4, FirstSeq: 25, LastSeq: 26, Events: 2}}
	seq, id := watermark.Contiguous(segs, durableSet(1, 3))
	if seq != 8 || id != 1 {
		t.Fatalf("Contiguous(durable/local/durable) = (%d, %d), want (8, 1)", seq, id)
	}
	// Once the middle one lands, the watermark moves over both, and stops
	// at the active segment even if something calls it durable.
	seq, id = watermark.Contiguous(segs, durableSet(1, 2, 3, 4))
	if seq != 24 || id != 3 {
		t.Fatalf("Contiguous(all durable) = (%d, %d), want (24, 3)", seq, id)
	}
}

func TestContiguous(t *testing.T) {
	cases := []struct {
		name    string
		segs    []localseg.SegmentInfo
		durable func(uint64) bool
		seq, id uint64
	}{
		{"empty", nil, durableSet(), 0, 0},
		{"first not durable", []localseg.SegmentInfo{seg(1, 1, 8), seg(2, 9, 16)}, durableSet(2), 0, 0},
		{"above a base", []localseg.SegmentInfo{seg(6, 31, 40), seg(7, 41, 50), seg(8, 51, 60)}, durableSet(6, 7), 50, 7},
		{"id jump", []localseg.SegmentInfo{seg(1, 1, 8), seg(1<<20+3, 9, 16)}, durableSet(1, 1<<20+3), 16, 1<<20 + 3},
		{"sequence hole", []localseg.SegmentInfo{seg(1, 1, 8), seg(2, 10, 16)}, durableSet(1, 2), 8, 1},
		{"unsorted input", []localseg.SegmentInfo{seg(2, 9, 16), seg(1, 1, 8), seg(3, 17, 24)}, durableSet(1, 2), 16, 2},
		{"consumer-frame-only segment", []localseg.SegmentInfo{seg(1, 1, 8),
			{ID: 2, Sealed: true, FirstSeq: 9, LastSeq: 8}, seg(3, 9, 12)}, durableSet(1, 2, 3), 12, 3},
		{"unsealed first", []localseg.SegmentInfo{{ID: 1, FirstSeq: 1, LastSeq: 3, Events: 3}}, durableSet(1), 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seq, id := watermark.Contiguous(tc.segs, tc.durable)
			if seq != tc.seq || id != tc.id {
				t.Fatalf("Contiguous = (%d, %d), want (%d, %d)", seq, id, tc.seq, tc.id)
			}
		})
	}
}

// TestRepairReplacesADamagedMark: a malformed mark stops Advance (above);
// its owner replaces it with its local base, and Advance works again. A
// mark that reads fine is never touched by Repair.
func TestRepairReplacesADamagedMark(t *testing.T) {
	ctx := context.Background()
	b := &fakeCAS{cas: true, data: []byte(`{"seq":1}`), gen: 1}
	m, err := watermark.Repair(ctx, b, 3, 40, 4, 0)
	if err != nil || m.Seq != 40 || m.Segment != 4 || b.writes != 1 {
		t.Fatalf("repair: %+v %v (writes %d)", m, err, b.writes)
	}
	if got, _, err := watermark.Read(ctx, b, 3); err != nil || got != m {
		t.Fatalf("read after repair: %+v %v", got, err)
	}
	if m2, err := watermark.Advance(ctx, b, 3, 60, 6); err != nil || m2.V != m.V+1 {
		t.Fatalf("advance after repair: %+v %v", m2, err)
	}
	// A healthy mark: Repair reads it and writes nothing, even a lower one.
	writes := b.writes
	if got, err := watermark.Repair(ctx, b, 3, 10, 1, 0); err != nil || got.Seq != 60 || b.writes != writes {
		t.Fatalf("repair of a healthy mark: %+v %v (writes %d→%d)", got, err, writes, b.writes)
	}
}
