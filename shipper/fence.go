package shipper

// Writer fencing, the writer's checks (docs/FORMAT.md, "Writer fencing"):
// every object this shipper writes carries its epoch; a tail put is
// committed only after a HEAD of the next epoch's claim, sent after the put
// completed, found none; a synchronous append is acknowledged only once such
// a HEAD certified a shipped position covering it; and a claim found there
// (or an occupant of a newer epoch under one of our keys) fences the writer
// for good: every write is refused, ticks, uploads, GC and cursor shipping
// stop, and the process never claims again by itself.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// ErrFenced is the class of a fenced writer's refusals (fencing.ErrFenced).
var ErrFenced = fencing.ErrFenced

// fenced reports whether the writer checks epochs at all (a bucket with
// create-if-absent and compare-and-swap, Options.Fencing).
func (s *Shipper) fencingOn() bool { return s.o.Fencing }

// Epoch is the writer's ownership epoch (0: unfenced).
func (s *Shipper) Epoch() uint64 { return s.o.Epoch }

// checkFence HEADs the claim of the epoch above ours: absent → nil; present
// → the writer is fenced (a *fencing.FencedError); any other error is
// returned as it is (the caller fails the pass; nothing is committed).
func (s *Shipper) checkFence(ctx context.Context) error {
	if !s.fencingOn() {
		return nil
	}
	next := s.o.Epoch + 1
	sent := s.o.Now()
	_, err := s.b.Stat(ctx, blobtier.ClaimKey(s.shard, next))
	switch {
	case errors.Is(err, blobtier.ErrNotFound):
		s.noteGoodCheck(sent)
		return nil
	case err == nil || errors.Is(err, blobtier.ErrCorrupt):
		return s.markFenced(next, "claim "+blobtier.ClaimKey(s.shard, next)+" exists")
	}
	return fmt.Errorf("check the claim of epoch %d: %w", next, err)
}

// certify records that everything through seq was in the bucket before a
// HEAD that found no newer claim: synchronous appends through seq may be
// acknowledged.
func (s *Shipper) certify(seq uint64) {
	s.mu.Lock()
	s.certified = max(s.certified, seq)
	s.mu.Unlock()
}

// confirmed is the highest sequence a synchronous append may be
// acknowledged at: the shipped position, and with fencing only as far as a
// fence check certified it.
func (s *Shipper) confirmed() uint64 {
	shipped := s.repl.ShippedThrough()
	if !s.fencingOn() {
		return shipped
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(shipped, s.certified)
}

// certifyShipped HEADs once to certify a shipped position that moved
// without a tail put of ours (a segment upload), when a synchronous append
// waits for it.
func (s *Shipper) certifyShipped(ctx context.Context) error {
	if !s.fencingOn() || s.waiters.Load() == 0 {
		return nil
	}
	shipped := s.repl.ShippedThrough()
	s.mu.Lock()
	due := s.certified < shipped
	s.mu.Unlock()
	if !due {
		return nil
	}
	if err := s.checkFence(ctx); err != nil {
		return err
	}
	s.certify(shipped)
	s.notifyShipped()
	return nil
}

// markFenced puts the shipper in the fenced state (once) and returns why.
// Its log line names the records acknowledged locally beyond the shipped
// end (bucketlog_fenced_unpublished_records): their sequence range and the
// first and last execution ids, the operator's lead for quarantine
// reappend.
func (s *Shipper) markFenced(claimant uint64, detail string) error {
	var shipped uint64
	if s.repl != nil { // nil while New reconciles
		shipped = s.repl.ShippedThrough()
	}
	tip := s.store.Tip()
	s.mu.Lock()
	if fe := (*fencing.FencedError)(nil); errors.As(s.stopErr, &fe) {
		s.mu.Unlock()
		return s.stopErr
	}
	s.stopErr = &fencing.FencedError{Shard: s.shard, Epoch: s.o.Epoch, Claimant: claimant, Detail: detail}
	err := s.stopErr
	s.mu.Unlock()
	s.m.Fenced.Set(1)
	unpublished := uint64(0)
	if tip > shipped {
		unpublished = tip - shipped
	}
	s.m.FencedUnpublished.Set(float64(unpublished))
	args := []any{"epoch", s.o.Epoch, "claimant_epoch", claimant, "detail", detail, "shipped_through", shipped}
	if unpublished > 0 {
		args = append(args, s.unpublishedAttrs(shipped, tip)...)
	}
	s.log.Error("fenced: a newer owner claimed the shard; every write is refused, shipping, GC and cursor shipping stopped, the directory is kept", args...)
	return err
}

// recordReader is the part of the local store that reads one event
// (localseg.Store.Get); a store without it logs no execution ids.
type recordReader interface {
	Get(seq uint64) (localseg.Record, error)
}

// unpublishedAttrs name the records after shipped through tip: their
// sequence range and first and last execution ids.
func (s *Shipper) unpublishedAttrs(shipped, tip uint64) []any {
	args := []any{"unpublished_first_seq", shipped + 1}
	args = append(args, s.executionID("unpublished_first_execution_id", shipped+1)...)
	args = append(args, "unpublished_last_seq", tip)
	return append(args, s.executionID("unpublished_last_execution_id", tip)...)
}

// executionID is the log attribute key=the execution id of the event seq
// (none when the store cannot read it).
func (s *Shipper) executionID(key string, seq uint64) []any {
	rr, ok := s.store.(recordReader)
	if !ok {
		return nil
	}
	r, err := rr.Get(seq)
	if err != nil {
		return nil
	}
	return []any{key, r.ExecutionID}
}

// lateAppend notes an append written through seq after the writer was
// fenced (it passed the refusal check while the fence was being found): one
// more record the directory holds beyond the shipped end, counted and
// logged like those markFenced named.
func (s *Shipper) lateAppend(seq uint64) {
	shipped, tip := s.repl.ShippedThrough(), s.store.Tip()
	if seq <= shipped || tip <= shipped {
		return
	}
	s.m.FencedUnpublished.Set(float64(tip - shipped))
	args := append([]any{"epoch", s.o.Epoch, "sequence", seq}, s.unpublishedAttrs(shipped, tip)...)
	s.log.Warn("fenced: an append in flight when the fence was found was written locally; it stays in the directory (quarantine)", args...)
}

// Fenced is the fenced state's error (nil while this writer owns the shard).
func (s *Shipper) Fenced() error {
	err := s.stopped()
	if errors.Is(err, ErrFenced) {
		return err
	}
	return nil
}

// conflict classifies a 412 on one of our write-once keys by its occupant
// (the upload rule of writer fencing): an occupant of a newer epoch fences
// us; one of our own epoch with other bytes is a second writer with our
// epoch (stop); an occupant of an older epoch holding exactly our bytes
// whose frames the lineage keeps (an earlier owner's upload of the same
// history: a hydrated segment put again) is success (nil); any other
// occupant of an older epoch is a stale writer's garbage, which this
// shipper does not delete (the bucket API has no delete conditional on
// that very object): errGarbageOccupant (the tail's events ship under
// another key or in a sealed segment instead; a segment upload is retried).
func (s *Shipper) conflict(ctx context.Context, key string, data []byte, err error) error {
	if !s.fencingOn() {
		return s.secondWriter(key, err)
	}
	info, serr := s.b.Stat(ctx, key)
	switch {
	case serr != nil && !errors.Is(serr, blobtier.ErrCorrupt):
		return fmt.Errorf("%w; stat of the occupant: %v", err, serr)
	case serr == nil && info.Meta.Epoch > s.o.Epoch:
		return s.markFenced(info.Meta.Epoch, "an object of epoch "+fmt.Sprint(info.Meta.Epoch)+" occupies "+key)
	case serr == nil && info.Meta.Epoch < s.o.Epoch && s.validOlder(ctx, info, data):
		return nil
	case serr == nil && info.Meta.Epoch < s.o.Epoch:
		s.log.Warn("a stale writer's object of an older epoch occupies one of our keys; not deleted: the events ship under another key or in a sealed segment instead",
			"key", key, "occupant_epoch", info.Meta.Epoch, "epoch", s.o.Epoch)
		return fmt.Errorf("%w: an object of the older epoch %d occupies %s: %v", errGarbageOccupant, info.Meta.Epoch, key, err)
	}
	return s.secondWriter(key, err)
}

// validOlder reports whether an older epoch's object holds exactly data
// and the lineage keeps every frame of it (its epoch on the chain, its
// last sequence within the epoch's end, a segment below the fence).
func (s *Shipper) validOlder(ctx context.Context, info blobtier.ObjectInfo, data []byte) bool {
	if info.ParseErr != nil || info.Meta.Length != int64(len(data)) || info.Meta.XXH64 != blobtier.Digest(data) {
		return false
	}
	lin, _, err := s.readLineage(ctx)
	if err != nil {
		return false
	}
	k, e := info.Parsed, info.Meta.Epoch
	switch k.Kind {
	case blobtier.KindSegment:
		if lin.SkipSegment(e, k.Segment) {
			return false
		}
		for f, ferr := range frame.Frames(data) {
			if ferr != nil || (f.Kind == frame.KindEvent && !lin.ValidSeq(e, f.Seq)) {
				return false
			}
		}
		return true
	case blobtier.KindTail:
		return lin.ValidSeq(e, k.LastSeq)
	}
	return false
}

// errGarbageOccupant: a stale writer's object of an older epoch sits under
// the key of our tail batch. It is not deleted (the bucket API has no
// delete conditional on that very object); the batch's events ship under
// another key (tailbatch.ErrOccupied: a batch with another last sequence),
// and only a single event's batch in a sealed segment instead (shipAround),
// so a segment upload that fails does not also stall the tail.
var errGarbageOccupant = fmt.Errorf("a stale writer's object occupies the key: %w", tailbatch.ErrOccupied)

// shipAround seals the active segment and uploads it, so events whose tail
// key a stale writer's object occupies reach the bucket under a segment
// key of this writer's own, and certifies the shipped end for synchronous
// appends.
func (s *Shipper) shipAround(ctx context.Context) error {
	if _, err := s.store.Seal(); err != nil {
		s.noteErr(err)
		return err
	}
	s.maint.Lock()
	_, err := s.uploadSealed(ctx)
	s.maint.Unlock()
	if err != nil {
		return err
	}
	return s.certifyShipped(ctx)
}

// fencedVerdict answers a synchronous append that waited for seq when the
// writer was fenced (the settled-chain rule): nil when the cut that ends
// our epoch includes seq (it is in the log), the fenced error when the cut
// excludes it or the chain skips our epoch, ErrNotInBucket ("unknown")
// while no cut has decided yet.
func (s *Shipper) fencedVerdict(ctx context.Context, seq uint64, fenced error) error {
	for try := 0; try < 10; try++ {
		lin, newest, err := s.readLineage(ctx)
		if err == nil {
			// Settled only when no claim above the newest cut exists: such
			// a claimant could still cut differently.
			_, serr := s.b.Stat(ctx, blobtier.ClaimKey(s.shard, newest+1))
			if errors.Is(serr, blobtier.ErrNotFound) {
				if end, ended := lin.End(s.o.Epoch); ended {
					if seq <= end {
						return nil
					}
					return fmt.Errorf("%w (sequence %d is beyond the cut at %d)", fenced, seq, end)
				}
				if lin.Newest() > s.o.Epoch {
					return fmt.Errorf("%w (sequence %d: the lineage skips epoch %d)", fenced, seq, s.o.Epoch)
				}
			}
		}
		if err := blobtier.Wait(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("%w: sequence %d: unknown: %v", ErrNotInBucket, seq, err)
		}
	}
	return fmt.Errorf("%w: sequence %d: unknown: fenced by a claim whose cut is not in the bucket yet; a later cut decides whether it is in the log", ErrNotInBucket, seq)
}

// readLineage reads the shard's start records through the bucket view
// (bucketview.Read, the one reader of a shard's bucket state) and returns
// their chain. newest is the highest epoch with a start record, on the
// chain or off it.
func (s *Shipper) readLineage(ctx context.Context) (fencing.Lineage, uint64, error) {
	v, err := bucketview.Read(ctx, s.b, s.shard, bucketview.Options{Parts: bucketview.StartRecords})
	if err != nil {
		return fencing.Lineage{}, 0, err
	}
	var newest uint64
	for _, so := range v.Starts {
		newest = max(newest, so.Info.Parsed.Epoch)
	}
	lin, err := v.Lineage()
	return lin, newest, err
}
