package shipper

// The epoch guard of the mutable objects (docs/FORMAT.md, "Writer fencing":
// GC and the watermark): every compare-and-swap this writer makes on `rw`
// or `cur` — GC's watermark, its repair, the cursor object — carries its
// epoch, and is refused (fenced) when the object it replaces holds a
// higher one. A takeover bumps both objects' epoch first, so from then on
// a stale writer's GC or cursor write fails instead of moving the
// watermark with its own boundaries or replacing the consumers.
//
// The guard remembers the epoch of the last version it read of each key:
// the compare-and-swap is conditional on that very version, so the epoch
// it checks is the one it replaces. A version whose epoch cannot be read
// (damaged at rest: the owner's repair replaces it) may be any epoch's, so
// its replacement first HEADs the next claim, as a create does.

import (
	"context"
	"fmt"
	"sync"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/fencing"
)

type epochGuard struct {
	blobtier.Bucket
	shard  uint32
	epoch  uint64
	fenced func(claimant uint64, detail string) error
	check  func(ctx context.Context) error // HEAD of the next claim

	mu   sync.Mutex
	seen map[string]seenVersion // key → the last version read and its epoch
}

type seenVersion struct {
	ver     blobtier.Version
	epoch   uint64
	unknown bool // the body did not yield an epoch (damaged)
}

func newEpochGuard(b blobtier.Bucket, shard uint32, epoch uint64, fenced func(uint64, string) error, check func(context.Context) error) *epochGuard {
	return &epochGuard{Bucket: b, shard: shard, epoch: epoch, fenced: fenced, check: check, seen: map[string]seenVersion{}}
}

func mutableKey(shard uint32, key string) bool {
	return key == blobtier.WatermarkKey(shard) || key == blobtier.CursorKey(shard)
}

func (g *epochGuard) GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error) {
	data, ver, err := g.Bucket.GetVersioned(ctx, key)
	if mutableKey(g.shard, key) && ver != "" {
		var e uint64
		eerr := err
		if err == nil {
			e, eerr = fencing.StoredEpoch(data) // a body that does not decode is the caller's to report
		}
		g.mu.Lock()
		g.seen[key] = seenVersion{ver: ver, epoch: e, unknown: eerr != nil}
		g.mu.Unlock()
	}
	return data, ver, err
}

func (g *epochGuard) CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error {
	if !mutableKey(g.shard, key) {
		return g.Bucket.CompareAndSwap(ctx, key, data, expect)
	}
	if expect == "" {
		// A create carries no stored epoch to compare: a takeover leaves an
		// absent object absent, so the create checks the next claim first.
		if err := g.check(ctx); err != nil {
			return err
		}
	} else {
		g.mu.Lock()
		s, ok := g.seen[key]
		g.mu.Unlock()
		if !ok || s.ver != expect {
			// Not read through the guard: read it now; a newer version
			// means the caller's read is stale (it reads again).
			if _, ver, err := g.GetVersioned(ctx, key); err != nil && ver == "" {
				return err
			} else if ver != expect {
				return &blobtier.ObjectError{Op: blobtier.OpCAS, Key: key, Err: fmt.Errorf("%w: changed since it was read", blobtier.ErrPrecondition)}
			}
			g.mu.Lock()
			s = g.seen[key]
			g.mu.Unlock()
		}
		if s.epoch > g.epoch {
			return g.fenced(s.epoch, fmt.Sprintf("%s carries epoch %d", key, s.epoch))
		}
		if s.unknown {
			if err := g.check(ctx); err != nil {
				return err
			}
		}
	}
	body, err := fencing.WithEpoch(data, g.epoch)
	if err != nil {
		return fmt.Errorf("shipper: %s: %w", key, err)
	}
	return g.Bucket.CompareAndSwap(ctx, key, body, expect)
}

// Delete refuses (fenced) to delete a data object once this writer has read
// a reclaim watermark of a higher epoch: GC deletes only at or below the
// committed watermark, and a watermark committed by a newer owner is that
// owner's to apply (it reclaims its local store before its bucket deletes;
// a stale writer's deletes under it could take segments the owner still
// reads from the bucket).
func (g *epochGuard) Delete(ctx context.Context, key string) error {
	if !mutableKey(g.shard, key) {
		g.mu.Lock()
		s, ok := g.seen[blobtier.WatermarkKey(g.shard)]
		g.mu.Unlock()
		if ok && s.epoch > g.epoch {
			return g.fenced(s.epoch, fmt.Sprintf("%s carries epoch %d", blobtier.WatermarkKey(g.shard), s.epoch))
		}
	}
	return g.Bucket.Delete(ctx, key)
}
