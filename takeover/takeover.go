// Package takeover is the writer's side of claiming a shard at open
// (docs/FORMAT.md, "Writer fencing": who claims, and when; takeover step by
// step): it reads the disk's owner.json, decides between a same-disk
// restart (one HEAD), a takeover from an empty disk (claim, owner.json,
// re-list, hydrate, cut), the adoption of a local store without owner.json
// (claim, then the engine's start-up checks against the bucket as it is
// after the claim, then the cut with the local tip as the predecessor's
// end), and a stale owner's disk (moved aside by a server, refused by a
// one-shot command unless it was told to take over).
//
// Begin runs before the local store opens; Finish runs after the engine's
// start-up checks passed and before any append is accepted: it writes the
// cut, checks once more that no newer epoch was claimed, and records the
// cut in owner.json.
//
// Decisions where the protocol is silent: a bucket without create-if-absent
// and compare-and-swap runs unfenced at epoch 0 (one WARN), unless
// RequireFencing makes that a usage error. A claim lost to another starter
// is a *fencing.FencedError: the process stays down (not ready) and never
// claims higher by itself. The legacy adoption claims first and checks the
// store against the bucket as it is after the claim (a refused store leaves
// the claim unstarted, the directory and rw/cur untouched). After the cut,
// and before owner.json records it, the store's active segment (the
// recovered frames no sealed segment holds) jumps to the cut's
// start_segment (localseg's JumpTo, recorded in its jumps.json), so a stale
// writer's seals below the fence never take one of the new owner's keys; a
// crash in between resumes the takeover, which finds its own cut and jumps
// again (a no-op once done).
//
// The claims, start records and segment ids are read through
// bucketview.Read (bucketstate.go), the one reader of a shard's bucket state.
// The cut's chain, L, prev_end and fence come from one read after the
// claim: the cold load's (Listing hands it to the start-up checks) or, over
// an authoritative local store, the checks' own (bucketstate.go).
//
// Crash assumptions: owner.json is written durably right after the claim
// succeeds, so a crash from there on is a same-disk restart that resumes
// the takeover without a new claim; a crash before it leaves an unstarted
// claim that a later claimant supersedes (an epoch that never cut
// acknowledged nothing). Not safe for concurrent use: one Begin per shard
// directory, under the caller's ownership of it.
package takeover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// ErrStaleOwner (an invalid state): a one-shot writer found a disk whose
// epoch was superseded and was not told to take over.
var ErrStaleOwner = fmt.Errorf("%w: this disk's owner epoch was superseded", localseg.ErrInvalidState)

// Options configure Begin.
type Options struct {
	Shard  uint32
	Dir    string // the shard directory
	FS     localseg.FS
	Bucket blobtier.Bucket
	// Owner names this process in its claims (host/boot id).
	Owner string
	// RequireFencing refuses a bucket that cannot fence (usage).
	RequireFencing bool
	// OneShot marks a one-shot command (ship, gc): a stale owner's disk is
	// refused (ErrStaleOwner) unless Takeover.
	OneShot, Takeover bool
	// Hydrate cold-loads the shard from the bucket into an empty dir.
	Hydrate func(ctx context.Context, dir string) (coldload.Report, error)
	Logger  *slog.Logger
}

// Begun is a claim in progress (or a same-disk restart, or no fencing).
type Begun struct {
	o       Options
	epoch   uint64
	fencing bool
	nonce   string
	needCut bool
	// listed is the cold load's read of the bucket after the claim (a
	// hydrated takeover): the one listing its chain, fence and start-up
	// checks come from (Listing, Finish).
	listed *bucketview.View
	// recorded: owner.json names our claim; bumped: rw and cur carry our
	// epoch. An authoritative local store gets both only once the engine's
	// checks passed (a refused open changes neither the directory nor
	// rw/cur).
	recorded, bumped bool
	// Hydrated is the cold load's report when the takeover hydrated.
	Hydrated *coldload.Report
	// MovedAside is where a stale owner's directory went ("" if none).
	MovedAside string
	// Claimed reports that this open wrote a new claim.
	Claimed bool
}

// Epoch is the writer's epoch (0: unfenced, or a nil Begun).
func (b *Begun) Epoch() uint64 {
	if b == nil {
		return 0
	}
	return b.epoch
}

// Fencing reports whether the writer runs fenced (false for a nil Begun).
func (b *Begun) Fencing() bool { return b != nil && b.fencing }

// Begin decides and runs the open's claim, up to (not including) the cut,
// and hydrates a shard directory that holds no store (Hydrated).
func Begin(ctx context.Context, o Options) (*Begun, error) {
	b, err := begin(ctx, o)
	if err != nil {
		return nil, err
	}
	if b.Hydrated == nil {
		// Unfenced (or a same-disk restart over a directory without a
		// store): an empty disk is hydrated in place, as before fencing.
		is, err := localseg.IsStore(o.Dir)
		if err != nil {
			return nil, err
		}
		if !is {
			rep, err := o.Hydrate(ctx, o.Dir)
			if err != nil {
				return nil, fmt.Errorf("hydrate shard %d from the bucket: %w", o.Shard, err)
			}
			b.Hydrated = &rep
		}
	}
	return b, nil
}

func begin(ctx context.Context, o Options) (*Begun, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = localseg.OSFS{}
	}
	b := &Begun{o: o}
	if !o.Bucket.CanCAS() {
		if o.RequireFencing {
			return nil, fmt.Errorf("%w: fencing is required and this bucket has no atomic create-if-absent and compare-and-swap", affinity.ErrUsage)
		}
		o.Logger.Warn("this bucket cannot fence writers (no atomic create-if-absent and compare-and-swap): running unfenced at epoch 0; a second writer is only detected, not prevented")
		return b, nil
	}
	b.fencing = true
	owner, hasOwner, err := localseg.ReadOwner(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	if hasOwner {
		next, err := claimExists(ctx, o, owner.Epoch+1)
		if err != nil {
			return nil, err
		}
		if !next {
			b.epoch, b.nonce, b.recorded = owner.Epoch, owner.Nonce, true
			if owner.Cut {
				return b, nil // same-disk restart: one HEAD
			}
			// A takeover that crashed between its claim and its cut:
			// resume it with the same claim.
			b.needCut = true
			return b, b.recover(ctx)
		}
		c, _ := readClaim(ctx, o, owner.Epoch+1)
		if o.OneShot && !o.Takeover {
			return nil, fmt.Errorf("%w: shard %d: this disk owned epoch %d; epoch %d is claimed by %q; rerun with --takeover to move this directory aside and take the shard over",
				ErrStaleOwner, o.Shard, owner.Epoch, owner.Epoch+1, c.Owner)
		}
		to, err := localseg.MoveAsideFenced(o.FS, o.Dir, owner.Epoch)
		if err != nil {
			return nil, err
		}
		b.MovedAside = to
		o.Logger.Warn("this disk's owner epoch was superseded: its directory is moved aside (quarantined) and the shard taken over from the bucket",
			"epoch", owner.Epoch, "claimant", c.Owner, "moved_to", to)
	}
	if err := b.claim(ctx); err != nil {
		return nil, err
	}
	return b, b.recover(ctx)
}

// claim is steps 1–4: list the start records and the claims, re-create
// vanished claims, claim the next epoch (a lost response to our own claim
// is recognised by its nonce), record owner.json, and list again.
func (b *Begun) claim(ctx context.Context) error {
	o := b.o
	m, have, err := listClaims(ctx, o, true)
	if err != nil {
		return err
	}
	for e := uint64(1); e <= m; e++ {
		if !have[e] {
			// A stale writer's HEAD must never go blind.
			if err := putClaim(ctx, o, fencing.Claim{Epoch: e, Shard: o.Shard, Owner: "(re-created)", Nonce: fencing.NewNonce()}); err != nil && !errors.Is(err, blobtier.ErrConflict) {
				return fmt.Errorf("re-create the vanished claim of epoch %d: %w", e, err)
			}
		}
	}
	c := fencing.Claim{Epoch: m + 1, Shard: o.Shard, Owner: o.Owner, Nonce: fencing.NewNonce()}
	if err := putClaim(ctx, o, c); err != nil {
		if !errors.Is(err, blobtier.ErrConflict) {
			return fmt.Errorf("claim epoch %d: %w", c.Epoch, err)
		}
		got, gerr := readClaim(ctx, o, c.Epoch)
		if gerr != nil || got.Nonce != c.Nonce {
			return &fencing.FencedError{Shard: o.Shard, Epoch: c.Epoch, Claimant: c.Epoch,
				Detail: fmt.Sprintf("fencing_claim_lost: another starter (%q) claimed epoch %d first; this process stays a non-owner and does not claim higher", got.Owner, c.Epoch)}
		}
	}
	b.epoch, b.nonce, b.needCut, b.Claimed = c.Epoch, c.Nonce, true, true
	isStore, err := localseg.IsStore(o.Dir)
	if err != nil || isStore {
		return err // recorded in Finish, after the engine's checks
	}
	if err := localseg.WriteOwner(o.FS, o.Dir, localseg.Owner{Epoch: c.Epoch, Nonce: c.Nonce}); err != nil {
		return err
	}
	b.recorded = true
	return nil
}

// recover is steps 4 and 6 up to the engine's checks: superseded already →
// fenced; the start records are read from a listing after the claim; an
// empty disk is hydrated (into a staging directory that then replaces the
// shard directory, which held only owner.json).
func (b *Begun) recover(ctx context.Context) error {
	o := b.o
	m, _, err := listClaims(ctx, o, false)
	if err != nil {
		return err
	}
	if m > b.epoch {
		return &fencing.FencedError{Shard: o.Shard, Epoch: b.epoch, Claimant: m, Detail: "superseded during the takeover"}
	}
	isStore, err := localseg.IsStore(o.Dir)
	if err != nil {
		return err
	}
	if !isStore {
		if err := b.bumpAll(ctx); err != nil {
			return err
		}
	}
	if isStore {
		// An authoritative local store: the engine's checks run next, on
		// their own read of the bucket after the claim, which the cut then
		// takes its chain and its fence from (Finish).
		return nil
	}
	staged := localseg.TakeoverStagingDir(o.Dir)
	if err := localseg.RemoveStaged(o.FS, staged); err != nil {
		return err
	}
	rep, err := o.Hydrate(ctx, staged)
	if err != nil {
		return fmt.Errorf("hydrate shard %d from the bucket: %w", o.Shard, err)
	}
	b.Hydrated, b.listed = &rep, rep.Listing
	if err := localseg.WriteOwner(o.FS, staged, localseg.Owner{Epoch: b.epoch, Nonce: b.nonce}); err != nil {
		return err
	}
	return localseg.ReplaceWithStaged(o.FS, staged, o.Dir)
}

// Finish is steps 7–9, after the local store opened and the engine's
// start-up checks passed against the bucket as it is after the claim: the
// cut (prev_end = the local tip), a HEAD of the next claim, and owner.json
// recording the cut, after the store's jump to the cut's start_segment.
// Nothing to do on a same-disk restart or unfenced. checked is the read of
// the bucket the start-up checks judged (shipper's Listing), taken after
// the claim: with an authoritative local store it is the one listing the
// chain and the fence come from (a hydrated takeover takes its cold
// load's). nil: Finish reads the start records and segments itself.
func (b *Begun) Finish(ctx context.Context, st *localseg.Store, checked *bucketview.View) error {
	if b == nil {
		return nil
	}
	defer b.dropListing()
	if !b.fencing || !b.needCut {
		return nil
	}
	o := b.o
	snap, err := st.Snapshot()
	if err != nil {
		return err
	}
	if err := b.bumpAll(ctx); err != nil {
		return err
	}
	if !b.recorded {
		if err := localseg.WriteOwner(o.FS, o.Dir, localseg.Owner{Epoch: b.epoch, Nonce: b.nonce}); err != nil {
			return err
		}
		b.recorded = true
	}
	listing, err := b.postClaimListing(ctx, checked)
	if err != nil {
		return err
	}
	lin, err := listing.Lineage()
	if err != nil {
		return err
	}
	if n := lin.Newest(); n >= b.epoch {
		if r, ok := lin.Record(b.epoch); ok && n == b.epoch {
			// Our own cut is in: a crash after it, before owner.json said so.
			return b.finished(ctx, st, r)
		}
		return &fencing.FencedError{Shard: o.Shard, Epoch: b.epoch, Claimant: n, Detail: "a newer cut exists"}
	}
	// The fence lies above every object id listed and every sealed local
	// segment (an authoritative store's seals not uploaded yet are shipped
	// at their ids, under our epoch), and at or above every start segment:
	// a start segment no object holds yet is the predecessor's unsealed
	// active segment, which a stale writer may still seal; inside our gap,
	// readers skip it (its valid frames are the ones recovered into our
	// start segment, so a copy below the fence would duplicate them). The
	// active segment is not counted: it jumps to start_segment below. The
	// listing is the one the recovered frames come from (a seal landing
	// after it is in the gap).
	var highest uint64
	for _, s := range snap.Segments {
		if s.Sealed {
			highest = max(highest, s.ID)
		}
	}
	for _, info := range listing.SegmentObjects {
		highest = max(highest, info.Parsed.Segment)
	}
	fence := max(highest+1, lin.HighestStartSegment())
	prevEnd := snap.Tip
	rec := fencing.NewStartRecord(b.epoch, lin.Newest(), prevEnd, fence-1, min(snap.ReclaimedSeq, prevEnd))
	data, err := rec.Encode()
	if err != nil {
		return err
	}
	key := blobtier.StartKey(o.Shard, b.epoch)
	if err := putOnce(ctx, o.Bucket, key, data, b.epoch); err != nil {
		if !errors.Is(err, blobtier.ErrConflict) {
			return fmt.Errorf("write the cut %s: %w", key, err)
		}
		got, _, gerr := o.Bucket.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("write the cut %s: %w; read it: %v", key, err, gerr)
		}
		if r, derr := fencing.DecodeStartRecord(got); derr != nil || r != rec {
			return fmt.Errorf("%w: the cut %s exists and is not ours", localseg.ErrInvalidState, key)
		}
	}
	return b.finished(ctx, st, rec)
}

func (b *Begun) finished(ctx context.Context, st *localseg.Store, rec fencing.StartRecord) error {
	o := b.o
	next, err := claimExists(ctx, o, b.epoch+1)
	if err != nil {
		return err
	}
	if next {
		return &fencing.FencedError{Shard: o.Shard, Epoch: b.epoch, Claimant: b.epoch + 1, Detail: "superseded right after the cut"}
	}
	if err := st.JumpTo(rec.StartSegment); err != nil {
		return fmt.Errorf("continue at the cut's start segment %d: %w", rec.StartSegment, err)
	}
	if err := localseg.WriteOwner(o.FS, o.Dir, localseg.Owner{Epoch: b.epoch, Nonce: b.nonce, Cut: true}); err != nil {
		return err
	}
	b.needCut = false
	o.Logger.Info("took the shard over", "epoch", b.epoch, "prev_epoch", rec.PrevEpoch, "prev_end_seq", rec.PrevEndSeq,
		"fence_segment", rec.FenceSegment, "start_segment", rec.StartSegment)
	return nil
}

// bumpAll is step 5: from here on every compare-and-swap of an older epoch
// on the watermark or the cursor object fails.
func (b *Begun) bumpAll(ctx context.Context) error {
	if b.bumped {
		return nil
	}
	if err := b.bump(ctx, blobtier.WatermarkKey(b.o.Shard), false); err != nil {
		return err
	}
	if err := b.bump(ctx, blobtier.CursorKey(b.o.Shard), false); err != nil {
		return err
	}
	b.bumped = true
	return nil
}

// bump rewrites a mutable object with the same fields and our epoch, by
// compare-and-swap, only while its epoch is lower (a higher one: we are
// superseded). An absent object is left absent (create is false for both:
// a watermark at zero would make an empty shard's bucket non-empty, and an
// empty cursor object would read as "every consumer deleted"); a writer
// creates either only after a HEAD of the next claim found none (the
// shipper's epoch guard). A damaged object is left to the owner's repair,
// which writes it through the same epoch guard.
func (b *Begun) bump(ctx context.Context, key string, create bool) error {
	o := b.o
	for try := 0; try < 8; try++ {
		data, ver, err := o.Bucket.GetVersioned(ctx, key)
		switch {
		case errors.Is(err, blobtier.ErrNotFound):
			if !create {
				return nil
			}
			data = watermark.Mark{V: 1}.Encode()
		case errors.Is(err, blobtier.ErrCorrupt):
			return nil
		case err != nil:
			return fmt.Errorf("read %s to bump its epoch: %w", key, err)
		}
		stored, err := fencing.StoredEpoch(data)
		if err != nil {
			return nil // does not decode: the owner's repair rewrites it
		}
		switch {
		case stored > b.epoch:
			return &fencing.FencedError{Shard: o.Shard, Epoch: b.epoch, Claimant: stored, Detail: key + " carries a newer epoch"}
		case stored == b.epoch:
			return nil // a resumed takeover bumped it already
		}
		body, err := fencing.WithEpoch(data, b.epoch)
		if err != nil {
			return err
		}
		err = o.Bucket.CompareAndSwap(ctx, key, body, ver)
		if err == nil || !errors.Is(err, blobtier.ErrPrecondition) {
			if err != nil {
				return fmt.Errorf("bump the epoch of %s: %w", key, err)
			}
			return nil
		}
	}
	return fmt.Errorf("bump the epoch of %s: lost every compare-and-swap race", key)
}

func claimExists(ctx context.Context, o Options, epoch uint64) (bool, error) {
	_, err := o.Bucket.Stat(ctx, blobtier.ClaimKey(o.Shard, epoch))
	switch {
	case errors.Is(err, blobtier.ErrNotFound):
		return false, nil
	case err == nil || errors.Is(err, blobtier.ErrCorrupt):
		return true, nil
	}
	return false, fmt.Errorf("check the claim of epoch %d: %w", epoch, err)
}

func readClaim(ctx context.Context, o Options, epoch uint64) (fencing.Claim, error) {
	data, _, err := o.Bucket.Get(ctx, blobtier.ClaimKey(o.Shard, epoch))
	if err != nil {
		return fencing.Claim{}, err
	}
	return fencing.DecodeClaim(data)
}

func putClaim(ctx context.Context, o Options, c fencing.Claim) error {
	data, err := c.Encode()
	if err != nil {
		return err
	}
	return putOnce(ctx, o.Bucket, blobtier.ClaimKey(o.Shard, c.Epoch), data, c.Epoch)
}

// putOnce creates key, retrying a failed request a few times: a failure
// may be a lost response to a create that landed, which the retry's 412
// (ErrConflict) and the caller's read of the object then recognise.
func putOnce(ctx context.Context, b blobtier.Bucket, key string, data []byte, epoch uint64) error {
	var err error
	for try := 0; try < 3; try++ {
		if err = b.PutIfAbsent(ctx, key, data, epoch); err == nil || errors.Is(err, blobtier.ErrConflict) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// DefaultOwner names this process in a claim: host and process id.
func DefaultOwner() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}
