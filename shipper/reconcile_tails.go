package shipper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// checkTails reads back, at start, the tail objects the local store also
// holds that matter: the newest intact one is compared with the local log
// (compareTail), and every one above trusted (the higher of the cursor
// object's shipped_through, which a running uploader moves only over tail
// objects it read back intact, and the durable segments' coverage) is
// verified, since the rebuilt cursor would count it as shipped. A damaged
// object of our own (its metadata names the local bytes of its range) is
// returned in damaged: it is not shipped (left out of the rebuilt cursor),
// and the next tick ships its events again from the local copy. A
// damaged object whose metadata names other bytes is a diverged history.
func (s *Shipper) checkTails(ctx context.Context, reads *openReads, tails []blobtier.ObjectInfo, base, trusted uint64, segs []localseg.SegmentInfo) (damaged map[string]bool, err error) {
	slices.SortFunc(tails, func(a, b blobtier.ObjectInfo) int { return cmp.Compare(b.Parsed.LastSeq, a.Parsed.LastSeq) })
	compared := false
	for _, info := range tails {
		if compared && info.Parsed.LastSeq <= trusted {
			break
		}
		data, _, err := reads.get(ctx, info.Key)
		if errors.Is(err, blobtier.ErrCorrupt) {
			own, oerr := s.ownTail(ctx, reads, info, segs)
			if oerr != nil {
				return nil, oerr
			}
			if !own {
				return nil, fmt.Errorf("%w: tail object %s is damaged and its metadata does not name the local store's bytes: %v", ErrDiverged, info.Key, err)
			}
			s.log.Error("a tail object of this shard reads back damaged; its events are shipped again", "key", info.Key, "err", err)
			if damaged == nil {
				damaged = map[string]bool{}
			}
			damaged[info.Key] = true
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", info.Key, err)
		}
		if !compared {
			if err := s.compareTail(ctx, info, data, base, segs); err != nil {
				return nil, err
			}
			compared = true
		}
	}
	return damaged, nil
}

// ownTail reports whether the metadata of tail object info names exactly
// the local bytes a tail batch of its sequences holds: the frames after
// event FirstSeq-1 (from the start of the segment when that event is in an
// earlier one) through the frame of event LastSeq. Our writer ships a tail
// batch from one segment, but a hydrated store lays the events out in
// segments of its own, so the range may run on into the next local
// segments (seed 113146 of the simulation): their frames are taken in
// order.
func (s *Shipper) ownTail(ctx context.Context, reads *openReads, info blobtier.ObjectInfo, segs []localseg.SegmentInfo) (bool, error) {
	st, err := reads.stat(ctx, info.Key)
	if errors.Is(err, blobtier.ErrCorrupt) {
		return false, nil // no valid metadata: not an object this shard's writer made
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", info.Key, err)
	}
	k := info.Parsed
	seg, ok := segmentHolding(segs, k.FirstSeq)
	if !ok {
		return false, nil
	}
	var local []byte
	for _, sg := range segs {
		if sg.ID < seg.ID {
			continue
		}
		if int64(len(local)) > st.Meta.Length {
			return false, nil // longer than the object already: not its bytes
		}
		data, err := s.localBytes(sg)
		if err != nil {
			return false, err
		}
		var start int64
		for o := int64(0); o < int64(len(data)); {
			f, n, err := localseg.DecodeFrame(data[o:])
			if err != nil {
				return false, fmt.Errorf("local segment %d at byte %d: %w", sg.ID, o, err)
			}
			o += int64(n)
			if f.Kind != localseg.KindEvent {
				continue
			}
			if f.Seq == k.FirstSeq-1 {
				start = o
			}
			if f.Seq == k.LastSeq {
				m := blobtier.MetaOf(append(local, data[start:o]...), st.Meta.Epoch)
				return st.Meta.Length == m.Length && st.Meta.XXH64 == m.XXH64, nil
			}
		}
		local = append(local, data[start:]...)
	}
	return false, nil
}
