package coldload

import (
	"context"

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
// instead of failing on its damage (a fenced writer's put that landed
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
