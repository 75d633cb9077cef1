package coldload

// passKind is what a restore may do with a damaged segment object.
type passKind int

const (
	passNone  passKind = iota // its error ends the restore
	passLast                  // the prefix ends before it; the tail objects go on (checked after them)
	passEmpty                 // it held no event of the log: its id becomes a jump of the restored store
	passFull                  // it follows segments a lazy hydrate left remote: download all
)

// passDamaged decides whether Hydrate may pass over items[i], a segment
// object whose bytes failed blobtier's length or digest check, expectSeq
// being the first sequence it would hold (docs/FORMAT.md §9.2):
//
//   - passLast when no segment is listed after it. The tail objects then
//     recover from expectSeq on; its owner shipped them before the seal
//     whose put landed damaged. hydrateInto accepts the result only when
//     an intact cursor object's shipped_through is reached (lastAccepted):
//     what only this object held lies beyond every position a report
//     promised, as for a damaged last tail object (damagedtail.go).
//   - passEmpty when the next segment follows it and starts at expectSeq
//     itself: in a valid log it held no event (a restored store's empty
//     filler, or a segment of consumer frames only), and an intact cursor
//     object's shipped_through at or above that start makes any consumer
//     frame it held older than the cursor object.
//
// Everything else refuses with the object's error: a damaged segment whose
// events no intact object holds, or that a report promised, is a loss and
// never a shortened replay. Verify never passes over one (it reports it).
//
// After segments a lazy hydrate leaves in the bucket (unknown), expectSeq
// is not known: passFull asks for a full download, which decides again.
func (h *run) passDamaged(items []*segItem, i int, expectSeq uint64, unknown bool) passKind {
	it := items[i]
	if h.collect || !it.damaged || it.probe {
		return passNone
	}
	if unknown {
		return passFull
	}
	if i == len(items)-1 {
		return passLast
	}
	next := items[i+1]
	if next.probe || !next.done || next.err != nil || next.evicted || !h.p.follows(it.id, next.id) {
		return passNone
	}
	// Without an intact cursor object shipped_through reads 0 (plan.go),
	// below every expectSeq: no pass.
	if next.sum.Events > 0 && next.sum.FirstSeq == expectSeq && h.p.cursor.ShippedThrough >= expectSeq {
		return passEmpty
	}
	return passNone
}

// lastAccepted reports whether a restore that passed over a damaged last
// segment may stand, tip being where the tail objects brought it: only
// when it reached the shipped_through of an intact cursor object (a
// damaged one leaves hasCursor false).
func (h *run) lastAccepted(tip uint64) bool {
	return h.p.hasCursor && tip >= h.p.cursor.ShippedThrough
}
