package shipper

import (
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// Status is one shard's state for an operator (GET /v1/status): where the
// log and its bucket copy end, how much is on the local disk only and for
// how long, and the bucket's latest trouble. Times are RFC 3339 (omitted
// when never); the error is redacted.
type Status struct {
	Shard int `json:"shard"`
	// State is "ready" (takes appends, the bucket ships), "degraded"
	// (takes appends, the bucket is failing: events are durable on the
	// local disk only), "not_ready" (refuses appends: Reason says why) or
	// "stopped" (a second writer, or fenced: nothing ships); serve answers
	// "opening" before the engine is open (nothing else known yet).
	State  string `json:"state"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// Fenced: a newer owner claimed the shard (writer fencing); every
	// write is refused and the process never claims again by itself.
	// Epoch is this writer's ownership epoch (0: unfenced, or no bucket).
	Fenced bool   `json:"fenced"`
	Epoch  uint64 `json:"epoch"`
	Bucket bool   `json:"bucket"`

	Tip uint64 `json:"tip"`
	// Base is the lowest sequence the local store still holds (the reclaim
	// watermark + 1); Watermark the bucket's reclaim watermark as last seen.
	Base      uint64 `json:"base"`
	Watermark uint64 `json:"watermark"`
	// ShippedThrough is the contiguous end of what the bucket holds.
	ShippedThrough uint64 `json:"shipped_through"`
	Unshipped      uint64 `json:"unshipped"`
	UnshippedBytes int64  `json:"unshipped_bytes"`
	// OldestUnshippedAgeSeconds bounds from above the age of the oldest
	// event not in the bucket (0 when none).
	OldestUnshippedAgeSeconds float64 `json:"oldest_unshipped_age_seconds"`

	// SegmentsLocal are the segment files on the local disk (the active one
	// included); SegmentsDurable the segments the bucket holds as durable
	// segment objects; SegmentsRemote those held only by the bucket (evicted
	// from the local disk: 0 until a tier evicts, which fills it).
	SegmentsLocal   int `json:"segments_local"`
	SegmentsDurable int `json:"segments_durable"`
	SegmentsRemote  int `json:"segments_remote"`
	Consumers       int `json:"consumers"`

	LastShippedAt     string `json:"last_shipped_at,omitempty"`
	BucketFailing     bool   `json:"bucket_failing"`
	FailingSince      string `json:"failing_since,omitempty"`
	FailuresInStreak  int    `json:"failures_in_streak"`
	LastBucketError   string `json:"last_bucket_error,omitempty"`
	LastBucketErrorAt string `json:"last_bucket_error_at,omitempty"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// StatusOf is the Status of the shard served by store and shipped by s
// (nil without a bucket). Ready, Reason and State are the shipper's view;
// the caller overrides them with its own (a closed or poisoned store).
func StatusOf(shard int, store Store, s *Shipper, now time.Time) Status {
	st := Status{Shard: shard, State: "ready", Ready: true}
	snap, err := store.Snapshot()
	if err != nil {
		st.State, st.Ready, st.Reason = "not_ready", false, err.Error()
		return st
	}
	st.Tip, st.Base, st.Consumers, st.SegmentsLocal = snap.Tip, snap.ReclaimedSeq+1, len(snap.Consumers), len(snap.Segments)
	if ev, ok := store.(evicter); ok {
		rs := ev.RemoteStats()
		st.SegmentsLocal, st.SegmentsRemote = rs.LocalSegments, rs.Evicted
	}
	if s == nil {
		return st
	}
	st.Bucket, st.Epoch, st.Fenced = true, s.o.Epoch, s.Fenced() != nil
	st.ShippedThrough = s.repl.ShippedThrough()
	if st.Tip > st.ShippedThrough {
		st.Unshipped = st.Tip - st.ShippedThrough
		st.OldestUnshippedAgeSeconds = s.oldestUnshippedAge(now).Seconds()
		st.UnshippedBytes = s.unshippedBytes()
	}
	s.mu.Lock()
	st.Watermark, st.SegmentsDurable = s.wm.Seq, len(s.durable)
	st.BucketFailing = s.failingLocked()
	s.mu.Unlock()
	since, lastErr, lastErrAt, lastShip, streak := s.watch.state()
	st.FailingSince, st.FailuresInStreak = stamp(since), streak
	st.LastBucketError, st.LastBucketErrorAt, st.LastShippedAt = lastErr, stamp(lastErrAt), stamp(lastShip)
	switch err := s.Ready(); {
	case s.stopped() != nil:
		st.State, st.Ready, st.Reason = "stopped", false, err.Error()
	case err != nil:
		st.State, st.Ready, st.Reason = "not_ready", false, err.Error()
	case st.BucketFailing:
		st.State = "degraded"
		if h := s.health(); h != nil {
			st.Reason = blobtier.RedactText(h.Error())
		}
	}
	return st
}
