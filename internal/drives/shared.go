package drives

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// Shared drive limits and defaults.
const (
	// MaxSharedShards bounds the shared drive's pool: it opens one engine
	// per shard in one process and cold-loads every shard from every other
	// replica, which is quadratic in the pool.
	MaxSharedShards = 16
	// SharedConsumer is the consumer the shared drive acks with on every
	// shard, so the crash recovery also proves the cursor object.
	SharedConsumer = "shared-drive"
	// sharedSealedRounds events per execution go into the segment the
	// owner seals and ships; sharedTailRounds more follow it and reach the
	// bucket only as tail objects.
	sharedSealedRounds = 3
	sharedTailRounds   = 2
	// sharedAck is the cursor each shard's consumer acks to.
	sharedAck = 2
	// sharedReadLimit is larger than any execution or shard of the drive, so
	// one page holds everything.
	sharedReadLimit = 1000
	// sharedTimeout bounds the whole drive (a hang guard for a bucket that
	// stops answering, not a performance assertion).
	sharedTimeout = 10 * time.Minute
)

// SharedReport is the outcome of the shared-tier drive, shaped as the
// seed's durable-eventlog-shared output.
type SharedReport struct {
	SharedTierHolds bool          `json:"shared_tier_holds"`
	Report          SharedDetails `json:"report"`
}

// SharedDetails are the observations of the shared-tier drive.
type SharedDetails struct {
	ShardCount int `json:"shard_count"`
	// Executions is the size of the deterministic execution set (one per
	// shard).
	Executions int `json:"executions"`
	// SharedSegments counts the segment objects of the pool's shards in the
	// bucket once every owner has shipped (before the crash recovery).
	SharedSegments int `json:"shared_segments"`
	// OwnerPublishedOK: every owner's ship pass put each sealed segment in
	// the bucket byte for byte (length and digest equal to the local file)
	// and shipped its unsealed tail, so the bucket holds every sequence
	// through the owner's tip.
	OwnerPublishedOK bool `json:"owner_published_ok"`
	// NonownerColdloadFromSharedOK: every replica that does not own an
	// execution read it by a cold load from the bucket (served_by
	// non_owner_cold_load, from the owner's shard) and got every event the
	// owner appended, sealed and tail alike, while its own disk gained no
	// directory of that shard.
	NonownerColdloadFromSharedOK bool `json:"nonowner_coldload_from_shared_ok"`
	// CrashRecoveryFromSharedOK: each owner, its local directory deleted
	// and the engine reopened over an empty one, hydrated from the bucket
	// alone: the same records, the consumer's cursor, and a next append
	// that continues the sequence and reaches the other replicas.
	CrashRecoveryFromSharedOK bool `json:"crash_recovery_from_shared_ok"`
	// SharedMissOK: before anything was shipped, every non-owner read of a
	// shard the bucket held nothing of answered empty ("does not exist"),
	// not an error, even though the owner had appended locally.
	SharedMissOK bool `json:"shared_miss_ok"`
	// ParityOK: every cold-loaded page (per execution and whole shard)
	// equals the owner's resident page field for field.
	ParityOK bool `json:"parity_ok"`
	// Divergence describes the first problem found, or is null.
	Divergence *string `json:"divergence"`
}

// Holds reports whether every check passed and nothing diverged.
func (r SharedReport) Holds() bool {
	d := r.Report
	return d.OwnerPublishedOK && d.NonownerColdloadFromSharedOK && d.CrashRecoveryFromSharedOK &&
		d.SharedMissOK && d.ParityOK && d.Divergence == nil
}

// sharedHooks let tests break the drive on purpose (RED controls).
// Production runs use the zero value.
type sharedHooks struct {
	// skipShip: the owners never ship, so the bucket never receives what
	// they appended.
	skipShip bool
	// disableTail: the owners ship sealed segments but not the unsealed
	// tail (tail replication off).
	disableTail bool
	// afterPublish runs once every owner has shipped, before the cold
	// loads.
	afterPublish func(d *sharedRun) error
}

// sharedReplica is one member of the pool: the engine that owns shard
// index, over its own local disk dir.
type sharedReplica struct {
	index int
	dir   string
	log   *bucketlog.Log
	// bucket is the replica's way to the shared bucket; the crash cuts it,
	// so the dying engine's last shipment never reaches the bucket.
	bucket *cuttable
	exec   string
	// events are what the owner appended for exec, in order; acked is the
	// consumer's cursor.
	events []localseg.Event
	acked  uint64
}

// Shared is the shared-tier drive (CHECKLIST §3.9): a pool of shardCount
// replicas, each the single owner of one shard with a local disk of its
// own (<root>/replica-<i>), over the one bucket b. It proves, in order:
//
//   - shared miss: owners append locally; before anything is shipped, each
//     non-owner's read of another shard is a cold load from the bucket that
//     answers empty, not an error;
//   - owner publish: each owner ships (Log.Ship with the active segment
//     sealed), appends more events and ships again, so the bucket holds its
//     sealed segments byte for byte and its tail as tail objects, through
//     its tip;
//   - non-owner cold load and parity: every other replica reads each
//     execution and scans each shard from the bucket and gets exactly the
//     owner's page;
//   - crash recovery: each owner's local directory is deleted and the
//     engine reopened over the empty one; it hydrates from the bucket,
//     holds the same records and consumer cursor, and its next append
//     continues the sequence and ships to the other replicas.
//
// b should hold nothing of shards 0..shardCount-1; a bucket that does is
// refused (ErrUsage), as are fewer than 2 shards (one shard has no
// non-owner), more than MaxSharedShards, a nil bucket, and a root that is
// empty or already holds anything. A broken property is reported (Holds
// false), not returned as an error; an error means the drive could not run.
func Shared(root string, shardCount int, b blobtier.Bucket) (SharedReport, error) {
	return sharedDrive(root, shardCount, b, sharedHooks{})
}

func sharedDrive(root string, shardCount int, b blobtier.Bucket, hooks sharedHooks) (SharedReport, error) {
	switch {
	case shardCount < 2:
		return SharedReport{}, usagef("the shared drive needs at least 2 shards (a non-owner to cold-load), got %d", shardCount)
	case shardCount > MaxSharedShards:
		return SharedReport{}, usagef("the shared drive runs at most %d shards, got %d", MaxSharedShards, shardCount)
	case b == nil:
		return SharedReport{}, usagef("the shared drive needs a bucket")
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	for s := range shardCount {
		if key, err := anyObject(ctx, b, uint32(s)); err != nil {
			return SharedReport{}, fmt.Errorf("shared drive: list shard %d: %w", s, err)
		} else if key != "" {
			return SharedReport{}, usagef("the bucket already holds %s of shard %d; the drive needs a bucket (or prefix) with nothing of shards 0..%d", key, s, shardCount-1)
		}
	}
	if err := prepareRoot(root); err != nil {
		return SharedReport{}, err
	}

	d := &sharedRun{ctx: ctx, root: root, n: shardCount, b: b, hooks: hooks}
	defer d.closeAll()
	if err := d.openPool(); err != nil {
		return SharedReport{}, err
	}
	rep := SharedReport{Report: SharedDetails{ShardCount: shardCount, Executions: len(d.pool)}}
	det := &rep.Report

	if err := d.appendRounds(0, sharedSealedRounds); err != nil {
		return SharedReport{}, err
	}
	det.SharedMissOK = d.checkMiss()

	published := d.publish()
	det.SharedSegments = d.countSegments()
	det.OwnerPublishedOK = published && d.checkPublished()
	if hooks.afterPublish != nil {
		if err := hooks.afterPublish(d); err != nil {
			return SharedReport{}, err
		}
	}

	det.NonownerColdloadFromSharedOK, det.ParityOK = d.checkColdLoads()
	det.CrashRecoveryFromSharedOK = d.crashRecovery()

	if err := d.closeAll(); err != nil {
		d.c.fail("close the pool: %v", err)
	}
	det.Divergence = d.c.first
	rep.SharedTierHolds = rep.Holds()
	return rep, nil
}

// anyObject returns the key of some object of shard in b, or "".
func anyObject(ctx context.Context, b blobtier.Bucket, shard uint32) (string, error) {
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for info, err := range b.List(ctx, shard, kind) {
			if err != nil {
				return "", err
			}
			return info.Key, nil
		}
	}
	for _, key := range []string{blobtier.WatermarkKey(shard), blobtier.CursorKey(shard)} {
		_, err := b.Stat(ctx, key)
		switch {
		case err == nil:
			return key, nil
		case !errors.Is(err, blobtier.ErrNotFound):
			return "", err
		}
	}
	return "", nil
}

type sharedRun struct {
	ctx   context.Context
	root  string
	n     int
	b     blobtier.Bucket
	hooks sharedHooks
	pool  []*sharedReplica
	c     checks
}

func (d *sharedRun) options(i int, b blobtier.Bucket) bucketlog.Options {
	return bucketlog.Options{
		Dir:                    filepath.Join(d.root, fmt.Sprintf("replica-%d", i)),
		ShardIndex:             i,
		ShardCount:             d.n,
		Bucket:                 b,
		NoBackground:           true,
		SealMaxAge:             -1, // the drive seals when it means to
		DisableTailReplication: d.hooks.disableTail,
		Logger:                 slog.New(slog.DiscardHandler),
	}
}

func (d *sharedRun) openPool() error {
	execs := driveExecutions(d.n, 1)
	d.pool = make([]*sharedReplica, d.n)
	for i := range d.pool {
		r := &sharedReplica{index: i, exec: execs[i], bucket: &cuttable{Bucket: d.b}}
		opts := d.options(i, r.bucket)
		r.dir = opts.Dir
		d.pool[i] = r
		l, err := bucketlog.Open(d.ctx, opts)
		if err != nil {
			return fmt.Errorf("shared drive: open replica %d: %w", i, err)
		}
		r.log = l
	}
	return nil
}

func (d *sharedRun) closeAll() error {
	var errs []error
	for _, r := range d.pool {
		if r != nil && r.log != nil {
			errs = append(errs, r.log.Close())
			r.log = nil
		}
	}
	return errors.Join(errs...)
}

// appendRounds appends rounds from..to-1 of every owner's execution.
func (d *sharedRun) appendRounds(from, to int) error {
	for _, r := range d.pool {
		for round := from; round < to; round++ {
			ev := driveEvent(r.exec, round)
			res, err := r.log.Append(d.ctx, ev)
			if err != nil {
				return fmt.Errorf("shared drive: replica %d append: %w", r.index, err)
			}
			r.events = append(r.events, ev)
			if res.Seq != uint64(len(r.events)) {
				d.c.fail("replica %d appended sequence %d, want %d", r.index, res.Seq, len(r.events))
			}
		}
	}
	return nil
}

// checkMiss reads every other shard from every replica while the bucket
// holds nothing: each read must be an empty cold load.
func (d *sharedRun) checkMiss() bool {
	ok := true
	for _, r := range d.pool {
		for _, o := range d.pool {
			if o == r {
				continue
			}
			res, err := r.log.ReadExecution(d.ctx, o.exec, 0, sharedReadLimit)
			switch {
			case err != nil:
				ok = d.c.fail("replica %d reading execution %s of shard %d with nothing shipped: %v", r.index, o.exec, o.index, err)
			case res.ServedBy != affinity.ServedByNonOwnerColdLoad || res.Shard != o.index:
				ok = d.c.fail("replica %d read execution %s served by %s from shard %d, want %s from shard %d", r.index, o.exec, res.ServedBy, res.Shard, affinity.ServedByNonOwnerColdLoad, o.index)
			case res.Page.Exists || res.Page.RecordCount != 0 || len(res.Page.Records) != 0:
				ok = d.c.fail("replica %d read %d records of execution %s from a bucket that holds nothing of shard %d", r.index, len(res.Page.Records), o.exec, o.index)
			}
			sc, err := r.log.ScanShard(d.ctx, o.index, 0, sharedReadLimit)
			switch {
			case err != nil:
				ok = d.c.fail("replica %d scanning shard %d with nothing shipped: %v", r.index, o.index, err)
			case sc.Page.Exists || len(sc.Page.Records) != 0:
				ok = d.c.fail("replica %d scanned %d records of shard %d from a bucket that holds nothing of it", r.index, len(sc.Page.Records), o.index)
			}
		}
	}
	return ok
}

// publish has every owner seal and ship, append its tail rounds and a
// consumer ack, and ship again (tail objects and the cursor object).
func (d *sharedRun) publish() bool {
	ok := true
	if !d.hooks.skipShip {
		for _, r := range d.pool {
			if _, err := r.log.Ship(d.ctx, true); err != nil {
				ok = d.c.fail("replica %d ship with the active segment sealed: %v", r.index, err)
			}
		}
	}
	if err := d.appendRounds(sharedSealedRounds, sharedSealedRounds+sharedTailRounds); err != nil {
		return d.c.fail("%v", err)
	}
	for _, r := range d.pool {
		if _, err := r.log.Pull(d.ctx, SharedConsumer, 1); err != nil {
			ok = d.c.fail("replica %d pull: %v", r.index, err)
			continue
		}
		acked, err := r.log.Ack(d.ctx, SharedConsumer, sharedAck)
		if err != nil {
			ok = d.c.fail("replica %d ack: %v", r.index, err)
			continue
		}
		r.acked = acked
	}
	if !d.hooks.skipShip {
		for _, r := range d.pool {
			rep, err := r.log.Ship(d.ctx, false)
			switch {
			case err != nil:
				ok = d.c.fail("replica %d ship of the tail: %v", r.index, err)
			case rep.ShippedThrough != rep.Tip:
				ok = d.c.fail("replica %d shipped through %d of its tip %d", r.index, rep.ShippedThrough, rep.Tip)
			}
		}
	}
	return ok
}

// countSegments counts the segment objects of the pool's shards.
func (d *sharedRun) countSegments() int {
	n := 0
	for s := range d.n {
		for _, err := range d.b.List(d.ctx, uint32(s), blobtier.KindSegment) {
			if err != nil {
				d.c.fail("list segments of shard %d: %v", s, err)
				break
			}
			n++
		}
	}
	return n
}

// checkPublished compares the bucket with every owner's local store: each
// sealed segment is an object of the same length and digest, and the
// segments and tail objects together cover every sequence through the tip.
func (d *sharedRun) checkPublished() bool {
	ok := true
	for _, r := range d.pool {
		st := r.log.Store()
		snap, err := st.Snapshot()
		if err != nil {
			ok = d.c.fail("replica %d snapshot: %v", r.index, err)
			continue
		}
		covered := snap.ReclaimedSeq
		sealed := 0
		for _, seg := range snap.Segments {
			if !seg.Sealed {
				continue
			}
			sealed++
			data, err := st.ReadSegment(seg.ID)
			if err != nil {
				ok = d.c.fail("replica %d read segment %d: %v", r.index, seg.ID, err)
				continue
			}
			key := blobtier.SegmentKey(uint32(r.index), seg.ID)
			info, err := d.b.Stat(d.ctx, key)
			switch {
			case err != nil:
				ok = d.c.fail("replica %d sealed segment %d is not in the bucket: %v", r.index, seg.ID, err)
				continue
			case info.Meta.Length != int64(len(data)) || info.Meta.XXH64 != blobtier.Digest(data):
				ok = d.c.fail("the bucket's %s differs from replica %d's segment %d", key, r.index, seg.ID)
				continue
			}
			if seg.Events > 0 && seg.FirstSeq == covered+1 {
				covered = seg.LastSeq
			}
		}
		if sealed == 0 {
			ok = d.c.fail("replica %d has no sealed segment to publish", r.index)
		}
		for info, err := range d.b.List(d.ctx, uint32(r.index), blobtier.KindTail) {
			if err != nil {
				ok = d.c.fail("list tail objects of shard %d: %v", r.index, err)
				break
			}
			if info.ParseErr == nil && info.Parsed.FirstSeq <= covered+1 && info.Parsed.LastSeq > covered {
				covered = info.Parsed.LastSeq
			}
		}
		if covered != snap.Tip {
			ok = d.c.fail("the bucket covers shard %d through sequence %d, the owner's tip is %d", r.index, covered, snap.Tip)
		}
	}
	return ok
}

// checkColdLoads reads every execution and scans every shard from every
// non-owner and compares with the owner (parity) and with what the owner
// appended (the cold load saw everything).
func (d *sharedRun) checkColdLoads() (coldOK, parityOK bool) {
	coldOK, parityOK = true, true
	for _, o := range d.pool {
		own, err := o.log.ReadExecution(d.ctx, o.exec, 0, sharedReadLimit)
		if err != nil || own.ServedBy != affinity.ServedByOwnerResident {
			d.c.fail("owner %d read of %s: served by %q: %v", o.index, o.exec, own.ServedBy, err)
			return false, false
		}
		ownScan, err := o.log.ScanShard(d.ctx, o.index, 0, sharedReadLimit)
		if err != nil {
			d.c.fail("owner %d scan: %v", o.index, err)
			return false, false
		}
		for _, r := range d.pool {
			if r == o {
				continue
			}
			res, err := r.log.ReadExecution(d.ctx, o.exec, 0, sharedReadLimit)
			if err != nil {
				coldOK = d.c.fail("replica %d cold load of execution %s: %v", r.index, o.exec, err)
				parityOK = false
				continue
			}
			if res.ServedBy != affinity.ServedByNonOwnerColdLoad || res.Shard != o.index {
				coldOK = d.c.fail("replica %d read of execution %s was served by %s from shard %d, want %s from shard %d", r.index, o.exec, res.ServedBy, res.Shard, affinity.ServedByNonOwnerColdLoad, o.index)
			}
			if why := sameEvents(res.Page.Records, o.events, 1); why != "" {
				coldOK = d.c.fail("replica %d cold load of execution %s: %s", r.index, o.exec, why)
			}
			if !reflect.DeepEqual(res.Page, own.Page) {
				parityOK = d.c.fail("replica %d cold-loaded page of execution %s differs from the owner's (%d records of %d, exists %v, base %d)", r.index, o.exec, len(res.Page.Records), res.Page.RecordCount, res.Page.Exists, res.Page.Base)
			}
			sc, err := r.log.ScanShard(d.ctx, o.index, 0, sharedReadLimit)
			if err != nil {
				parityOK = d.c.fail("replica %d cold scan of shard %d: %v", r.index, o.index, err)
			} else if !reflect.DeepEqual(sc.Page, ownScan.Page) {
				parityOK = d.c.fail("replica %d cold scan of shard %d differs from the owner's (%d records, owner %d)", r.index, o.index, len(sc.Page.Records), len(ownScan.Page.Records))
			}
			if exists(localseg.ShardDir(r.dir, o.index)) {
				coldOK = d.c.fail("replica %d's disk gained a directory of shard %d during a cold load", r.index, o.index)
			}
		}
	}
	return coldOK, parityOK
}

// sameEvents compares stored records with the events appended, from
// sequence first on; it returns "" when they match.
func sameEvents(recs []localseg.Record, want []localseg.Event, first uint64) string {
	if len(recs) != len(want) {
		return fmt.Sprintf("%d records, want %d", len(recs), len(want))
	}
	for i, rec := range recs {
		w := want[i]
		if rec.Seq != first+uint64(i) || rec.ExecutionID != w.ExecutionID || rec.TransactionID != w.TransactionID || rec.Payload != w.Payload {
			return fmt.Sprintf("record %d is sequence %d %s/%s, want sequence %d %s/%s", i, rec.Seq, rec.ExecutionID, rec.TransactionID, first+uint64(i), w.ExecutionID, w.TransactionID)
		}
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// crashRecovery loses each owner's local disk in turn and reopens it.
func (d *sharedRun) crashRecovery() bool {
	ok := true
	for _, r := range d.pool {
		if !d.recoverOne(r) {
			ok = false
		}
	}
	return ok
}

func (d *sharedRun) recoverOne(r *sharedReplica) bool {
	before, err := r.log.Scan(d.ctx, 0, sharedReadLimit)
	if err != nil {
		return d.c.fail("replica %d scan before the crash: %v", r.index, err)
	}
	tip := r.log.Store().Tip()
	// The crash: the engine's way to the bucket is cut first, so Close's
	// last shipment cannot publish anything the owner had not shipped (a
	// killed process ships nothing), and its error is expected. Then the
	// local disk is lost.
	r.bucket.cut.Store(true)
	_ = r.log.Close()
	r.log = nil
	if err := os.RemoveAll(r.dir); err != nil {
		return d.c.fail("replica %d: delete the local disk: %v", r.index, err)
	}
	r.bucket = &cuttable{Bucket: d.b}
	l, err := bucketlog.Open(d.ctx, d.options(r.index, r.bucket))
	if err != nil {
		return d.c.fail("replica %d reopen over an empty disk: %v", r.index, err)
	}
	r.log = l
	if !l.OpenReport().Hydrated {
		return d.c.fail("replica %d reopened over an empty disk without hydrating from the bucket", r.index)
	}
	after, err := l.Scan(d.ctx, 0, sharedReadLimit)
	if err != nil {
		return d.c.fail("replica %d scan after hydrating: %v", r.index, err)
	}
	if !reflect.DeepEqual(after, before) {
		return d.c.fail("replica %d hydrated %d records (tip %d), before the crash it held %d (tip %d)", r.index, len(after.Records), l.Store().Tip(), len(before.Records), tip)
	}
	pr, err := l.Pull(d.ctx, SharedConsumer, 1)
	switch {
	case err != nil:
		return d.c.fail("replica %d pull after hydrating: %v", r.index, err)
	case pr.Created || pr.Acked != r.acked:
		return d.c.fail("replica %d consumer after hydrating: created %v, cursor %d, want the cursor %d from the bucket", r.index, pr.Created, pr.Acked, r.acked)
	}
	ev := driveEvent(r.exec, len(r.events))
	res, err := l.Append(d.ctx, ev)
	if err != nil {
		return d.c.fail("replica %d append after hydrating: %v", r.index, err)
	}
	if res.Seq != tip+1 {
		return d.c.fail("replica %d appended sequence %d after hydrating, want %d", r.index, res.Seq, tip+1)
	}
	r.events = append(r.events, ev)
	if d.hooks.skipShip {
		return true // nothing ships in this control; the earlier checks fail
	}
	if _, err := l.Ship(d.ctx, false); err != nil {
		return d.c.fail("replica %d ship after hydrating: %v", r.index, err)
	}
	other := d.pool[(r.index+1)%d.n]
	cold, err := other.log.ReadExecution(d.ctx, r.exec, 0, sharedReadLimit)
	if err != nil {
		return d.c.fail("replica %d cold load of the recovered shard %d: %v", other.index, r.index, err)
	}
	if why := sameEvents(cold.Page.Records, r.events, 1); why != "" {
		return d.c.fail("replica %d cold load of the recovered shard %d: %s", other.index, r.index, why)
	}
	return true
}

// errCut is what a cut bucket answers to every write.
var errCut = errors.New("drives: the replica crashed; its bucket writes are cut")

// cuttable is the shared bucket as one replica sees it: once cut, every
// write fails, as if the replica's process had died.
type cuttable struct {
	blobtier.Bucket
	cut atomic.Bool
}

func (c *cuttable) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Bucket.PutIfAbsent(ctx, key, data, epoch)
}

func (c *cuttable) Put(ctx context.Context, key string, data []byte) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Bucket.Put(ctx, key, data)
}

func (c *cuttable) CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Bucket.CompareAndSwap(ctx, key, data, expect)
}

func (c *cuttable) Delete(ctx context.Context, key string) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Bucket.Delete(ctx, key)
}

// Close leaves the shared bucket open: the drive's caller owns it.
func (c *cuttable) Close() error { return nil }
