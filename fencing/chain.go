package fencing

import (
	"fmt"
	"slices"
)

// Lineage is the valid history of one shard: the chain of start records
// from the newest back to epoch 0. Its zero value is the lineage of a
// bucket with no start records (everything is epoch 0, nothing ended).
type Lineage struct {
	chain    []StartRecord          // oldest first
	ended    map[uint64]StartRecord // predecessor epoch → the record that ends it
	onChain  map[uint64]bool        // epochs with a start record on the chain
	offChain []uint64               // epochs whose start record is not on the chain
	highest  uint64                 // highest start segment of any record (on chain or not)
}

// Chain builds the lineage from every start record of a shard (in any
// order, each decoded and checked; two records of one epoch are an
// error). It starts at the highest epoch and follows prev_epoch back to
// 0; a record not on that path is ignored (its claimant was superseded
// before its cut counted) and reported by OffChain.
func Chain(records []StartRecord) (Lineage, error) {
	l := Lineage{ended: map[uint64]StartRecord{}, onChain: map[uint64]bool{}}
	byEpoch := make(map[uint64]StartRecord, len(records))
	for _, r := range records {
		if err := r.check(); err != nil {
			return Lineage{}, err
		}
		if _, dup := byEpoch[r.Epoch]; dup {
			return Lineage{}, fmt.Errorf("%w: two start records of epoch %d", ErrBadRecord, r.Epoch)
		}
		byEpoch[r.Epoch] = r
		l.highest = max(l.highest, r.StartSegment)
	}
	if len(byEpoch) == 0 {
		return l, nil
	}
	e := slices.Max(mapsKeys(byEpoch))
	for e != 0 {
		r, ok := byEpoch[e]
		if !ok {
			return Lineage{}, fmt.Errorf("%w: epoch %d's start record is missing (named as prev_epoch by epoch %d)", ErrBrokenChain, e, l.chain[0].Epoch)
		}
		l.chain = append([]StartRecord{r}, l.chain...)
		l.onChain[e] = true
		l.ended[r.PrevEpoch] = r
		e = r.PrevEpoch
	}
	for ep := range byEpoch {
		if !l.onChain[ep] {
			l.offChain = append(l.offChain, ep)
		}
	}
	slices.Sort(l.offChain)
	// Sequences stay gapless along the chain: each cut ends its predecessor
	// at or above where the predecessor's own cut started it.
	for i := 1; i < len(l.chain); i++ {
		if prev, r := l.chain[i-1], l.chain[i]; r.PrevEndSeq+1 < prev.StartSeq {
			return Lineage{}, fmt.Errorf("%w: epoch %d ends epoch %d at %d, below its start %d", ErrBadRecord, r.Epoch, prev.Epoch, r.PrevEndSeq, prev.StartSeq)
		} else if r.FenceSegment < prev.StartSegment {
			// Its claimant saw the predecessor's record, so its fence lies
			// at or above that start segment (at it when no object held
			// it: the predecessor's unsealed active segment, which its
			// stale writer may still seal, lies in the gap): the cuts'
			// gaps never overlap.
			return Lineage{}, fmt.Errorf("%w: epoch %d's fence_segment %d is below epoch %d's start_segment %d", ErrBadRecord, r.Epoch, r.FenceSegment, prev.Epoch, prev.StartSegment)
		}
	}
	return l, nil
}

func mapsKeys(m map[uint64]StartRecord) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// Newest is the newest epoch on the chain (0 with no start records).
func (l Lineage) Newest() uint64 {
	if len(l.chain) == 0 {
		return 0
	}
	return l.chain[len(l.chain)-1].Epoch
}

// Records returns the chain's start records, oldest first.
func (l Lineage) Records() []StartRecord { return slices.Clone(l.chain) }

// Record returns epoch e's start record when e is on the chain.
func (l Lineage) Record(e uint64) (StartRecord, bool) {
	if !l.onChain[e] {
		return StartRecord{}, false
	}
	for _, r := range l.chain {
		if r.Epoch == e {
			return r, true
		}
	}
	return StartRecord{}, false
}

// OffChain lists the epochs whose start records are not on the chain.
func (l Lineage) OffChain() []uint64 { return slices.Clone(l.offChain) }

// OnChain reports whether epoch e is started on the chain (epoch 0 always is).
func (l Lineage) OnChain(e uint64) bool { return e == 0 || l.onChain[e] }

// End returns the last valid sequence of epoch e, and false when e is not
// ended (it is the newest epoch, or it is not on the chain).
func (l Lineage) End(e uint64) (uint64, bool) {
	if !l.OnChain(e) {
		return 0, false
	}
	r, ok := l.ended[e]
	return r.PrevEndSeq, ok
}

// ValidSeq reports whether a frame with sequence seq in an object of epoch
// e belongs to the lineage: e is on the chain and seq is at most end(e).
// (The caller also requires seq above the reclaim watermark.)
func (l Lineage) ValidSeq(e, seq uint64) bool {
	if !l.OnChain(e) {
		return false
	}
	end, ended := l.End(e)
	return !ended || seq <= end
}

// SkipSegment reports whether a segment object of epoch e at id is outside
// the lineage: e is not on the chain, or e is ended and id is at or above
// the fence segment of the record that ends it (a zombie's seals after the
// cut).
func (l Lineage) SkipSegment(e, id uint64) bool {
	if !l.OnChain(e) {
		return true
	}
	r, ended := l.ended[e]
	return ended && id >= r.FenceSegment
}

// Gap reports whether segment id lies in the gap a cut leaves between its
// fence segment and its start segment (segment ids are allowed to skip
// exactly there; sequences never skip).
func (l Lineage) Gap(id uint64) bool {
	for _, r := range l.chain {
		if id >= r.FenceSegment && id < r.StartSegment {
			return true
		}
	}
	return false
}

// HighestStartSegment is the highest start segment of any start record
// seen, on the chain or not: a new cut's fence must lie above it.
func (l Lineage) HighestStartSegment() uint64 { return l.highest }
