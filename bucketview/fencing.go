package bucketview

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/fencing"
)

// The writer-fencing parts (docs/FORMAT.md, "Writer fencing"): the start
// records (the cuts) and the claims of a shard.
//
// Order (FencingOrder, and DefaultOrder extended by it): the start records
// are listed after the segment and tail listings, and the claims after the
// start records. An owner writes its objects only after its cut, and its
// cut only after its claim, so everything a listing of data shows that
// needs a cut has that cut in a later listing of start records, and every
// start record has its claim in a later listing of claims. Read the other
// way round, a cut written in between would be missed while the new
// epoch's objects were seen (they would read as off the chain, and the
// zombie's frames beyond the cut as valid). Read this way, a cut written
// after the data listings only ends the predecessor at or above what those
// listings hold: the view is a prefix of the valid history, never a
// different one.
const (
	// StartRecords lists `eps.<shard>.` and reads every start record
	// (one listing, one read per record: one record per takeover).
	StartRecords Parts = 1 << (iota + 4)
	// Claims lists `ep.<shard>.` (one listing; the bodies only with
	// Options.ReadClaims).
	Claims

	// Indexes lists `idx.<shard>.`, the derived index objects of sealed
	// segments (docs/FORMAT.md §6.10): never needed for correctness, so
	// read only by the paths that clean or check them (GC's sweep,
	// verify), never by a start or a restore.
	Indexes

	// Fencing is both fencing parts.
	Fencing = StartRecords | Claims
)

// FencingOrder is the order of every part, the fencing parts last (see
// above). DefaultOrder is the same without them, so a caller that asks
// for no fencing part reads exactly what it read before.
var FencingOrder = []Parts{Watermark, Cursor, Segments, Tails, StartRecords, Claims, Indexes}

// StartObject is one listed start record and what it holds.
type StartObject struct {
	Info   blobtier.ObjectInfo
	Record fencing.StartRecord
	// Err is set when the object could not be decoded or disagrees with its
	// key (then Record is zero): the chain cannot be built past it.
	Err error
}

// ClaimObject is one listed claim; Claim is filled only with
// Options.ReadClaims (Err when its body does not decode).
type ClaimObject struct {
	Info  blobtier.ObjectInfo
	Claim fencing.Claim
	Read  bool
	Err   error
}

// fencingState is the part of View the fencing parts fill.
type fencingState struct {
	// Starts are the shard's start records in key (epoch) order.
	Starts []StartObject
	// ClaimObjects are the shard's claims in key (epoch) order.
	ClaimObjects []ClaimObject
	// HighestClaim is the highest claimed epoch (0 when none).
	HighestClaim uint64
	// HighestStart is the highest epoch with a start record (0 when none).
	HighestStart uint64

	lineage    fencing.Lineage
	lineageErr error
}

// Lineage returns the chain the start records form (fencing.Chain): the
// lineage of epoch 0 when there are none. It is an error when the view did
// not read StartRecords, or when a record is damaged, contradicts itself
// or the chain is broken (fencing.ErrBadRecord, fencing.ErrBrokenChain):
// a reader refuses then rather than guess which history was acknowledged.
func (v *View) Lineage() (fencing.Lineage, error) {
	if v.Parts&StartRecords == 0 {
		return fencing.Lineage{}, fmt.Errorf("bucketview: shard %d: the start records were not read", v.Shard)
	}
	return v.lineage, v.lineageErr
}

// Owner returns the claim of the highest epoch, when ReadClaims read it.
func (v *View) Owner() (fencing.Claim, bool) {
	for i := len(v.ClaimObjects) - 1; i >= 0; i-- {
		c := v.ClaimObjects[i]
		if c.Info.Parsed.Epoch == v.HighestClaim {
			return c.Claim, c.Read && c.Err == nil
		}
	}
	return fencing.Claim{}, false
}

// readStarts lists and reads the start records and builds the lineage.
func (v *View) readStarts(ctx context.Context, b Lister, rb Bucket, listOnly bool) error {
	listed, err := v.list(ctx, b, blobtier.KindStart)
	if err != nil {
		return err
	}
	for _, info := range listed {
		v.HighestStart = max(v.HighestStart, info.Parsed.Epoch)
	}
	if listOnly {
		v.lineageErr = fmt.Errorf("bucketview: shard %d: the start records were listed, not read", v.Shard)
		return nil
	}
	var recs []fencing.StartRecord
	var bad []error
	for _, info := range listed {
		so := StartObject{Info: info}
		data, _, err := rb.GetVersioned(ctx, info.Key)
		switch {
		case errors.Is(err, blobtier.ErrCorrupt):
			so.Err = err
		case err != nil:
			// Vanished or unreadable: records are never deleted, so this is
			// the bucket failing (or an edited bucket); either way no chain.
			return fmt.Errorf("read start record %s: %w", info.Key, err)
		default:
			so.Record, so.Err = fencing.DecodeStartRecord(data)
			if so.Err == nil && so.Record.Epoch != info.Parsed.Epoch {
				so.Err = fmt.Errorf("%w: %s holds the start record of epoch %d", fencing.ErrBadRecord, info.Key, so.Record.Epoch)
			}
		}
		if so.Err != nil {
			so.Record = fencing.StartRecord{}
			bad = append(bad, fmt.Errorf("start record %s: %w", info.Key, so.Err))
		} else {
			recs = append(recs, so.Record)
		}
		v.Starts = append(v.Starts, so)
	}
	if len(bad) > 0 {
		v.lineageErr = fmt.Errorf("bucketview: shard %d: %w", v.Shard, errors.Join(bad...))
		return nil
	}
	v.lineage, err = fencing.Chain(recs)
	if err != nil {
		v.lineageErr = fmt.Errorf("bucketview: shard %d: %w", v.Shard, err)
	}
	return nil
}

// readClaims lists the claims (and reads them when asked).
func (v *View) readClaims(ctx context.Context, b Lister, rb Bucket, read bool) error {
	listed, err := v.list(ctx, b, blobtier.KindClaim)
	if err != nil {
		return err
	}
	for _, info := range listed {
		co := ClaimObject{Info: info}
		v.HighestClaim = max(v.HighestClaim, info.Parsed.Epoch)
		if read {
			data, _, err := rb.GetVersioned(ctx, info.Key)
			switch {
			case errors.Is(err, blobtier.ErrCorrupt):
				co.Err = err
			case err != nil:
				return fmt.Errorf("read claim %s: %w", info.Key, err)
			default:
				co.Claim, co.Err = fencing.DecodeClaim(data)
				if co.Err == nil && co.Claim.Epoch != info.Parsed.Epoch {
					co.Err = fmt.Errorf("%w: %s holds the claim of epoch %d", fencing.ErrBadRecord, info.Key, co.Claim.Epoch)
				}
			}
			co.Read = true
		}
		v.ClaimObjects = append(v.ClaimObjects, co)
	}
	slices.SortFunc(v.ClaimObjects, func(a, b ClaimObject) int { return compareEpoch(a.Info, b.Info) })
	return nil
}

func compareEpoch(a, b blobtier.ObjectInfo) int {
	switch {
	case a.Parsed.Epoch < b.Parsed.Epoch:
		return -1
	case a.Parsed.Epoch > b.Parsed.Epoch:
		return 1
	}
	return 0
}
