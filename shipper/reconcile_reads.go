package shipper

import (
	"context"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
)

// The reads of one start-up reconcile, each object read at most once
// (docs/FORMAT.md, "Writer fencing", request budget): the lineage needs an
// object's epoch, which only its metadata carries, and the checks need the
// same metadata (a segment) or the same bytes (the newest tail object). A
// tail object's epoch is taken from the GET the checks read it back with
// (one request, not a HEAD and a GET); a segment's from the HEAD that
// checks its metadata. A reconcile that fails is retried with new reads.
type openReads struct {
	b     blobtier.Bucket
	stats map[string]statResult
	gets  map[string]getResult
}

type statResult struct {
	info blobtier.ObjectInfo
	err  error
}

type getResult struct {
	data []byte
	meta blobtier.Meta
	err  error
}

func newOpenReads(b blobtier.Bucket) *openReads {
	return &openReads{b: b, stats: map[string]statResult{}, gets: map[string]getResult{}}
}

// stat is the object's HEAD, or the metadata of its intact GET.
func (r *openReads) stat(ctx context.Context, key string) (blobtier.ObjectInfo, error) {
	if res, ok := r.stats[key]; ok {
		return res.info, res.err
	}
	if g, ok := r.gets[key]; ok && g.err == nil {
		return blobtier.ObjectInfo{Key: key, Size: int64(len(g.data)), Meta: g.meta}, nil
	}
	info, err := r.b.Stat(ctx, key)
	r.stats[key] = statResult{info, err}
	return info, err
}

// get is the object's GET, verified against its metadata.
func (r *openReads) get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	if g, ok := r.gets[key]; ok {
		return g.data, g.meta, g.err
	}
	data, m, err := r.b.Get(ctx, key)
	r.gets[key] = getResult{data, m, err}
	return data, m, err
}

// listing is the view reconcile judges: the post-claim listing the
// takeover's cold load read (Options.Listed, taken over by the first
// attempt only, so a retry after a failed request reads the bucket again),
// or a read of its own. It runs check over each part in order, as
// bucketview.Read does.
func (s *Shipper) listing(ctx context.Context, o bucketview.Options) (bucketview.View, error) {
	v := s.o.Listed
	s.o.Listed = nil
	if v != nil && v.Parts&o.Parts == o.Parts {
		view := *v
		for _, part := range o.Order {
			if o.Parts&part == 0 {
				continue
			}
			if err := o.Check(&view, part); err != nil {
				return view, err
			}
		}
		return view, nil
	}
	return bucketview.Read(ctx, s.b, s.shard, o)
}

// Listing is the bucket state the start-up checks judged: for a takeover
// over an authoritative local store, the listing after its claim from
// which its cut takes the chain and the fence (docs/FORMAT.md, "Writer
// fencing", takeover step 6). Read-only. It is handed over once: the
// shipper does not keep it (it is proportional to the shard's objects), so
// a second call, or one before New succeeded, returns nil.
func (s *Shipper) Listing() *bucketview.View {
	if s == nil {
		return nil
	}
	v := s.listed
	s.listed = nil
	return v
}
