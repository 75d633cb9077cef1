package coldload

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/localseg"
)

// IndexReport is what Verify found of a shard's index objects
// (docs/FORMAT.md §6.10). They are derived and never needed for
// correctness, so nothing here is a problem: an unusable one costs its
// readers a fetch of the segment, an orphan costs storage until GC's next
// sweep.
type IndexReport struct {
	// Objects are the index objects listed above the watermark.
	Objects int `json:"index_objects"`
	// Usable of them describe their segment objects exactly (a reader
	// uses them).
	Usable int `json:"index_objects_usable"`
	// Unusable are the keys of those a reader ignores, each with why: it
	// fails verification or decoding, or describes other bytes than its
	// segment object (a stale writer's, or written for a segment that was
	// put again).
	Unusable []string `json:"index_objects_unusable,omitempty"`
	// Orphans are index objects at or below the watermark or with no
	// segment object: GC deletes them.
	Orphans int `json:"index_objects_orphaned"`
}

// verifyIndexes checks each index object against the segment object of its
// id, as Verify read it (its length and xxh64): the rule a reader applies
// against the evicted segment's record. It lists the index objects once
// and reads each one above the watermark whose segment read intact.
func (h *run) verifyIndexes(ctx context.Context, shard uint32, items []*segItem) (IndexReport, error) {
	var rep IndexReport
	v, err := bucketview.Read(ctx, h.r, shard, bucketview.Options{Parts: bucketview.Indexes})
	if err != nil {
		return rep, err
	}
	segs := make(map[uint64]*segItem, len(items))
	for _, it := range items {
		segs[it.id] = it
	}
	for _, info := range v.IndexObjects {
		id := info.Parsed.Segment
		it := segs[id]
		if id <= h.p.mark.Segment || it == nil {
			rep.Orphans++
			continue
		}
		rep.Objects++
		if !it.read {
			continue // the segment itself is reported; nothing to hold the index against
		}
		data, _, err := h.r.Get(ctx, info.Key)
		switch {
		case err != nil && !errors.Is(err, blobtier.ErrCorrupt):
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			h.fail(&ObjectError{Key: info.Key, Err: err}) // a read that failed: verify could not check it
			continue
		case err == nil:
			h.read(len(data), -1)
			err = localseg.CheckIndexObject(data, id, it.size, it.digest)
		}
		if err != nil {
			rep.Unusable = append(rep.Unusable, fmt.Sprintf("%s: %v", info.Key, err))
			continue
		}
		rep.Usable++
	}
	return rep, nil
}
