package coldload

import (
	"log/slog"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// Options and Report of Hydrate (hydrate.go), also taken by Restore,
// Verify and the cold views.

// Defaults of Options.
const (
	DefaultConcurrency = 8
	DefaultMaxAttempts = 3
)

// Options configure Hydrate. The zero value works.
type Options struct {
	// Concurrency bounds the objects read at once (default 8). Memory is
	// about Concurrency × the largest object (segments are < 16 MiB).
	Concurrency int
	// AllowPartial keeps the contiguous prefix when the bucket's history has
	// a hole (and extends it with the tail objects that continue it), and
	// accepts a restore short of the cursor object's shipped_through. The
	// report lists the holes. Corrupt objects and conflicts still fail. See
	// the package documentation for what to do with the bucket's objects
	// beyond the hole before the restored store ships.
	AllowPartial bool
	// AllowEmpty accepts a bucket holding nothing for the shard: the result
	// is an empty store. Without it that is ErrEmpty.
	AllowEmpty bool
	// AllowWatermarkAhead accepts a reclaim watermark that the bucket's own
	// objects do not support (see ErrWatermarkAhead): the restore then takes
	// the watermark as it is (an empty log at its base, when nothing lies
	// above it) and reports it in Report.WatermarkAhead. Without it that is
	// a *WatermarkAheadError and nothing is written.
	AllowWatermarkAhead bool
	// Store configures the store Hydrate opens to append recovered frames;
	// its FS (default localseg.OSFS) is used for every file operation.
	// ReadOnly is ignored.
	Store localseg.Options
	// Progress, when set, is called after every object read (never
	// concurrently).
	Progress func(Progress)
	// MaxAttempts bounds how often a restore starts over when the bucket
	// changed under it (a live owner sealed, reclaimed or cleaned up while
	// it read): default 3. A hole that is still there when nothing changed
	// is reported at once.
	MaxAttempts int
	// Lazy downloads only the newest segment objects within LocalBytes
	// (at least one) and leaves the older ones in the bucket, recorded as
	// evicted (lazy.go); Report.Lazy says what stays remote.
	Lazy       bool
	LocalBytes int64
	Logger     *slog.Logger
	Now        func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Store.FS == nil {
		o.Store.FS = localseg.OSFS{}
	}
	o.Store.ReadOnly = false
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ClampedCursor is a consumer cursor of the cursor object that pointed past
// the restored tip and was lowered to it.
type ClampedCursor struct {
	Consumer  string `json:"consumer"`
	Cursor    uint64 `json:"cursor"`
	ClampedTo uint64 `json:"clamped_to"`
}

// Report says what a Hydrate did. Field names in JSON are the restore
// command's output.
type Report struct {
	Shard uint32 `json:"shard"`
	Dir   string `json:"dir"`
	// Objects and Bytes count every object read (watermark, cursor,
	// segments, tail objects).
	Objects int     `json:"objects"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// Base and BaseSegment are the bucket's reclaim watermark: the store's
	// reclaim.json.
	Base        uint64 `json:"base"`
	BaseSegment uint64 `json:"base_segment"`
	// FirstSeq..LastSeq are the events the store holds (0..0 when none).
	FirstSeq uint64 `json:"first_sequence"`
	LastSeq  uint64 `json:"last_sequence"`
	// Segments are the segment files written; SegmentBytes their size.
	Segments     int   `json:"segments"`
	SegmentBytes int64 `json:"segment_bytes"`
	// OrphanSegments and TailBelowWatermark count objects at or below the
	// watermark, which a cold load skips (a reclaim's deletes still to come).
	OrphanSegments     int `json:"orphan_segments"`
	TailBelowWatermark int `json:"tail_objects_below_watermark"`
	// TailObjects contributed events; TailSuperseded held only events
	// already recovered (from a segment or a wider tail object);
	// TailRecords counts the events recovered from tail objects.
	TailObjects    int `json:"tail_objects"`
	TailSuperseded int `json:"tail_objects_superseded"`
	TailRecords    int `json:"tail_records"`
	// Unparsed lists keys in the shard's key space that were not understood
	// and therefore never read.
	Unparsed []string `json:"unparsed_keys"`
	// NextSegment is the id of the store's empty active segment: above every
	// segment id the bucket has seen (bucket ids: a restore keeps them).
	NextSegment uint64 `json:"next_segment"`
	// FillerSegments counts the empty segment files a partial restore
	// created for ids between its prefix and NextSegment (see Options).
	FillerSegments int             `json:"filler_segments"`
	ShippedThrough uint64          `json:"shipped_through"`
	Consumers      int             `json:"consumers"`
	ClampedCursors []ClampedCursor `json:"clamped_cursors"`
	// ConsumersDeleted lists consumers the restored frames still carry but
	// the cursor object, written after those frames, no longer lists: their
	// owner deleted them, and the restore deletes them too.
	ConsumersDeleted []string `json:"consumers_deleted"`
	// CursorDamaged reports that the cursor object failed verification or
	// did not decode: the restore went on without it (consumers from the
	// frames alone, no shipped_through check; ShippedThrough is 0).
	CursorDamaged bool `json:"cursor_damaged"`
	// DamagedTails lists the tail objects that failed verification and were
	// skipped because they held only events beyond the cursor object's
	// shipped_through and nothing followed them (damagedtail.go).
	DamagedTails []string `json:"damaged_tails_skipped"`
	// DamagedSegments lists the segment objects that failed verification
	// and were passed over: the last one listed, whose events the tail
	// objects hold up to the cursor object's shipped_through, or one that
	// held no event (damagedseg.go).
	DamagedSegments []string `json:"damaged_segments_skipped"`
	// WatermarkAhead is set (to the reason) when AllowWatermarkAhead let a
	// restore take a watermark the bucket's objects do not support.
	WatermarkAhead string `json:"watermark_ahead,omitempty"`
	// Gaps lists the holes AllowPartial stepped over (or, with AllowPartial,
	// the shortfall below shipped_through is in Short).
	Gaps     []*GapError `json:"gaps"`
	Short    *ShortError `json:"short,omitempty"`
	Empty    bool        `json:"empty"`
	Attempts int         `json:"attempts"`
	// Lazy is set by a lazy hydrate (Options.Lazy).
	Lazy   *LazyReport `json:"lazy,omitempty"`
	Fenced             // zombie_objects and the lineage followed (lineage.go)
}
