package shipper

import (
	"context"
	"log/slog"

	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/logopts"
	"github.com/bucketlog/bucketlog/metrics"
	"github.com/bucketlog/bucketlog/reclaim"
)

// OptionsFor is what a Shipper (or a Local) takes from bucketlog's
// resolved options (logopts.Resolve), beside what Open builds: the seal
// hook, the shard's logger and metrics, its poison note and the open's
// fencing claim.
func OptionsFor(o logopts.Options, seals SealSignal, log *slog.Logger, m *metrics.Shard, noteErr func(error), fencing bool, epoch uint64, listed *bucketview.View) Options {
	return Options{
		Shard:              uint32(o.ShardIndex),
		TailReplication:    !o.DisableTailReplication,
		DisableTailCleanup: o.DisableTailCleanup,
		TailInterval:       o.TailInterval,
		SyncWait:           o.SyncWait,
		StartupTimeout:     o.StartupTimeout,
		UploadRetryMax:     logopts.DefaultUploadRetryMax,
		Policy:             reclaim.Policy{Enabled: o.GC.Enabled, MinRetainedSegments: o.GC.MinRetainedSegments, MaxRetainedSegments: o.GC.MaxRetainedSegments},
		GCInterval:         o.GC.Interval,
		Sealed:             seals,
		Now:                o.Now,
		Logger:             log,
		Metrics:            m,
		NoteErr:            noteErr,
		MaxUnshippedAge:    o.MaxUnshippedAge,
		// Appends only: Refusing; acks and deletes check Stopped.
		RefuseWhenUnshipped: o.RefuseWhenUnshipped,
		BucketWarnInterval:  o.BucketWarnInterval,
		Fencing:             fencing,
		Epoch:               epoch,
		Listed:              listed,
		LocalRetentionBytes: o.LocalRetentionBytes,
		// The fresh check needs a tick to be older than, and synchronous
		// appends wait for a HEAD anyway.
		FenceFreshAck: fencing && !o.NoBackground && !o.SyncToBucket && !o.DisableFenceFreshAck,
	}
}

// Appended tells the shipper of appends through seq and, with wait (a
// synchronous append), waits until the bucket holds them (WaitShipped).
// A nil Shipper (no bucket) has nothing to do.
func (s *Shipper) Appended(ctx context.Context, seq uint64, wait bool) error {
	if s == nil {
		return nil
	}
	s.NoteAppended()
	if s.fencingOn() && s.Fenced() != nil {
		s.lateAppend(seq)
	}
	if wait {
		return s.WaitShipped(ctx, seq)
	}
	return nil
}

// Readiness is a shard's Ready or Health verdict: not when closed or the
// store is poisoned (asked only when open), else check's verdict on s
// (none with a nil Shipper, no bucket). The reason says what is wrong.
func Readiness(closed bool, poisoned func() bool, s *Shipper, check func(*Shipper) error) (bool, string) {
	switch {
	case closed:
		return false, "closed"
	case poisoned():
		return false, "store poisoned by a write or fsync error; restart to recover"
	}
	if s != nil {
		if err := check(s); err != nil {
			return false, err.Error()
		}
	}
	return true, ""
}
