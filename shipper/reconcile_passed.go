package shipper

import (
	"context"
	"errors"

	"github.com/bucketlog/bucketlog/blobtier"
)

// passedOver reports whether info, a segment object at an id the local
// store lacks although the id lies between its base and its highest
// segment (so inside one of its recorded jumps: ids it never held), is one
// a restore passed over (docs/FORMAT.md §9.2): the object fails
// verification. The restore recovered its events from tail objects into a
// later segment, so the object is garbage this store never wrote and never
// writes (its key is below the store's ids); it is left to the reclaim
// that passes it. An intact object there, or one that cannot be read,
// stays a divergence (or the read's error).
func (s *Shipper) passedOver(ctx context.Context, info blobtier.ObjectInfo) (bool, error) {
	_, _, err := s.b.Get(ctx, info.Key)
	switch {
	case errors.Is(err, blobtier.ErrCorrupt):
		s.log.Warn("a damaged segment object a restore passed over, at an id this store never held, is ignored", "key", info.Key, "err", err)
		return true, nil
	case err != nil && !errors.Is(err, blobtier.ErrNotFound):
		return false, err
	}
	return false, nil
}
