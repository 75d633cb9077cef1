package kill9

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bucketlog/bucketlog/localseg"
)

func TestReportLinesRoundTrip(t *testing.T) {
	id := Ident{Run: 7, Writer: 31, N: 12345}
	for _, kind := range []byte{'A', 'N'} {
		b := appendLine(nil, kind, 987654321, id)
		if b[len(b)-1] != '\n' {
			t.Fatalf("%q does not end with a newline", b)
		}
		l, err := ParseLine(strings.TrimSuffix(string(b), "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if l.Kind != kind || l.Seq != 987654321 || l.ID != id {
			t.Fatalf("%q parsed as %+v", b, l)
		}
	}
	good := map[string]Line{
		"c fast 12": {Kind: 'c', Consumer: "fast", Seq: 12},
		"C lag 3":   {Kind: 'C', Consumer: "lag", Seq: 3},
		"T 99":      {Kind: 'T', Seq: 99},
		"R":         {Kind: 'R'},
		"B":         {Kind: 'B'},
		"O 0 1":     {Kind: 'O', Text: "0 1"},
		"F oops: x": {Kind: 'F', Text: "oops: x"},
	}
	for s, want := range good {
		got, err := ParseLine(s)
		if err != nil || got != want {
			t.Errorf("ParseLine(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	// A line cut short or garbled must never parse as a fact.
	for _, s := range []string{"", "A 1 2 3", "A 1 2 3 x", "A -1 2 3 4", "T", "T x", "C fast", "Q 1", "AA 1 2 3 4", "R 1", "c fast 1 2"} {
		if l, err := ParseLine(s); err == nil {
			t.Errorf("ParseLine(%q) = %+v, want an error", s, l)
		}
	}
}

func TestPayloadIsDeterministicValidAndVaried(t *testing.T) {
	seen := map[string]Ident{}
	var nonASCII, escaped int
	for run := range 3 {
		for w := range 5 {
			for n := range 40 {
				id := Ident{Run: run, Writer: w, N: n}
				p := Payload(id)
				if p != Payload(id) {
					t.Fatalf("Payload(%+v) is not deterministic", id)
				}
				if !utf8.ValidString(p) {
					t.Fatalf("Payload(%+v) is not valid UTF-8", id)
				}
				if prev, dup := seen[p]; dup {
					t.Fatalf("Payload(%+v) equals Payload(%+v)", id, prev)
				}
				seen[p] = id
				if strings.ContainsAny(p, "é日\u2028") {
					nonASCII++
				}
				if strings.ContainsAny(p, `<>&"\`) {
					escaped++
				}
				got, ok := ParseTransactionID(id.TransactionID())
				if !ok || got != id {
					t.Fatalf("transaction id %q parsed as %+v, %v", id.TransactionID(), got, ok)
				}
			}
		}
	}
	if nonASCII < 100 || escaped < 100 {
		t.Errorf("payloads too plain: %d with non-ASCII, %d with characters JSON encoders escape, of %d", nonASCII, escaped, len(seen))
	}
	for _, s := range []string{"", "t-1-2", "t-1-2-3-4", "x-1-2-3", "t-a-2-3", "t--1-2-3"} {
		if id, ok := ParseTransactionID(s); ok {
			t.Errorf("ParseTransactionID(%q) = %+v, want no identity", s, id)
		}
	}
}

func event(id Ident) localseg.Event {
	return localseg.Event{ExecutionID: id.ExecutionID(), TransactionID: id.TransactionID(), Payload: Payload(id)}
}

// TestCheckSeesWhatIsWrong builds a real store holding a duplicate, an
// altered payload and an out-of-order writer, and a model promising an
// event the store lacks and one it holds something else for: the check
// must name each (the harness can see loss, duplication and corruption).
func TestCheckSeesWhatIsWrong(t *testing.T) {
	dir := localseg.ShardDir(t.TempDir(), 0)
	// The window off, so the repeated event is stored twice, as a store
	// written without de-duplication holds it (localseg/txwindow.go).
	st, err := localseg.Open(dir, localseg.Options{TransactionWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := Ident{1, 1, 1}, Ident{1, 1, 2}, Ident{1, 2, 3}
	altered := event(Ident{1, 2, 1})
	altered.Payload += "!"
	for _, ev := range []localseg.Event{event(a), event(b), event(a), altered, event(c), event(Ident{1, 2, 2})} {
		if _, err := st.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Pull(FastConsumer, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ack(FastConsumer, 2); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	v, err := ReadView(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel()
	for _, l := range []Line{
		{Kind: 'A', Seq: 1, ID: a}, {Kind: 'A', Seq: 2, ID: b}, {Kind: 'A', Seq: 5, ID: c},
		{Kind: 'A', Seq: 4, ID: Ident{1, 2, 1}}, // stored altered
		{Kind: 'A', Seq: 9, ID: Ident{1, 3, 1}}, // beyond the tip
		{Kind: 'c', Consumer: FastConsumer, Seq: 1},
		{Kind: 'C', Consumer: FastConsumer, Seq: 1},
	} {
		m.Observe(l)
	}
	m.Confirmed[FastConsumer] = 3 // as if an ack to 3 had returned
	vd := Check(m, v, ModeLocal)
	if got, want := vd.Lost, []uint64{4, 9}; !slices.Equal(got, want) {
		t.Errorf("lost %v, want %v", got, want)
	}
	if vd.Checked != 3 || vd.Duplicates != 1 || vd.Corrupt != 1 || vd.OK() {
		t.Errorf("checked %d (want 3), duplicates %d (want 1), corrupt %d (want 1), ok %v", vd.Checked, vd.Duplicates, vd.Corrupt, vd.OK())
	}
	all := strings.Join(vd.Problems, "\n")
	for _, want := range []string{"duplicate", "order: run 1 writer 2", "payload", "cursor 2 beyond the highest ack issued (1)", "cursor 2 went back from 3"} {
		if !strings.Contains(all, want) {
			t.Errorf("no problem mentions %q in:\n%s", want, all)
		}
	}
	// Each broken promise and duplicate is counted once per lineage.
	m.Apply(v, vd)
	again := Check(m, v, ModeLocal)
	if len(again.Lost) != 0 || again.Duplicates != 0 {
		t.Errorf("counted again after Apply: lost %v, duplicates %d", again.Lost, again.Duplicates)
	}
}

// view builds a View holding events 1..tip of run 1, writer 1.
func view(base, tip uint64, consumers map[string]uint64) *View {
	v := &View{Base: base, Tip: tip, Consumers: consumers}
	for seq := base; seq <= tip; seq++ {
		v.IDs = append(v.IDs, Ident{1, 1, int(seq)})
		v.Valid = append(v.Valid, true)
	}
	return v
}

func TestCheckModes(t *testing.T) {
	m := NewModel()
	for seq := uint64(1); seq <= 8; seq++ {
		m.Observe(Line{Kind: 'A', Seq: seq, ID: Ident{1, 1, int(seq)}})
	}
	m.Observe(Line{Kind: 'N', Seq: 9, ID: Ident{1, 1, 9}})
	m.Observe(Line{Kind: 'T', Seq: 5})

	type want struct {
		lost, window []uint64
		ok           bool
	}
	cases := []struct {
		name string
		tip  uint64
		mode Mode
		want want
	}{
		{"async restore past the shipped point", 6, ModeRestoreAsync, want{nil, []uint64{7, 8, 9}, true}},
		{"async restore short of the shipped point", 4, ModeRestoreAsync, want{[]uint64{5}, []uint64{6, 7, 8, 9}, false}},
		{"strict asks for every ack", 6, ModeStrict, want{[]uint64{7, 8}, []uint64{9}, false}},
		{"sync restore: every ack, not the ErrNotInBucket one", 8, ModeRestoreSync, want{nil, []uint64{9}, true}},
		{"sync restore missing an ack", 7, ModeRestoreSync, want{[]uint64{8}, []uint64{9}, false}},
		{"local disk holds everything", 9, ModeLocal, want{nil, nil, true}},
		{"local disk lost the ErrNotInBucket one", 8, ModeLocal, want{[]uint64{9}, nil, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vd := Check(m.Clone(), view(1, tc.tip, nil), tc.mode)
			if !slices.Equal(vd.Lost, tc.want.lost) || !slices.Equal(vd.Window, tc.want.window) || vd.OK() != tc.want.ok {
				t.Errorf("lost %v window %v ok %v; want %v %v %v (%v)", vd.Lost, vd.Window, vd.OK(), tc.want.lost, tc.want.window, tc.want.ok, vd.Problems)
			}
		})
	}

	// After a restore, what lies beyond the restored tip is gone for good:
	// the next run reuses those sequences for new events.
	mm := m.Clone()
	v := view(1, 6, map[string]uint64{FastConsumer: 2})
	mm.Apply(v, Check(mm, v, ModeRestoreAsync))
	if len(mm.Acked) != 6 || len(mm.Pending) != 0 || mm.Confirmed[FastConsumer] != 2 {
		t.Errorf("after the restore: %d acked, %d pending, confirmed %v", len(mm.Acked), len(mm.Pending), mm.Confirmed)
	}
	mm.Observe(Line{Kind: 'A', Seq: 7, ID: Ident{2, 1, 1}})
	if len(mm.Failures) != 0 {
		t.Errorf("a new event at a sequence the restore gave up is not a conflict: %v", mm.Failures)
	}
}

func TestCheckReclaimBoundAndCursors(t *testing.T) {
	m := NewModel()
	for seq := uint64(1); seq <= 20; seq++ {
		m.Observe(Line{Kind: 'A', Seq: seq, ID: Ident{1, 1, int(seq)}})
	}
	m.Observe(Line{Kind: 'c', Consumer: FastConsumer, Seq: 18})
	m.Observe(Line{Kind: 'c', Consumer: LagConsumer, Seq: 6})

	ok := Check(m, view(7, 20, map[string]uint64{FastConsumer: 18, LagConsumer: 6}), ModeLocal)
	if !ok.OK() || ok.Reclaimed != 6 || ok.Checked != 14 {
		t.Errorf("reclaim through the lagging consumer's ack: ok %v reclaimed %d checked %d %v", ok.OK(), ok.Reclaimed, ok.Checked, ok.Problems)
	}
	bad := Check(m, view(8, 20, map[string]uint64{FastConsumer: 18, LagConsumer: 6}), ModeLocal)
	if bad.OK() || !strings.Contains(strings.Join(bad.Problems, "\n"), "reclaimed through 7, beyond the consumers' acks") {
		t.Errorf("a reclaim past the lagging consumer went unnoticed: %v", bad.Problems)
	}
	past := Check(m, view(1, 5, map[string]uint64{LagConsumer: 6}), ModeRestoreAsync)
	if !strings.Contains(strings.Join(past.Problems, "\n"), "cursor 6 beyond the tip 5") {
		t.Errorf("a cursor past the restored tip went unnoticed: %v", past.Problems)
	}
	stranger := Check(m, view(1, 20, map[string]uint64{"other": 1}), ModeLocal)
	if stranger.OK() {
		t.Errorf("an unknown consumer went unnoticed")
	}
}

// TestCheckAfterHydration: a child that hydrated a lost disk from the
// bucket may reuse the sequences the bucket never held. Older events there
// are the asynchronous loss window; the hydrating run's own acknowledged
// events are held to the local promise; in synchronous mode nothing
// acknowledged may be displaced.
func TestCheckAfterHydration(t *testing.T) {
	build := func() *Model {
		m := NewModel()
		for seq := uint64(1); seq <= 8; seq++ {
			m.Observe(Line{Kind: 'A', Seq: seq, ID: Ident{1, 1, int(seq)}})
		}
		m.Observe(Line{Kind: 'T', Seq: 5})
		m.HydratedRun, m.HydratedShipped = 2, 5
		// Run 2 hydrated 1..6 and acked its own event at 7, then 9.
		m.Observe(Line{Kind: 'A', Seq: 7, ID: Ident{2, 1, 1}})
		m.Observe(Line{Kind: 'A', Seq: 9, ID: Ident{2, 1, 3}})
		m.Observe(Line{Kind: 'T', Seq: 9})
		if len(m.Failures) != 0 {
			t.Fatalf("a hydrating run reusing a sequence is not a conflict: %v", m.Failures)
		}
		return m
	}
	v := view(1, 6, nil)
	for _, id := range []Ident{{2, 1, 1}, {2, 1, 2}, {2, 1, 3}} {
		v.IDs = append(v.IDs, id)
		v.Valid = append(v.Valid, true)
	}
	v.Tip = 9

	vd := Check(build(), v, ModeRestoreAsync)
	if !vd.OK() || vd.Checked != 8 || !slices.Equal(vd.Window, []uint64{7, 8}) {
		t.Errorf("async: ok %v checked %d window %v lost %v %v", vd.OK(), vd.Checked, vd.Window, vd.Lost, vd.Problems)
	}
	// Once settled, the displaced events are no longer promised: the next
	// local check of the same store finds nothing wrong.
	mm := build()
	mm.Apply(v, Check(mm, v, ModeRestoreAsync))
	if vd := Check(mm, v, ModeLocal); !vd.OK() || vd.Checked != 8 {
		t.Errorf("local check after the hydration check: ok %v checked %d %v", vd.OK(), vd.Checked, vd.Problems)
	}
	vd = Check(build(), v, ModeRestoreSync)
	if !slices.Equal(vd.Lost, []uint64{7, 8}) {
		t.Errorf("sync: lost %v, want the displaced acknowledged events 7 and 8", vd.Lost)
	}
	short := view(1, 6, nil)
	short.IDs, short.Valid = append(short.IDs, Ident{2, 1, 1}), append(short.Valid, true)
	short.Tip = 7
	vd = Check(build(), short, ModeRestoreAsync)
	if !slices.Equal(vd.Lost, []uint64{9}) {
		t.Errorf("the hydrating run's own acknowledged event 9 is missing: lost %v, want [9]", vd.Lost)
	}
	// An older event answered ErrNotInBucket was never promised by the
	// bucket: a hydrating run may reuse its sequence even in synchronous
	// mode.
	pm := NewModel()
	pm.Observe(Line{Kind: 'A', Seq: 1, ID: Ident{1, 1, 1}})
	pm.Observe(Line{Kind: 'N', Seq: 2, ID: Ident{1, 1, 2}})
	pm.HydratedRun, pm.HydratedShipped = 2, 1
	pm.Observe(Line{Kind: 'A', Seq: 2, ID: Ident{2, 1, 1}})
	pv := view(1, 1, nil)
	pv.IDs, pv.Valid, pv.Tip = append(pv.IDs, Ident{2, 1, 1}), append(pv.Valid, true), 2
	if vd := Check(pm, pv, ModeRestoreSync); !vd.OK() || !slices.Equal(vd.Window, []uint64{2}) {
		t.Errorf("sync, displaced ErrNotInBucket event: ok %v window %v lost %v", vd.OK(), vd.Window, vd.Lost)
	}
	// The shipped point that binds older runs is the one before the disk
	// was lost, not the hydrating run's own.
	low := view(1, 4, nil)
	vd = Check(build(), low, ModeRestoreAsync)
	if !slices.Contains(vd.Lost, 5) || slices.Contains(vd.Lost, 6) {
		t.Errorf("hydrated only through 4 of the shipped 5: lost %v, want 5 and not 6", vd.Lost)
	}
}
