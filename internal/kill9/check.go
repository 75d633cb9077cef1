package kill9

import (
	"fmt"
	"maps"
	"slices"

	"github.com/bucketlog/bucketlog/localseg"
)

// Model is what the parent learned from a child's reports: the promises
// the engine made. It lives across the kills of one store lineage.
type Model struct {
	// Acked maps a sequence to the event acknowledged there ("A").
	Acked map[uint64]Ident
	// Pending maps a sequence to an event answered ErrNotInBucket ("N"):
	// durable locally, not promised in the bucket.
	Pending map[uint64]Ident
	// Shipped is the highest ShippedThrough reported ("T").
	Shipped uint64
	// Intent is, per consumer, the highest ack ever issued ("c" and "C"):
	// no cursor may exceed it.
	Intent map[string]uint64
	// Confirmed is, per consumer, the highest cursor an ack returned since
	// the last restore (or found by a check): a local check may not find
	// less.
	Confirmed map[string]uint64

	// HydratedRun, when set, is the run whose Open hydrates the store
	// (set before that run starts): its own acknowledgements are held to
	// the local promise, older ones to the restore promise.
	HydratedRun int
	// HydratedShipped is Shipped when the disk was lost before the
	// hydrating run: what the bucket promised to hold for older runs (the
	// hydrating run's own reports are about its own events).
	HydratedShipped uint64
	// Superseded holds older events whose sequence the hydrating run
	// reused for its own acknowledged events: they were not restored, so
	// they must have been allowed to go (asynchronous, after the last
	// ShippedThrough).
	Superseded map[uint64]Displaced

	// Counters of reports.
	AckLines, PendingLines, TornOpens, ShipLines int
	// Failures are F and E lines and conflicting reports.
	Failures []string

	dupSeen map[Ident]bool
}

// NewModel returns an empty model.
func NewModel() *Model {
	return &Model{
		Acked:      map[uint64]Ident{},
		Pending:    map[uint64]Ident{},
		Intent:     map[string]uint64{},
		Confirmed:  map[string]uint64{},
		Superseded: map[uint64]Displaced{},
		dupSeen:    map[Ident]bool{},
	}
}

// Clone returns a deep copy (the red control checks one state two ways).
func (m *Model) Clone() *Model {
	c := *m
	c.Acked = maps.Clone(m.Acked)
	c.Pending = maps.Clone(m.Pending)
	c.Intent = maps.Clone(m.Intent)
	c.Confirmed = maps.Clone(m.Confirmed)
	c.Superseded = maps.Clone(m.Superseded)
	c.Failures = slices.Clone(m.Failures)
	c.dupSeen = maps.Clone(m.dupSeen)
	return &c
}

// Observe applies one report line.
func (m *Model) Observe(l Line) {
	switch l.Kind {
	case 'A', 'N':
		book := m.Acked
		if l.Kind == 'N' {
			book = m.Pending
			m.PendingLines++
		} else {
			m.AckLines++
		}
		for _, b := range []struct {
			seqs    map[uint64]Ident
			pending bool
		}{{m.Acked, false}, {m.Pending, true}} {
			prev, ok := b.seqs[l.Seq]
			switch {
			case !ok || prev == l.ID:
			case m.HydratedRun > 0 && l.ID.Run >= m.HydratedRun && prev.Run < m.HydratedRun:
				// The disk was lost and this run hydrated from the bucket:
				// it may reuse a sequence the bucket never held. Whether
				// the displaced event was allowed to go is judged at the
				// next check.
				m.Superseded[l.Seq] = Displaced{ID: prev, Pending: b.pending}
				delete(b.seqs, l.Seq)
			default:
				m.Failures = append(m.Failures, fmt.Sprintf("sequence %d acknowledged twice: for %+v and for %+v", l.Seq, prev, l.ID))
			}
		}
		book[l.Seq] = l.ID
	case 'c':
		m.Intent[l.Consumer] = max(m.Intent[l.Consumer], l.Seq)
	case 'C':
		m.Intent[l.Consumer] = max(m.Intent[l.Consumer], l.Seq)
		m.Confirmed[l.Consumer] = max(m.Confirmed[l.Consumer], l.Seq)
	case 'T':
		m.ShipLines++
		m.Shipped = max(m.Shipped, l.Seq)
	case 'O':
		var torn int64
		var replayed int
		if _, err := fmt.Sscanf(l.Text, "%d %d", &torn, &replayed); err == nil && torn > 0 {
			m.TornOpens++
		}
	case 'F', 'E':
		m.Failures = append(m.Failures, string(l.Kind)+" "+l.Text)
	}
}

// Displaced is an older event whose sequence a hydrating run reused.
type Displaced struct {
	ID Ident
	// Pending: it was answered ErrNotInBucket, so the bucket never
	// promised it.
	Pending bool
}

// ackedBy reports whether run had any append acknowledged.
func (m *Model) ackedBy(run int) bool {
	for _, b := range []map[uint64]Ident{m.Acked, m.Pending} {
		for _, id := range b {
			if id.Run == run {
				return true
			}
		}
	}
	return false
}

// View is a store as a check sees it.
type View struct {
	Base uint64 // first retained sequence
	Tip  uint64
	// IDs[i] is the identity of sequence Base+i (zero for a record that is
	// not the workload's exact event: see Problems).
	IDs       []Ident
	Valid     []bool
	Consumers map[string]uint64
	TornBytes int64
	// HighestSegment is the id of the active segment.
	HighestSegment uint64
	// Problems found while reading, independent of any model: records
	// that differ from their deterministic event, gaps, out-of-order
	// writers, duplicate identities.
	Problems   []string
	Corrupt    int
	Duplicates []Ident
}

// ReadView opens the shard directory read-only (changing nothing, a torn
// tail served as its prefix) and reads every retained record.
func ReadView(shardDir string) (*View, error) {
	st, err := localseg.Open(shardDir, localseg.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read-only open of %s: %w", shardDir, err)
	}
	defer st.Close()
	snap, err := st.Snapshot()
	if err != nil {
		return nil, err
	}
	v := &View{Base: snap.ReclaimedSeq + 1, Tip: snap.Tip, Consumers: snap.Consumers, TornBytes: st.OpenReport().TornTailBytes}
	if n := len(snap.Segments); n > 0 {
		v.HighestSegment = snap.Segments[n-1].ID
	}
	if v.Tip+1 < v.Base {
		v.problem("tip %d below the base %d", v.Tip, v.Base)
		return v, nil
	}
	n := v.Tip + 1 - v.Base
	v.IDs = make([]Ident, n)
	v.Valid = make([]bool, n)
	seen := map[Ident]uint64{}
	lastN := map[[2]int]int{}
	after := v.Base - 1
	for after < v.Tip {
		p, err := st.Scan(after, 20000)
		if err != nil {
			return nil, fmt.Errorf("scan after %d: %w", after, err)
		}
		if len(p.Records) == 0 {
			v.problem("scan after %d returned nothing below the tip %d", after, v.Tip)
			break
		}
		for _, r := range p.Records {
			if r.Seq != after+1 {
				v.problem("gap: sequence %d follows %d", r.Seq, after)
				return v, nil
			}
			after = r.Seq
			if msg := recordProblem(r); msg != "" {
				v.Corrupt++
				v.problem("%s", msg)
				continue
			}
			id, _ := ParseTransactionID(r.TransactionID)
			i := r.Seq - v.Base
			v.IDs[i], v.Valid[i] = id, true
			if prev, dup := seen[id]; dup {
				v.Duplicates = append(v.Duplicates, id)
				v.problem("duplicate: %+v at sequences %d and %d", id, prev, r.Seq)
			}
			seen[id] = r.Seq
			k := [2]int{id.Run, id.Writer}
			if last, ok := lastN[k]; ok && id.N <= last && id.Writer != 0 {
				v.problem("order: run %d writer %d has n=%d at sequence %d after n=%d", id.Run, id.Writer, id.N, r.Seq, last)
			}
			lastN[k] = id.N
		}
	}
	return v, nil
}

func (v *View) problem(format string, args ...any) {
	v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
}

// At returns the identity stored at seq and whether a valid record is
// there.
func (v *View) At(seq uint64) (Ident, bool) {
	if seq < v.Base || seq > v.Tip || seq-v.Base >= uint64(len(v.IDs)) {
		return Ident{}, false
	}
	i := seq - v.Base
	return v.IDs[i], v.Valid[i]
}

// Mode says which promise a check holds a store to.
type Mode int

const (
	// ModeLocal: the shard directory after a kill. Every acknowledged event
	// (and every ErrNotInBucket one, durable locally) is there; cursors
	// are not backward.
	ModeLocal Mode = iota
	// ModeRestoreAsync: a store restored from the bucket, asynchronous
	// shipping. Everything acknowledged through the last reported
	// ShippedThrough is there; later ones may be missing (the loss window,
	// counted as Window).
	ModeRestoreAsync
	// ModeRestoreSync: a store restored from the bucket, synchronous
	// shipping. Every acknowledged event is there; ErrNotInBucket ones may
	// be missing (counted as Window).
	ModeRestoreSync
	// ModeStrict asks of a restored store what only a local disk can give:
	// every acknowledged event. The red control uses it to show that the
	// harness sees loss.
	ModeStrict
)

func (m Mode) String() string {
	switch m {
	case ModeLocal:
		return "local"
	case ModeRestoreAsync:
		return "restore-async"
	case ModeRestoreSync:
		return "restore-sync"
	case ModeStrict:
		return "strict"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) restored() bool { return m != ModeLocal }

// Verdict is the outcome of one check.
type Verdict struct {
	Mode Mode
	// Checked counts acknowledged events found at their sequence with
	// their exact payload.
	Checked int
	// Lost lists promised events missing or different (sequence order).
	Lost []uint64
	// Window lists events that may be missing and are: asynchronous
	// acknowledgements after the last ShippedThrough, or synchronous
	// ErrNotInBucket ones.
	Window []uint64
	// Reclaimed counts promised events below the base.
	Reclaimed int
	// Duplicates counts identities stored twice (each reported once per
	// model).
	Duplicates int
	Corrupt    int
	Problems   []string

	// drop lists the promises this check settled (lost, or gone within
	// the window), for Apply.
	drop map[uint64]Ident
}

// OK reports whether the check found nothing wrong.
func (v Verdict) OK() bool {
	return len(v.Lost) == 0 && v.Duplicates == 0 && v.Corrupt == 0 && len(v.Problems) == 0
}

func (v *Verdict) problem(format string, args ...any) {
	v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
}

// Check holds view to the model's promises under mode. It does not change
// the model (Apply does).
func Check(m *Model, view *View, mode Mode) Verdict {
	vd := Verdict{Mode: mode, Corrupt: view.Corrupt, drop: map[uint64]Ident{}}
	vd.Problems = append(vd.Problems, view.Problems...)
	for _, id := range view.Duplicates {
		if !m.dupSeen[id] {
			vd.Duplicates++
		}
	}
	shipped := m.Shipped
	if m.HydratedRun > 0 {
		shipped = m.HydratedShipped
	}
	if mode == ModeRestoreAsync || mode == ModeRestoreSync {
		if view.Tip < shipped {
			vd.problem("restored tip %d is below the reported ShippedThrough %d", view.Tip, shipped)
		}
	}
	fresh := func(id Ident) bool { return m.HydratedRun > 0 && id.Run >= m.HydratedRun }
	check := func(seq uint64, want Ident, mayMiss bool) {
		if seq < view.Base {
			vd.Reclaimed++
			return
		}
		got, ok := view.At(seq)
		switch {
		case ok && got == want:
			vd.Checked++
		case mayMiss && (seq > view.Tip || ok && fresh(got)):
			// Gone with the disk; after a hydration the sequence may
			// already hold an event of the hydrating run.
			vd.Window = append(vd.Window, seq)
			vd.drop[seq] = want
		case seq > view.Tip:
			vd.Lost = append(vd.Lost, seq)
			vd.drop[seq] = want
			vd.problem("lost: %+v acknowledged at sequence %d, the tip is %d", want, seq, view.Tip)
		default:
			vd.Lost = append(vd.Lost, seq)
			vd.drop[seq] = want
			vd.problem("lost: %+v acknowledged at sequence %d, which holds %+v (valid %v)", want, seq, got, ok)
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(m.Acked)) {
		id := m.Acked[seq]
		mayMiss := mode == ModeRestoreAsync && seq > shipped && !fresh(id)
		check(seq, id, mayMiss)
	}
	for _, seq := range slices.Sorted(maps.Keys(m.Pending)) {
		id := m.Pending[seq]
		check(seq, id, mode.restored() && !fresh(id))
	}
	for _, seq := range slices.Sorted(maps.Keys(m.Superseded)) {
		d := m.Superseded[seq]
		switch {
		case mode == ModeRestoreAsync && seq > shipped, mode.restored() && d.Pending:
			vd.Window = append(vd.Window, seq)
		case mode.restored():
			vd.Lost = append(vd.Lost, seq)
			vd.problem("lost: %+v acknowledged at sequence %d, which the hydrated run %d reused (shipped through %d)", d.ID, seq, m.HydratedRun, shipped)
		default:
			vd.problem("harness: superseded events outside a restore check")
		}
	}
	slices.Sort(vd.Lost)
	slices.Sort(vd.Window)
	if len(vd.Problems) > 40 {
		vd.Problems = append(vd.Problems[:40], fmt.Sprintf("… and %d more", len(vd.Problems)-40))
	}

	// Cursors: never beyond what was acked or beyond the tip; on the local
	// disk never behind a returned ack.
	for _, name := range slices.Sorted(maps.Keys(view.Consumers)) {
		cur := view.Consumers[name]
		if name != FastConsumer && name != LagConsumer {
			vd.problem("unknown consumer %q", name)
			continue
		}
		if cur > m.Intent[name] {
			vd.problem("consumer %s: cursor %d beyond the highest ack issued (%d)", name, cur, m.Intent[name])
		}
		if cur > view.Tip {
			vd.problem("consumer %s: cursor %d beyond the tip %d", name, cur, view.Tip)
		}
		if mode == ModeLocal && cur < m.Confirmed[name] {
			vd.problem("consumer %s: cursor %d went back from %d", name, cur, m.Confirmed[name])
		}
	}
	if mode == ModeLocal {
		for name, conf := range m.Confirmed {
			if _, ok := view.Consumers[name]; !ok && conf > 0 {
				vd.problem("consumer %s (cursor %d) is missing", name, conf)
			}
		}
	}
	// Reclaim: GC may remove only what every consumer acked (both exist
	// before the first event that could seal a segment).
	if reclaimed := view.Base - 1; reclaimed > 0 {
		bound := min(m.Intent[FastConsumer], m.Intent[LagConsumer])
		if reclaimed > bound {
			vd.problem("reclaimed through %d, beyond the consumers' acks (lag consumer %d, fast %d)", reclaimed, m.Intent[LagConsumer], m.Intent[FastConsumer])
		}
	}
	return vd
}

// Apply moves the model past a check: a promise found broken is counted
// once and dropped; after a restore, events beyond the restored tip are
// gone for good (the next run reuses their sequences), and cursors restart
// from what was restored.
func (m *Model) Apply(view *View, vd Verdict) {
	for _, id := range view.Duplicates {
		m.dupSeen[id] = true
	}
	for seq, id := range vd.drop {
		// Only the settled promise goes: after a hydration the sequence
		// may hold a newer acknowledged event.
		if m.Acked[seq] == id {
			delete(m.Acked, seq)
		}
		if m.Pending[seq] == id {
			delete(m.Pending, seq)
		}
	}
	if vd.Mode.restored() {
		for seq := range m.Acked {
			if seq > view.Tip {
				delete(m.Acked, seq)
			}
		}
		for seq := range m.Pending {
			if seq > view.Tip {
				delete(m.Pending, seq)
			}
		}
		m.Confirmed = map[string]uint64{}
		maps.Copy(m.Confirmed, view.Consumers)
		m.HydratedRun, m.HydratedShipped = 0, 0
		clear(m.Superseded)
		return
	}
	for name, cur := range view.Consumers {
		m.Confirmed[name] = max(m.Confirmed[name], cur)
	}
}
