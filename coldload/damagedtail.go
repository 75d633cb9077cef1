package coldload

import (
	"context"
	"slices"

	"github.com/bucketlog/bucketlog/blobtier"
)

// statter is the optional Stat of a Reader (every blobtier.Bucket has it).
type statter interface {
	Stat(ctx context.Context, key string) (blobtier.ObjectInfo, error)
}

// damagedZombie reports whether tail object i, whose bytes failed
// verification, is a stale writer's by its key and its `epoch` metadata
// alone: an epoch off the chain, or one whose cut ended it below the key's
// first sequence. Such an object holds no valid frame whatever its bytes
// (docs/FORMAT.md §9.3), so Hydrate skips and counts it as a zombie
// instead of failing on its damage, and Verify counts it as a zombie, not
// as a problem (a fenced writer's put that landed
// damaged before its check-after-put saw the newer claim). It is marked a
// zombie when so. Anything else (no Stat, a failed Stat, metadata that does
// not decode, an epoch that may hold valid events) is no zombie: the
// damaged object is then judged as before (tailPhase).
func (h *run) damagedZombie(ctx context.Context, i int) bool {
	s, ok := h.r.(statter)
	if !ok {
		return false
	}
	t := h.p.tails[i]
	info, err := s.Stat(ctx, t.key)
	if err != nil {
		return false
	}
	if _, valid := h.p.validEnd(info.Meta.Epoch, t.first, t.last); valid {
		return false
	}
	h.zomb.tail(i)
	return true
}

// unshippedDamage returns the keys of the damaged tail objects (damaged:
// the tail phase's, by index) that hold events beyond cursor, the end of
// what the restore recovered, when they may be skipped: an intact cursor
// object says the owner shipped no further than cursor (its
// shipped_through is at or below it), so the events only those objects
// held were never reported to be in the bucket — an owner's put that
// landed damaged and was never put again (it stopped, or its disk failed,
// before its next pass). The tail phase calls it only when no object
// follows them. It returns nil (refuse, naming the key) without an intact
// cursor object, or when one of those events is at or below its
// shipped_through: a corrupt object that held promised events is a hard
// error, never a shortened replay.
func (h *run) unshippedDamage(cursor uint64, damaged map[int]error) []string {
	if !h.p.hasCursor || h.p.cursorErr != nil || cursor < h.p.cursor.ShippedThrough {
		return nil
	}
	var keys []string
	for i := range damaged {
		if t := h.p.tails[i]; t.last > cursor {
			keys = append(keys, t.key)
		}
	}
	slices.Sort(keys)
	return keys
}
