package tailbatch

import (
	"errors"
)

// ErrOccupied, wrapped in the error Hooks.Conflict returns, says the
// batch's key holds an object that must stay where it is (writer fencing: a
// stale writer's object of an older epoch, which the engine does not
// delete) and that the batch's events may ship under another key. The pass
// then ships the same events as a batch one Event shorter (another last
// sequence, so another key; the rest follows in the next batch, prepared
// anew), up to maxReshapes times per pass. A batch of a single Event cannot
// be shortened: the pass fails with the error, as with any failed upload.
var ErrOccupied = errors.New("tailbatch: the batch's key is occupied by an object that stays")

// maxReshapes bounds the shortened batches of one pass: every stale object
// in the way costs one put, and a pass that meets more leaves the rest to
// the next.
const maxReshapes = 16

// shorter returns bt cut at its last Event but one (the frames of src after
// event bt.FirstSeq-1, at most bt.Len()-1 bytes), or false when bt holds
// one Event.
func (r *Replicator) shorter(src Source, bt Batch) (Batch, bool) {
	if bt.Records() < 2 {
		return Batch{}, false
	}
	ext, ok, err := src.TailExtent(bt.FirstSeq-1, bt.Len()-1)
	if err != nil || !ok || checkExtent(ext, bt.FirstSeq-1) != nil || ext.LastSeq >= bt.LastSeq || ext.Segment != bt.Segment {
		return Batch{}, false
	}
	return BatchOf(r.shard, ext, bt.Epoch), true
}
