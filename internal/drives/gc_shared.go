package drives

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/watermark"
)

// Shared drive constants.
const (
	// MaxSharedGCDriveShards bounds the pool of DriveSharedGC.
	MaxSharedGCDriveShards = 16
	// SharedGCDriveEvents is how many events each shard of the drive gets.
	SharedGCDriveEvents = 40
	// SharedGCDriveAck is the cursor shard 0's consumer acks to (3/4).
	SharedGCDriveAck = 30
)

// SharedGCDriveReport is the outcome of DriveSharedGC, shaped after the
// seed's durable-eventlog-shared-gc output.
type SharedGCDriveReport struct {
	Driver        string               `json:"driver"`
	SharedGCHolds bool                 `json:"shared_gc_holds"`
	Report        SharedGCDriveDetails `json:"report"`
}

// SharedGCDriveDetails are the observations of DriveSharedGC. Shard 0 is
// the one reclaimed; its owner is replica 0.
type SharedGCDriveDetails struct {
	ShardCount     int    `json:"shard_count"`
	EventsPerShard int    `json:"events_per_shard"`
	Consumer       string `json:"consumer"`
	AckedThrough   uint64 `json:"acked_through"`
	// SharedObjects* count shard 0's segment objects in the bucket before
	// and after the pass (the seed's "pruned the shared store 40 → 10").
	SharedObjectsBefore int `json:"shared_objects_before"`
	SharedObjectsAfter  int `json:"shared_objects_after"`
	// The watermark committed by the pass.
	WatermarkSeq     uint64 `json:"watermark_seq"`
	WatermarkSegment uint64 `json:"watermark_segment"`
	// OwnerBase is the first sequence the owner retains; OwnerRetained how
	// many events it holds.
	OwnerBase     uint64 `json:"owner_base"`
	OwnerRetained int    `json:"owner_retained"`
	PlanReason    string `json:"plan_reason"`
	// OwnerGapless: the owner's retained log runs from the base to the tip
	// with every event as appended, and the base never passed the consumer.
	OwnerGapless bool `json:"owner_gapless"`
	// NonOwnerCoherent: a non-owner's cold load (read-only, from the bucket
	// alone) returns exactly the owner's retained set: no re-pull of a
	// reclaimed segment.
	NonOwnerCoherent bool `json:"non_owner_coherent"`
	// NewOwnerCoherent: a new owner hydrating an empty disk from the bucket
	// holds exactly the owner's retained set (no un-reclaim on transfer),
	// continues the sequence, and its next segment id is above every id
	// the bucket has seen.
	NewOwnerCoherent bool `json:"new_owner_coherent"`
	// Pruned: every shard-0 object at or below the watermark is gone and
	// every one above it is still there.
	Pruned bool `json:"pruned"`
	// OtherShardsUntouched: no other shard lost an object.
	OtherShardsUntouched bool `json:"other_shards_untouched"`
	// SecondPassNoop: an immediate second pass writes and deletes nothing.
	SecondPassNoop bool    `json:"second_pass_noop"`
	Divergence     *string `json:"divergence"`
}

// Holds reports whether every invariant held.
func (r SharedGCDriveReport) Holds() bool {
	d := r.Report
	return d.SharedObjectsAfter < d.SharedObjectsBefore && d.WatermarkSegment > 0 && d.OwnerGapless &&
		d.NonOwnerCoherent && d.NewOwnerCoherent && d.Pruned && d.OtherShardsUntouched && d.SecondPassNoop &&
		d.Divergence == nil
}

// gcReplica is one member of the drive's pool: it owns shard i and keeps its
// store under <root>/replica-<i>.
type gcReplica struct {
	shard  uint32
	dir    string
	st     *localseg.Store
	events []localseg.Event
}

// DriveSharedGC is the shared-tier GC drive (CHECKLIST §6.2): a pool of
// shardCount replicas, each with its own local disk under root, ships its
// shard to the one bucket b (every segment sealed and uploaded). The owner of
// shard 0 has a consumer ack three quarters of its log and runs one Shared
// pass. The drive then checks that the owner's retained log is gapless from
// its base, that a non-owner's cold load and a fresh new owner's hydrate
// both hold exactly the owner's retained set (the new owner continuing the
// sequence in a segment id above every id the bucket has seen), that the
// bucket lost exactly shard 0's objects at or below the watermark and
// nothing of the other shards, and that a second pass is a no-op.
//
// b must be able to compare-and-swap (ErrSharedUnsupported otherwise) and
// should hold nothing of shards 0..shardCount-1: the drive writes there. It
// refuses (ErrUsage) fewer than 2 shards (one shard has no non-owner),
// more than MaxSharedGCDriveShards, a nil bucket and a root that is empty or
// already holds anything.
func DriveSharedGC(root string, shardCount int, b blobtier.Bucket) (SharedGCDriveReport, error) {
	switch {
	case shardCount < 2:
		return SharedGCDriveReport{}, usagef("the shared GC drive needs at least 2 shards (a non-owner to cold-load), got %d", shardCount)
	case shardCount > MaxSharedGCDriveShards:
		return SharedGCDriveReport{}, usagef("the shared GC drive takes at most %d shards, got %d", MaxSharedGCDriveShards, shardCount)
	case b == nil:
		return SharedGCDriveReport{}, usagef("the shared GC drive needs a bucket")
	case !b.CanCAS():
		return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: %w", reclaim.ErrSharedUnsupported)
	}
	if err := prepareRoot(root); err != nil {
		return SharedGCDriveReport{}, err
	}
	ctx := context.Background()
	opts := localseg.Options{SegmentMaxBytes: DefaultGCDriveSegmentBytes}
	consumer := DefaultGCDriveConsumer

	pool := make([]*gcReplica, shardCount)
	defer func() {
		for _, r := range pool {
			if r != nil && r.st != nil {
				r.st.Close()
			}
		}
	}()
	for i := range pool {
		r := &gcReplica{shard: uint32(i), dir: localseg.ShardDir(filepath.Join(root, fmt.Sprintf("replica-%d", i)), i)}
		pool[i] = r
		var err error
		if r.st, err = localseg.Open(r.dir, opts); err != nil {
			return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: open shard %d: %w", i, err)
		}
		r.events = routedEvents(i, shardCount, SharedGCDriveEvents)
		if err := appendAll(r.st, r.events); err != nil {
			return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: shard %d: %w", i, err)
		}
		if i == 0 {
			if _, err := r.st.Pull(consumer, 1); err != nil {
				return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: pull: %w", err)
			}
			if _, err := r.st.Ack(consumer, SharedGCDriveAck); err != nil {
				return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: ack: %w", err)
			}
		}
		if _, err := r.st.Seal(); err != nil {
			return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: seal shard %d: %w", i, err)
		}
		if err := uploadSealed(ctx, b, r); err != nil {
			return SharedGCDriveReport{}, err
		}
	}
	before := make([][]string, shardCount)
	for i := range pool {
		keys, err := shardKeys(ctx, b, uint32(i))
		if err != nil {
			return SharedGCDriveReport{}, err
		}
		before[i] = keys
	}
	maxSeenSegment := uint64(0)
	for _, k := range before[0] {
		if key, err := blobtier.ParseKey(k); err == nil && key.Kind == blobtier.KindSegment {
			maxSeenSegment = max(maxSeenSegment, key.Segment)
		}
	}

	owner := pool[0]
	durable, err := durableInBucket(ctx, b, owner.shard, owner.st)
	if err != nil {
		return SharedGCDriveReport{}, err
	}
	pol := reclaim.Policy{Enabled: true}
	res, err := reclaim.Shared(ctx, owner.st, b, owner.shard, reclaim.Owner, pol, durable)
	if err != nil {
		return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: reclaim shard 0: %w", err)
	}

	d := SharedGCDriveDetails{
		ShardCount: shardCount, EventsPerShard: SharedGCDriveEvents, Consumer: consumer,
		AckedThrough: SharedGCDriveAck, SharedObjectsBefore: countKind(before[0], blobtier.KindSegment),
		WatermarkSeq: res.Watermark.Seq, WatermarkSegment: res.Watermark.Segment, PlanReason: res.Plan.Reason,
	}
	var dv checks
	after0, err := shardKeys(ctx, b, 0)
	if err != nil {
		return SharedGCDriveReport{}, err
	}
	d.SharedObjectsAfter = countKind(after0, blobtier.KindSegment)

	// The owner's retained set.
	ownerPage, err := owner.st.Scan(0, SharedGCDriveEvents+1)
	if err != nil {
		return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: owner scan: %w", err)
	}
	d.OwnerBase, d.OwnerRetained = ownerPage.Base, len(ownerPage.Records)
	var inner checks
	_, ok := checkRetained(owner.st, owner.events, res.Watermark.Seq, SharedGCDriveAck, &inner)
	d.OwnerGapless = (ok && res.Watermark.Seq > 0) ||
		dv.fail("owner: %s", orString(inner.first, "nothing was reclaimed"))

	// A non-owner (replica 1) reads shard 0 from the bucket.
	d.NonOwnerCoherent = checkNonOwner(ctx, b, filepath.Join(root, "replica-1", "scratch"), ownerPage, &dv)

	// A new owner with an empty disk hydrates shard 0.
	d.NewOwnerCoherent = checkNewOwner(ctx, b, filepath.Join(root, "new-owner"), opts, ownerPage, maxSeenSegment, &dv)

	d.Pruned = checkPruned(before[0], after0, res.Watermark, &dv)
	d.OtherShardsUntouched = true
	for i := 1; i < shardCount; i++ {
		keys, err := shardKeys(ctx, b, uint32(i))
		if err != nil {
			return SharedGCDriveReport{}, err
		}
		if !slices.Equal(keys, before[i]) {
			d.OtherShardsUntouched = dv.fail("shard %d had %d objects, now %d", i, len(before[i]), len(keys))
		}
	}

	again, err := reclaim.Shared(ctx, owner.st, b, owner.shard, reclaim.Owner, pol, durable)
	if err != nil {
		return SharedGCDriveReport{}, fmt.Errorf("shared GC drive: second pass: %w", err)
	}
	d.SecondPassNoop = (!again.Advanced && again.Plan.Empty() && again.Deleted.Segments == 0 && again.Deleted.Tails == 0 &&
		again.Watermark == res.Watermark) ||
		dv.fail("the second pass was not a no-op: advanced %v, plan %v, deleted %+v", again.Advanced, again.Plan.Remove, again.Deleted)

	d.Divergence = dv.first
	rep := SharedGCDriveReport{Driver: GCDriver, Report: d}
	rep.SharedGCHolds = rep.Holds()
	return rep, nil
}

func orString(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// routedEvents builds n events whose execution ids the affinity routing
// sends to shard, so each replica writes only what it owns.
func routedEvents(shard, count, n int) []localseg.Event {
	evs := make([]localseg.Event, 0, n)
	for id := 1; len(evs) < n; id++ {
		exec := fmt.Sprint(1000 + id)
		if affinity.ShardFor(exec, count) != shard {
			continue
		}
		k := len(evs) + 1
		evs = append(evs, localseg.Event{
			ExecutionID:   exec,
			TransactionID: fmt.Sprintf("txn-%s-%d", exec, k),
			Payload:       fmt.Sprintf(`{"shard":%d,"n":%d,"text":"shared gc <&> é"}`, shard, k),
		})
	}
	return evs
}

// uploadSealed puts every sealed segment of r into the bucket, as the
// engine's uploader does: write-once, epoch 0.
func uploadSealed(ctx context.Context, b blobtier.Bucket, r *gcReplica) error {
	snap, err := r.st.Snapshot()
	if err != nil {
		return fmt.Errorf("shared GC drive: snapshot shard %d: %w", r.shard, err)
	}
	for _, s := range snap.Segments {
		if !s.Sealed {
			continue
		}
		data, err := r.st.ReadSegment(s.ID)
		if err != nil {
			return fmt.Errorf("shared GC drive: read segment %d of shard %d: %w", s.ID, r.shard, err)
		}
		if err := b.PutIfAbsent(ctx, blobtier.SegmentKey(r.shard, s.ID), data, 0); err != nil {
			return fmt.Errorf("shared GC drive: upload: %w", err)
		}
	}
	return nil
}

// durableInBucket returns the set of the store's sealed segments whose
// bucket object has the local length and digest (docs/FORMAT.md §7.1: never mere
// presence of the key).
func durableInBucket(ctx context.Context, b blobtier.Bucket, shard uint32, st *localseg.Store) (func(uint64) bool, error) {
	snap, err := st.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("shared GC drive: snapshot: %w", err)
	}
	set := map[uint64]bool{}
	for _, s := range snap.Segments {
		if !s.Sealed {
			continue
		}
		info, err := b.Stat(ctx, blobtier.SegmentKey(shard, s.ID))
		if err != nil {
			continue // not durable (absent or unverifiable)
		}
		data, err := st.ReadSegment(s.ID)
		if err != nil {
			return nil, fmt.Errorf("shared GC drive: read segment %d: %w", s.ID, err)
		}
		set[s.ID] = info.Meta.Length == int64(len(data)) && info.Meta.XXH64 == blobtier.Digest(data)
	}
	return func(id uint64) bool { return set[id] }, nil
}

// shardKeys lists every segment and tail key of a shard, sorted.
func shardKeys(ctx context.Context, b blobtier.Bucket, shard uint32) ([]string, error) {
	var keys []string
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for info, err := range b.List(ctx, shard, kind) {
			if err != nil {
				return nil, fmt.Errorf("shared GC drive: list shard %d: %w", shard, err)
			}
			keys = append(keys, info.Key)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func countKind(keys []string, kind blobtier.Kind) int {
	n := 0
	for _, k := range keys {
		if key, err := blobtier.ParseKey(k); err == nil && key.Kind == kind {
			n++
		}
	}
	return n
}

// samePageWhy reports whether two scans hold the same base and records.
func samePageWhy(got, want localseg.Page) (bool, string) {
	if got.Base != want.Base || len(got.Records) != len(want.Records) {
		return false, fmt.Sprintf("base %d with %d records, owner has base %d with %d", got.Base, len(got.Records), want.Base, len(want.Records))
	}
	for i := range got.Records {
		if got.Records[i] != want.Records[i] {
			return false, fmt.Sprintf("record %d is %+v, owner has %+v", i, got.Records[i], want.Records[i])
		}
	}
	return true, ""
}

func checkNonOwner(ctx context.Context, b blobtier.Bucket, scratch string, owner localseg.Page, dv *checks) bool {
	st, cleanup, err := coldload.ReadOnly(ctx, b, 0, scratch)
	if err != nil {
		return dv.fail("non-owner cold load: %v", err)
	}
	defer cleanup()
	page, err := st.Scan(0, SharedGCDriveEvents+1)
	if err != nil {
		return dv.fail("non-owner scan: %v", err)
	}
	if ok, why := samePageWhy(page, owner); !ok {
		return dv.fail("non-owner cold load: %s", why)
	}
	return true
}

func checkNewOwner(ctx context.Context, b blobtier.Bucket, root string, opts localseg.Options, owner localseg.Page,
	maxSeenSegment uint64, dv *checks) bool {
	dir := localseg.ShardDir(root, 0)
	rep, err := coldload.Hydrate(ctx, b, 0, dir, coldload.Options{Store: opts})
	if err != nil {
		return dv.fail("new-owner hydrate: %v", err)
	}
	st, err := localseg.Open(dir, opts)
	if err != nil {
		return dv.fail("new-owner open: %v", err)
	}
	defer st.Close()
	page, err := st.Scan(0, SharedGCDriveEvents+1)
	if err != nil {
		return dv.fail("new-owner scan: %v", err)
	}
	if ok, why := samePageWhy(page, owner); !ok {
		return dv.fail("new-owner hydrate: %s", why)
	}
	tip := owner.Base - 1 + uint64(len(owner.Records))
	res, err := st.Append(localseg.Event{ExecutionID: "1001", TransactionID: "txn-new-owner", Payload: "after transfer"})
	if err != nil || res.Seq != tip+1 {
		return dv.fail("new-owner append: sequence %d, %v; want %d", res.Seq, err, tip+1)
	}
	snap, err := st.Snapshot()
	if err != nil {
		return dv.fail("new-owner snapshot: %v", err)
	}
	active := snap.Segments[len(snap.Segments)-1].ID
	if active <= maxSeenSegment || rep.NextSegment <= maxSeenSegment {
		return dv.fail("new owner appends into segment %d (report: %d); the bucket has seen up to %d", active, rep.NextSegment, maxSeenSegment)
	}
	return true
}

// checkPruned: every key of the shard at or below the mark is gone, every
// key above it is still there.
func checkPruned(before, after []string, m watermark.Mark, dv *checks) bool {
	var want []string
	for _, k := range before {
		key, err := blobtier.ParseKey(k)
		if err != nil {
			want = append(want, k)
			continue
		}
		if (key.Kind == blobtier.KindSegment && key.Segment > m.Segment) || (key.Kind == blobtier.KindTail && key.LastSeq > m.Seq) {
			want = append(want, k)
		}
	}
	if !slices.Equal(after, want) {
		return dv.fail("after the pass the bucket holds %d objects of shard 0, want %d (those above the watermark)", len(after), len(want))
	}
	return true
}
