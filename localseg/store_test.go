package localseg_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog/localseg"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(cleanupAfter{m}) }

// cleanupAfter removes the stores the benchmarks cached once every test
// and benchmark ran.
type cleanupAfter struct{ m *testing.M }

func (c cleanupAfter) Run() int {
	code := c.m.Run()
	cleanupBenchStores()
	return code
}

// Helpers.

func openT(t testing.TB, dir string, o localseg.Options) *localseg.Store {
	t.Helper()
	s, err := localseg.Open(dir, o)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return s
}

func closeT(t testing.TB, s *localseg.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func evt(exec string, n int) localseg.Event {
	return localseg.Event{ExecutionID: exec, TransactionID: fmt.Sprintf("txn-%s-%d", exec, n), Payload: fmt.Sprintf("payload %s/%d <&> \"é\" \\", exec, n)}
}

func mustAppend(t testing.TB, s *localseg.Store, ev localseg.Event) uint64 {
	t.Helper()
	r, err := s.Append(ev)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return r.Seq
}

// appendMany appends n events spread over execs executions and returns them
// in sequence order.
var appendManyN atomic.Int64

func appendMany(t testing.TB, s *localseg.Store, n, execs int) []localseg.Event {
	t.Helper()
	var out []localseg.Event
	for i := range n {
		ev := evt(fmt.Sprintf("e%d", i%execs), i)
		// Unique across calls: a repeated transaction id is a retry
		// (txwindow.go), which writes nothing.
		ev.TransactionID += fmt.Sprintf("-m%d", appendManyN.Add(1))
		mustAppend(t, s, ev)
		out = append(out, ev)
	}
	return out
}

func scanAll(t testing.TB, s *localseg.Store) []localseg.Record {
	t.Helper()
	var out []localseg.Record
	after := uint64(0)
	for {
		p, err := s.Scan(after, 7)
		if err != nil {
			t.Fatalf("scan after %d: %v", after, err)
		}
		if len(p.Records) == 0 {
			return out
		}
		out = append(out, p.Records...)
		after = p.Records[len(p.Records)-1].Seq
	}
}

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "seg-*.eslog"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// dirBytes returns the content of every file in dir.
func dirBytes(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// sweepTempDir is t.TempDir on a tmpfs when the machine has one: the sweep
// tests open thousands of damaged copies of a store, and what they check is
// the recovery logic, not the disk's fsync latency.
func sweepTempDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "localseg-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range dirBytes(t, src) {
		if name == "LOCK" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func wantRecords(t testing.TB, got []localseg.Record, evs []localseg.Event, firstSeq uint64) {
	t.Helper()
	if len(got) != len(evs) {
		t.Fatalf("%d records, want %d", len(got), len(evs))
	}
	for i, r := range got {
		ev := evs[i]
		want := localseg.Record{Seq: firstSeq + uint64(i), ExecutionID: strings.TrimSpace(ev.ExecutionID), TransactionID: ev.TransactionID, Payload: ev.Payload}
		if r != want {
			t.Fatalf("record %d = %+v, want %+v", i, r, want)
		}
	}
}

var small = localseg.Options{SegmentMaxBytes: 1024}

// CHECKLIST §1.1 (and §1.19: no de-duplication).
func TestAppendGaplessAcrossExecutions(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{})
	defer closeT(t, s)
	for i := range 20 {
		r, err := s.Append(evt(fmt.Sprintf("x%d", i%3), i))
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(i + 1); r.Seq != want || r.Tip != want || r.Created != (i == 0) {
			t.Fatalf("append %d: %+v", i, r)
		}
	}
	// The same event again is a retry (§1.19's later option: the
	// transaction window, txwindow.go): answered with its sequence, not
	// written again.
	a, _ := s.Append(evt("dup", 1))
	b, _ := s.Append(evt("dup", 1))
	if a.Seq != b.Seq || !b.Duplicate || a.Duplicate || s.Tip() != a.Seq {
		t.Fatalf("repeated event: %+v then %+v, tip %d", a, b, s.Tip())
	}
	mustAppend(t, s, evt("dup", 2)) // keeps the batch's sequences below
	first, last, err := s.AppendBatch([]localseg.Event{evt("b", 1), evt("b", 2), evt("c", 3)})
	if err != nil || first != 23 || last != 25 || s.Tip() != 25 {
		t.Fatalf("batch %d..%d %v, tip %d", first, last, err, s.Tip())
	}
}

// CHECKLIST §1.2.
func TestScanPaging(t *testing.T) {
	s := openT(t, t.TempDir(), small)
	defer closeT(t, s)
	evs := appendMany(t, s, 30, 4)
	cases := []struct {
		after      uint64
		limit      int
		wantFirst  uint64
		wantN      int
		wantCount  uint64
		wantExists bool
	}{
		{0, 10, 1, 10, 30, true},
		{10, 10, 11, 10, 20, true},
		{25, 10, 26, 5, 5, true},
		{30, 10, 0, 0, 0, true},
		{99, 10, 0, 0, 0, true},
		{5, 0, 0, 0, 25, true},
	}
	for _, c := range cases {
		p, err := s.Scan(c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if p.Exists != c.wantExists || p.RecordCount != c.wantCount || len(p.Records) != c.wantN || p.Base != 1 || p.Clamped {
			t.Fatalf("scan(%d,%d) = exists %v count %d n %d base %d clamped %v", c.after, c.limit, p.Exists, p.RecordCount, len(p.Records), p.Base, p.Clamped)
		}
		if c.wantN > 0 {
			wantRecords(t, p.Records, evs[c.wantFirst-1:int(c.wantFirst)-1+c.wantN], c.wantFirst)
		}
	}
	if _, err := s.Scan(0, -1); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("negative limit: %v", err)
	}
}

// CHECKLIST §1.3.
func TestReadExecution(t *testing.T) {
	s := openT(t, t.TempDir(), small)
	defer closeT(t, s)
	evs := appendMany(t, s, 600, 3) // > anchorEvery entries per execution
	for _, exec := range []string{"e0", "e1", "e2"} {
		var want []uint64
		for i, ev := range evs {
			if ev.ExecutionID == exec {
				want = append(want, uint64(i+1))
			}
		}
		var got []uint64
		after := uint64(0)
		for {
			p, err := s.ReadExecution(" "+exec+" ", after, 13)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Exists {
				t.Fatal("exists false")
			}
			var rest uint64
			for _, w := range want {
				if w > after {
					rest++
				}
			}
			if p.RecordCount != rest {
				t.Fatalf("%s after %d: count %d, want %d", exec, after, p.RecordCount, rest)
			}
			if len(p.Records) == 0 {
				break
			}
			for _, r := range p.Records {
				if r.ExecutionID != exec || r.Payload != evs[r.Seq-1].Payload {
					t.Fatalf("%s: foreign or wrong record %+v", exec, r)
				}
				got = append(got, r.Seq)
			}
			after = p.Records[len(p.Records)-1].Seq
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", exec, got, want)
		}
	}
	p, err := s.ReadExecution("nobody", 0, 10)
	if err != nil || p.Exists || len(p.Records) != 0 {
		t.Fatalf("unknown execution: %+v %v", p, err)
	}
	if _, err := s.ReadExecution("a b", 0, 10); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("bad id: %v", err)
	}
}

// CHECKLIST §1.4, §1.10 (consumers), §1.24.
func TestConsumers(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, small)
	appendMany(t, s, 10, 2)
	r, err := s.Pull("c1", 4)
	if err != nil || !r.Exists || !r.Created || r.Acked != 0 || r.Pending != 10 || len(r.Records) != 4 || r.Records[0].Seq != 1 {
		t.Fatalf("first pull: %+v %v", r, err)
	}
	r, err = s.Pull("c1", 4)
	if err != nil || r.Created || r.Records[0].Seq != 1 {
		t.Fatalf("second pull without ack: %+v %v", r, err)
	}
	if cur, err := s.Ack("c1", 4); err != nil || cur != 4 {
		t.Fatalf("ack 4: %d %v", cur, err)
	}
	r, _ = s.Pull("c1", 100)
	if r.Acked != 4 || r.Pending != 6 || len(r.Records) != 6 || r.Records[0].Seq != 5 {
		t.Fatalf("pull after ack: %+v", r)
	}
	cases := []struct {
		name string
		cons string
		seq  uint64
		want error
		cur  uint64
	}{
		{"at cursor is a no-op", "c1", 4, nil, 4},
		{"below cursor is a no-op", "c1", 2, nil, 4},
		{"zero", "c1", 0, localseg.ErrInvalidState, 0},
		{"beyond tip", "c1", 11, localseg.ErrInvalidState, 0},
		{"unknown", "nobody", 3, localseg.ErrUnknownConsumer, 0},
		{"bad name", "a/b", 3, localseg.ErrInvalidInput, 0},
		{"forward", "c1", 10, nil, 10},
	}
	for _, c := range cases {
		cur, err := s.Ack(c.cons, c.seq)
		if !errors.Is(err, c.want) || (c.want == nil && cur != c.cur) {
			t.Fatalf("%s: %d %v", c.name, cur, err)
		}
	}
	if !errors.Is(localseg.ErrUnknownConsumer, localseg.ErrInvalidState) {
		t.Fatal("ErrUnknownConsumer is not an ErrInvalidState")
	}
	// A no-op ack (at or below the cursor) writes nothing.
	before := dirBytes(t, dir)
	for _, seq := range []uint64{10, 3} {
		if cur, err := s.Ack("c1", seq); err != nil || cur != 10 {
			t.Fatalf("no-op ack of %d: %d %v", seq, cur, err)
		}
	}
	if !sameFiles(before, dirBytes(t, dir)) {
		t.Fatal("a no-op ack changed the files")
	}
	// Delete: gone, unknown afterwards, does not come back on replay.
	if _, err := s.Pull("c2", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumer("c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumer("c2"); !errors.Is(err, localseg.ErrUnknownConsumer) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.Ack("c2", 1); !errors.Is(err, localseg.ErrUnknownConsumer) {
		t.Fatalf("ack of a deleted consumer: %v", err)
	}
	closeT(t, s)
	for _, replay := range []bool{false, true} {
		if replay {
			os.Remove(filepath.Join(dir, "checkpoint.json"))
		}
		s = openT(t, dir, small)
		snap, err := s.Snapshot()
		if err != nil || len(snap.Consumers) != 1 || snap.Consumers["c1"] != 10 {
			t.Fatalf("replay=%v: consumers %v %v", replay, snap.Consumers, err)
		}
		closeT(t, s)
	}
	// A consumer re-created after deletion starts over.
	s = openT(t, dir, small)
	defer closeT(t, s)
	r, err = s.Pull("c2", 1)
	if err != nil || !r.Created || r.Acked != 0 {
		t.Fatalf("recreated consumer: %+v %v", r, err)
	}
}

// CHECKLIST §1.5.
func TestReopenReplaysIdentically(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, small)
	evs := appendMany(t, s, 50, 5)
	if _, err := s.Pull("c", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack("c", 17); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	for _, mode := range []string{"checkpoint", "replay"} {
		if mode == "replay" {
			os.Remove(filepath.Join(dir, "checkpoint.json"))
		}
		s = openT(t, dir, small)
		wantRecords(t, scanAll(t, s), evs, 1)
		p, _ := s.Pull("c", 100)
		if p.Created || p.Acked != 17 || len(p.Records) != len(evs)-17 {
			t.Fatalf("%s: pull %+v", mode, p)
		}
		if s.OpenReport().Replayed != (mode == "replay") {
			t.Fatalf("%s: report %+v", mode, s.OpenReport())
		}
		ev := evt("after", len(evs))
		if seq := mustAppend(t, s, ev); seq != uint64(len(evs)+1) {
			t.Fatalf("%s: next append got %d", mode, seq)
		}
		evs = append(evs, ev)
		closeT(t, s)
	}
}

// CHECKLIST §1.6.
func TestRolloverManySegments(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: 600}
	s := openT(t, dir, o)
	evs := appendMany(t, s, 80, 3)
	// A batch that itself rolls over several times.
	var batch []localseg.Event
	for i := range 20 {
		batch = append(batch, evt("batch", i))
	}
	if _, _, err := s.AppendBatch(batch); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, batch...)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Segments) < 20 {
		t.Fatalf("only %d segments", len(snap.Segments))
	}
	next := uint64(1)
	for i, seg := range snap.Segments {
		if seg.ID != uint64(i+1) || seg.Sealed != (i < len(snap.Segments)-1) || seg.Size > 600 || seg.FirstSeq != next || seg.Events != int(seg.LastSeq+1-seg.FirstSeq) {
			t.Fatalf("segment %d: %+v", i, seg)
		}
		next = seg.LastSeq + 1
		if seg.Sealed {
			if fi, _ := os.Stat(filepath.Join(dir, localseg.SegmentFileName(seg.ID))); fi.Size() != seg.Size {
				t.Fatalf("sealed segment %d is %d bytes on disk, logical %d", seg.ID, fi.Size(), seg.Size)
			}
			b, err := s.ReadSegment(seg.ID)
			if err != nil {
				t.Fatal(err)
			}
			if sum, err := localseg.VerifySegment(seg.ID, b, seg.FirstSeq); err != nil || sum.LastSeq != seg.LastSeq {
				t.Fatalf("segment %d: %+v %v", seg.ID, sum, err)
			}
		}
	}
	if next != 101 {
		t.Fatalf("segments end at %d", next-1)
	}
	closeT(t, s)
	os.Remove(filepath.Join(dir, "checkpoint.json"))
	s = openT(t, dir, o)
	defer closeT(t, s)
	wantRecords(t, scanAll(t, s), evs, 1)
}

// CHECKLIST §1.9.
func TestEmptyStore(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, localseg.Options{})
	defer closeT(t, s)
	before := dirBytes(t, dir)
	p, err := s.Scan(0, 10)
	if err != nil || p.Exists || p.RecordCount != 0 || p.Base != 1 {
		t.Fatalf("scan: %+v %v", p, err)
	}
	if p, err = s.ReadExecution("e", 0, 10); err != nil || p.Exists {
		t.Fatalf("read: %+v %v", p, err)
	}
	r, err := s.Pull("c", 10)
	if err != nil || r.Exists || r.Created {
		t.Fatalf("pull: %+v %v", r, err)
	}
	if _, err := s.Ack("c", 1); !errors.Is(err, localseg.ErrUnknownConsumer) {
		t.Fatalf("ack: %v", err)
	}
	if _, err := s.Get(1); !errors.Is(err, localseg.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, ok, err := s.TailExtent(0, 100); ok || err != nil {
		t.Fatalf("tail extent: %v %v", ok, err)
	}
	if !sameFiles(before, dirBytes(t, dir)) {
		t.Fatal("reads of an empty store wrote something")
	}
}

// CHECKLIST §1.10 (identifiers), §1.23 and the rule that a refused
// append writes nothing.
func TestRefusedInputWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, localseg.Options{SegmentMaxBytes: 2048})
	defer closeT(t, s)
	mustAppend(t, s, evt("e", 0))
	before := dirBytes(t, dir)
	bad := []struct {
		name string
		ev   localseg.Event
		want error
	}{
		{"execution id charset", localseg.Event{ExecutionID: "a.b", TransactionID: "t"}, localseg.ErrInvalidInput},
		{"empty execution id", localseg.Event{ExecutionID: " ", TransactionID: "t"}, localseg.ErrInvalidInput},
		{"blank transaction", localseg.Event{ExecutionID: "e", TransactionID: "  "}, localseg.ErrInvalidInput},
		{"payload not UTF-8", localseg.Event{ExecutionID: "e", TransactionID: "t", Payload: "ok\xffno"}, localseg.ErrInvalidInput},
		{"too large", localseg.Event{ExecutionID: "e", TransactionID: "t", Payload: strings.Repeat("x", 2048)}, localseg.ErrTooLarge},
		{"too large by escaping", localseg.Event{ExecutionID: "e", TransactionID: "t", Payload: strings.Repeat("\x01", 400)}, localseg.ErrTooLarge},
	}
	for _, b := range bad {
		if _, err := s.Append(b.ev); !errors.Is(err, b.want) {
			t.Errorf("%s: %v, want %v", b.name, err, b.want)
		}
		if !errors.Is(localseg.ErrTooLarge, localseg.ErrInvalidInput) {
			t.Fatal("ErrTooLarge is not an ErrInvalidInput")
		}
		if _, _, err := s.AppendBatch([]localseg.Event{evt("e", 1), b.ev}); !errors.Is(err, b.want) {
			t.Errorf("batch with %s: %v", b.name, err)
		}
	}
	if !sameFiles(before, dirBytes(t, dir)) || s.Tip() != 1 {
		t.Fatal("a refused append changed the store")
	}
	if seq := mustAppend(t, s, evt("e", 2)); seq != 2 {
		t.Fatalf("refusals consumed sequences: next is %d", seq)
	}
}

// CHECKLIST §1.23.
func TestPayloadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	payloads := []string{
		"", `<script>alert("x")</script>`, `a\b\\c"d'`, "é — 日本 \u2028\u2029 😀", "\x00\x01\x1f\t\n\r\x7f",
		`{"json":["inside",1,true,null]}`, strings.Repeat("ü", 3000),
	}
	s := openT(t, dir, localseg.Options{})
	for i, p := range payloads {
		mustAppend(t, s, localseg.Event{ExecutionID: "e", TransactionID: fmt.Sprintf("t-%d-é\"", i), Payload: p})
	}
	closeT(t, s)
	os.Remove(filepath.Join(dir, "checkpoint.json"))
	s = openT(t, dir, localseg.Options{})
	defer closeT(t, s)
	for i, r := range scanAll(t, s) {
		if r.Payload != payloads[i] || r.TransactionID != fmt.Sprintf("t-%d-é\"", i) {
			t.Fatalf("payload %d: %q, want %q", i, r.Payload, payloads[i])
		}
		g, err := s.Get(r.Seq)
		if err != nil || g != r {
			t.Fatalf("get %d: %+v %v", r.Seq, g, err)
		}
	}
}

// CHECKLIST §1.21.
func TestSecondWriterLocked(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, localseg.Options{})
	mustAppend(t, s, evt("e", 0))
	if _, err := localseg.Open(dir, localseg.Options{}); !errors.Is(err, localseg.ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	ro := openT(t, dir, localseg.Options{ReadOnly: true})
	if ro.Tip() != 1 {
		t.Fatalf("read-only beside a writer: tip %d", ro.Tip())
	}
	closeT(t, ro)
	closeT(t, s)
	s = openT(t, dir, localseg.Options{})
	closeT(t, s)
	if err := s.Close(); !errors.Is(err, localseg.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Append(evt("e", 1)); !errors.Is(err, localseg.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

// CHECKLIST §1.15.
func TestReadOnly(t *testing.T) {
	t.Run("never written", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "missing", "shard-0000")
		s := openT(t, dir, localseg.Options{ReadOnly: true})
		p, err := s.Scan(0, 10)
		if err != nil || p.Exists {
			t.Fatalf("scan: %+v %v", p, err)
		}
		closeT(t, s)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("a read-only open created %s", dir)
		}
	})
	dir := t.TempDir()
	s := openT(t, dir, small)
	evs := appendMany(t, s, 20, 2)
	if _, err := s.Pull("c", 1); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	// A torn tail: half a frame of garbage after the last frame.
	segs := segFiles(t, dir)
	active := segs[len(segs)-1]
	os.Remove(filepath.Join(dir, "checkpoint.json"))
	b, _ := os.ReadFile(active)
	snap := dirBytes(t, dir)
	_ = b
	f, _ := os.OpenFile(active, os.O_RDWR, 0)
	st, _ := f.Stat()
	// Find the logical end: the first zero header.
	data := make([]byte, st.Size())
	f.ReadAt(data, 0)
	end := 0
	for end+12 <= len(data) && !bytes.Equal(data[end:end+4], []byte{0, 0, 0, 0}) {
		end += 12 + int(uint32(data[end+4])|uint32(data[end+5])<<8|uint32(data[end+6])<<16|uint32(data[end+7])<<24)
	}
	f.WriteAt([]byte{0x01, 0x00, 0xdb, 0xe5, 0x40, 0, 0, 0, 1, 2, 3, 4, 'x', 'y'}, int64(end))
	f.Close()
	snap = dirBytes(t, dir)

	ro := openT(t, dir, localseg.Options{ReadOnly: true})
	wantRecords(t, scanAll(t, ro), evs, 1)
	if rep := ro.OpenReport(); rep.TornTailBytes != 14 {
		t.Fatalf("read-only report %+v, want 14 torn bytes seen", rep)
	}
	if p, err := ro.Pull("c", 5); err != nil || len(p.Records) != 5 {
		t.Fatalf("pull of an existing consumer: %+v %v", p, err)
	}
	for name, op := range map[string]func() error{
		"append":  func() error { _, err := ro.Append(evt("e", 9)); return err },
		"batch":   func() error { _, _, err := ro.AppendBatch([]localseg.Event{evt("e", 9)}); return err },
		"ack":     func() error { _, err := ro.Ack("c", 1); return err },
		"create":  func() error { _, err := ro.Pull("new", 1); return err },
		"delete":  func() error { return ro.DeleteConsumer("c") },
		"seal":    func() error { _, err := ro.Seal(); return err },
		"reclaim": func() error { _, err := ro.Reclaim(1); return err },
		"recovered": func() error {
			return ro.AppendRecovered([]localseg.Frame{{Kind: localseg.KindAck, Consumer: "c", Seq: 1}})
		},
	} {
		if err := op(); !errors.Is(err, localseg.ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v", name, err)
		}
	}
	closeT(t, ro)
	if !sameFiles(snap, dirBytes(t, dir)) {
		t.Fatal("the read-only open changed the files (it must not truncate the torn tail)")
	}
	// The writable owner repairs.
	s = openT(t, dir, small)
	defer closeT(t, s)
	if rep := s.OpenReport(); rep.TornTailBytes != 14 || !rep.Replayed {
		t.Fatalf("writable report %+v", rep)
	}
	wantRecords(t, scanAll(t, s), evs, 1)
}

// CHECKLIST §1.22: a sealed segment is never appended to after a restart,
// and a torn frame in it is corruption.
func TestSealedSegmentsImmutable(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, small)
	appendMany(t, s, 30, 2)
	closeT(t, s)
	segs := segFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	sealed := map[string][]byte{}
	for _, p := range segs[:len(segs)-1] {
		sealed[p], _ = os.ReadFile(p)
	}
	s = openT(t, dir, small)
	appendMany(t, s, 3, 1)
	closeT(t, s)
	for p, b := range sealed {
		if now, _ := os.ReadFile(p); !bytes.Equal(now, b) {
			t.Fatalf("sealed %s changed after a restart", filepath.Base(p))
		}
	}
	// Cut the last frame of a sealed segment: corruption, at open without a
	// checkpoint and at the first read with one.
	victim := segs[1]
	b := sealed[victim]
	if err := os.WriteFile(victim, b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, small)
	if _, err := s.Scan(0, 1); !errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("first read over a torn sealed segment: %v", err)
	}
	closeT(t, s)
	os.Remove(filepath.Join(dir, "checkpoint.json"))
	_, err := localseg.Open(dir, small)
	var ce *localseg.CorruptionError
	if !errors.As(err, &ce) || ce.Segment != 2 {
		t.Fatalf("open over a torn sealed segment: %v", err)
	}
}

// Missing segment files are corruption naming the segment.
func TestMissingSegment(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, small)
	appendMany(t, s, 30, 2)
	closeT(t, s)
	segs := segFiles(t, dir)
	os.Remove(segs[1])
	for _, ro := range []bool{false, true} {
		_, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 1024, ReadOnly: ro})
		var ce *localseg.CorruptionError
		if !errors.As(err, &ce) || ce.Segment != 2 {
			t.Fatalf("read-only=%v: %v", ro, err)
		}
	}
}

// Seal, SealIfDue, preallocation and the observer.
type recObserver struct {
	sealed []localseg.SegmentInfo
	fsyncs int
}

func (o *recObserver) Fsync(time.Duration)              { o.fsyncs++ }
func (o *recObserver) Sealed(info localseg.SegmentInfo) { o.sealed = append(o.sealed, info) }

func TestSealAndPreallocation(t *testing.T) {
	for _, prealloc := range []bool{true, false} {
		t.Run(fmt.Sprintf("preallocate=%v", prealloc), func(t *testing.T) {
			dir := t.TempDir()
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			obs := &recObserver{}
			o := localseg.Options{SegmentMaxBytes: 64 << 10, NoPreallocate: !prealloc, SealMaxAge: time.Minute,
				Now: func() time.Time { return now }, Observer: obs}
			s := openT(t, dir, o)
			defer closeT(t, s)
			if sealed, err := s.Seal(); sealed || err != nil {
				t.Fatalf("seal of an empty segment: %v %v", sealed, err)
			}
			if sealed, err := s.SealIfDue(); sealed || err != nil {
				t.Fatalf("seal-if-due of an empty segment: %v %v", sealed, err)
			}
			appendMany(t, s, 5, 1)
			st, _ := os.Stat(segFiles(t, dir)[0])
			snap, _ := s.Snapshot()
			logical := snap.Segments[0].Size
			if prealloc && st.Size() != 64<<10 || !prealloc && st.Size() != logical {
				t.Fatalf("active segment file %d bytes, logical %d", st.Size(), logical)
			}
			if sealed, _ := s.SealIfDue(); sealed {
				t.Fatal("sealed before its age")
			}
			now = now.Add(2 * time.Minute)
			if sealed, err := s.SealIfDue(); !sealed || err != nil {
				t.Fatalf("seal-if-due: %v %v", sealed, err)
			}
			st, _ = os.Stat(segFiles(t, dir)[0])
			if st.Size() != logical || len(segFiles(t, dir)) != 2 {
				t.Fatalf("after the seal: %d bytes (logical %d), %d files", st.Size(), logical, len(segFiles(t, dir)))
			}
			if len(obs.sealed) != 1 || obs.sealed[0] != (localseg.SegmentInfo{ID: 1, Size: logical, Sealed: true, FirstSeq: 1, LastSeq: 5, Events: 5}) {
				t.Fatalf("observer: %+v", obs.sealed)
			}
			if obs.fsyncs == 0 {
				t.Fatal("no fsync observed")
			}
			mustAppend(t, s, evt("e", 9))
			if sealed, err := s.Seal(); !sealed || err != nil {
				t.Fatalf("seal: %v %v", sealed, err)
			}
			snap, _ = s.Snapshot()
			if len(snap.Segments) != 3 || !snap.Segments[1].Sealed || snap.Segments[2].Events != 0 || snap.Segments[2].FirstSeq != 7 || snap.Segments[2].LastSeq != 6 {
				t.Fatalf("segments %+v", snap.Segments)
			}
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, n := range []int64{-1, localseg.MaxSegmentBytes + 1} {
		if _, err := localseg.Open(t.TempDir(), localseg.Options{SegmentMaxBytes: n}); !errors.Is(err, localseg.ErrInvalidInput) {
			t.Errorf("segment max %d: %v", n, err)
		}
	}
}

// WriteSegmentFile writes a segment a store then opens (cold load).
func TestWriteSegmentFile(t *testing.T) {
	src := t.TempDir()
	s := openT(t, src, small)
	evs := appendMany(t, s, 25, 2)
	if _, err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	snap, _ := s.Snapshot()
	dst := t.TempDir()
	for _, seg := range snap.Segments {
		if !seg.Sealed {
			continue
		}
		b, err := s.ReadSegment(seg.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := localseg.WriteSegmentFile(localseg.OSFS{}, dst, seg.ID, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ReadSegment(snap.Segments[len(snap.Segments)-1].ID); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("read of the active segment: %v", err)
	}
	closeT(t, s)
	next := snap.Segments[len(snap.Segments)-1].ID
	if err := localseg.WriteSegmentFile(localseg.OSFS{}, dst, next, nil); err != nil {
		t.Fatal(err)
	}
	c := openT(t, dst, small)
	defer closeT(t, c)
	wantRecords(t, scanAll(t, c), evs, 1)
	if seq := mustAppend(t, c, evt("e", 99)); seq != 26 {
		t.Fatalf("append after a cold load: %d", seq)
	}
	snap2, _ := c.Snapshot()
	if last := snap2.Segments[len(snap2.Segments)-1]; last.ID != next || last.FirstSeq != 26 {
		t.Fatalf("appended into %+v", last)
	}
}

// CHECKLIST §1.8: a whole frame with a bad CRC is a hard error naming its
// segment and offset: at open without a checkpoint, at the first read with
// one (the open is O(1) and does not read it).
func TestBadCRC(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: 1024}
	s := openT(t, dir, o)
	appendMany(t, s, 20, 2)
	closeT(t, s)
	seg := segFiles(t, dir)[1]
	bounds := frameBounds(t, seg, func() int64 { fi, _ := os.Stat(seg); return fi.Size() }())
	b, _ := os.ReadFile(seg)
	b[bounds[1]+8] ^= 0xff // the CRC of the second frame
	os.WriteFile(seg, b, 0o644)
	want := func(err error) {
		t.Helper()
		var ce *localseg.CorruptionError
		if !errors.As(err, &ce) || ce.Segment != 2 || ce.Offset != bounds[1] || !errors.Is(err, localseg.ErrCorrupt) {
			t.Fatalf("%v, want corruption of segment 2 at %d", err, bounds[1])
		}
	}
	s = openT(t, dir, o)
	_, err := s.Scan(0, 1)
	want(err)
	_, err = s.Scan(0, 1) // and it stays an error
	want(err)
	closeT(t, s)
	os.Remove(filepath.Join(dir, "checkpoint.json"))
	_, err = localseg.Open(dir, o)
	want(err)
}
