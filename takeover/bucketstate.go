package takeover

import (
	"context"
	"fmt"

	"github.com/bucketlog/bucketlog/bucketview"
)

// The takeover reads the shard's claims and start records through
// bucketview.Read, the one function that reads a shard's bucket state (and
// holds the one rule for which keys are understood).

// listClaims lists the shard's claims and returns the highest claimed
// epoch (0: none) and every claimed epoch. With starts (step 1) it lists
// the start records first (bucketview's order) and a start record counts
// as its epoch's claim: when the claim's key has vanished, the record
// still shows the epoch was taken, and claiming it again would cut a
// second time at an epoch that already has a cut. Step 4's re-listing
// needs only the claims (a start record above ours has its claim).
func listClaims(ctx context.Context, o Options, starts bool) (uint64, map[uint64]bool, error) {
	parts := bucketview.Claims
	if starts {
		parts = bucketview.Fencing
	}
	v, err := bucketview.Read(ctx, o.Bucket, o.Shard, bucketview.Options{Parts: parts, ListStartsOnly: true})
	if err != nil {
		return 0, nil, err
	}
	have := make(map[uint64]bool, len(v.ClaimObjects))
	for _, c := range v.ClaimObjects {
		have[c.Info.Parsed.Epoch] = true
	}
	return max(v.HighestClaim, v.HighestStart), have, nil
}

// Listing is the bucket state a hydrated takeover read after its claim
// (nil otherwise): the start-up checks judge the hydrated store against it
// rather than listing again.
func (b *Begun) Listing() *bucketview.View {
	if b == nil || !b.fencing {
		return nil
	}
	return b.listed
}

// postClaimListing is the one listing taken after the claim that the cut's
// chain, L and fence come from: the cold load's, else the start-up checks'
// (checked), else (neither given) a read of the segments and start records
// now. Never one from before the claim: a cut written in between would be
// chained past. No second listing either: a cut written since is a stalled
// lower claimant's, whose own HEAD of the next claim finds ours (it
// acknowledged nothing, and the chain from our cut skips it), or a higher
// claimant's, whose claim our HEAD after the cut finds.
func (b *Begun) postClaimListing(ctx context.Context, checked *bucketview.View) (*bucketview.View, error) {
	listing := b.listed
	if listing == nil {
		listing = checked
	}
	if listing == nil {
		v, err := bucketview.Read(ctx, b.o.Bucket, b.o.Shard, bucketview.Options{Parts: bucketview.Segments | bucketview.StartRecords})
		if err != nil {
			return nil, err
		}
		listing = &v
	}
	if want := bucketview.Segments | bucketview.StartRecords; listing.Parts&want != want {
		return nil, fmt.Errorf("takeover: shard %d: the listing after the claim lacks the segments or the start records", b.o.Shard)
	}
	return listing, nil
}

// dropListing forgets the listing once the open is done with it (it is
// proportional to the shard's objects; the open's report keeps the cold
// load's report).
func (b *Begun) dropListing() {
	if b.listed = nil; b.Hydrated != nil {
		b.Hydrated.Listing = nil
	}
}
