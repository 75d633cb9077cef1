// Package metrics holds the engine's Prometheus series as typed fields: one
// field per series, every label value created up front, so every series
// exists at zero from the first scrape and a misspelt series is a compile
// error rather than a panic at run time (the README's metric table).
// Shard is one shard's engine series; HTTP is a server's request series
// (no shard label), one per route pattern, method and status class, so a
// client's paths and methods never grow the label set.
package metrics

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/blobtier"
)

// Names lists every metric the engine exports (the README's metric table), without the
// bucketlog_ prefix, in the README's order.
var Names = []string{
	"eventlog_ops_total", "append_seconds", "fsync_seconds",
	"tail_batches_total", "tail_records_total", "tail_bytes_total", "tail_replication_failed_total", "cursor_write_failed_total",
	"tail_recovered_records_total", "tail_objects_superseded_total", "tail_objects_reclaimed_total",
	"tail_reclaim_bytes_total", "tail_reclaim_failed_total", "tail_objects_retained", "tail_objects_unparsed",
	"segments_uploaded_total", "second_writer_detected_total", "gc_ops_total",
	"index_objects_uploaded_total", "index_object_uploads_failed_total",
	"bucket_requests_total", "bucket_bytes_total", "oldest_unsealed_age_seconds",
	"oldest_unreplicated_age_seconds", "unshipped_bytes", "consumer_lag",
	"zombie_objects", "damaged_tails_skipped", "damaged_segments_skipped",
	"bucket_request_seconds", "tip", "shipped_through", "base",
	"fenced", "fenced_unpublished_records",
	// remoteNames (remote.go) follow.
}

func init() { Names = append(Names, remoteNames...) }

// Op is an operation of eventlog_ops_total.
type Op int

// The operations, in the order of Operations.
const (
	OpAppend Op = iota
	OpScan
	OpRead
	OpPull
	OpAck
	OpConsumerDelete
	numOps
)

// Outcome is an outcome of eventlog_ops_total.
type Outcome int

// The outcomes, in the order of Outcomes.
const (
	OutcomeOK Outcome = iota
	OutcomeInvalidInput
	OutcomeInvalidState
	OutcomeNotOwner
	OutcomeStorage
	numOutcomes
)

// Operations and Outcomes are the label values of eventlog_ops_total.
var (
	Operations = []string{"append", "scan", "read", "pull", "ack", "consumer_delete"}
	Outcomes   = []string{"ok", "invalid_input", "invalid_state", "not_owner", "storage"}
)

var (
	bucketOps = []blobtier.Op{blobtier.OpPut, blobtier.OpGet, blobtier.OpList, blobtier.OpDelete, blobtier.OpStat, blobtier.OpCAS}
	bucketRes = []blobtier.Result{blobtier.ResultOK, blobtier.ResultNotFound, blobtier.ResultPrecondition, blobtier.ResultError}
)

var helps = map[string]string{
	"eventlog_ops_total":                "Event log operations by operation and outcome.",
	"append_seconds":                    "Latency of appends, from call to durable acknowledgement.",
	"fsync_seconds":                     "Latency of each data fsync of the segment store.",
	"tail_batches_total":                "Tail objects written to the bucket.",
	"tail_records_total":                "Events shipped in tail objects.",
	"tail_bytes_total":                  "Bytes shipped in tail objects.",
	"tail_replication_failed_total":     "Tail object puts that failed (the next tick re-ships the same events).",
	"cursor_write_failed_total":         "Cursor object writes that failed (consumer cursors in the bucket lag until one succeeds).",
	"tail_recovered_records_total":      "Events recovered from tail objects by a cold load.",
	"tail_objects_superseded_total":     "Tail objects found redundant with a sealed segment during a cold load.",
	"tail_objects_reclaimed_total":      "Tail objects deleted because a durable segment covers them.",
	"tail_reclaim_bytes_total":          "Bytes of tail objects deleted (sized before the delete).",
	"tail_reclaim_failed_total":         "Tail object deletes that failed.",
	"tail_objects_retained":             "Tail objects left in the bucket after the last cleanup pass.",
	"tail_objects_unparsed":             "Keys under the tail key space that do not parse (never deleted).",
	"segments_uploaded_total":           "Sealed segments made durable in the bucket.",
	"second_writer_detected_total":      "Different objects found under this shard's write-once keys.",
	"index_objects_uploaded_total":      "Index objects put beside durable segment objects (derived; docs/FORMAT.md §6.10).",
	"index_object_uploads_failed_total": "Index object puts that failed or met another object under the key (retried while the segment is local; never a shipping failure).",
	"gc_ops_total":                      "Reclaim passes by outcome.",
	"bucket_requests_total":             "Bucket requests by operation and result.",
	"bucket_bytes_total":                "Bytes moved to (up) and from (down) the bucket.",
	"oldest_unsealed_age_seconds":       "Age of the active segment's oldest frame (0 when empty).",
	"oldest_unreplicated_age_seconds":   "Age of the oldest event not yet in the bucket (0 when none).",
	"unshipped_bytes":                   "Durable local bytes not yet in the bucket.",
	"consumer_lag":                      "Events between the tip and a live consumer's cursor.",
	"zombie_objects":                    "Objects the last cold load of this shard skipped under the lineage rule (a stale writer's).",
	"damaged_tails_skipped":             "Tail objects the last cold load of this shard skipped as damaged, holding only events beyond the cursor object's shipped_through.",
	"damaged_segments_skipped":          "Segment objects the last cold load of this shard passed over as damaged: the last one, whose events tail objects held through shipped_through, or ones that held no event.",
	"bucket_request_seconds":            "Latency of bucket requests by operation and result.",
	"tip":                               "The shard's last sequence (read at scrape time).",
	"shipped_through":                   "The contiguous end of what the bucket holds (read at scrape time; 0 without a bucket).",
	"base":                              "The lowest sequence the local store holds (read at scrape time).",
}

func opts(name string) prometheus.Opts {
	return prometheus.Opts{Namespace: "bucketlog", Name: name, Help: helps[name]}
}

// families are the metric families, shared by every shard opened against
// one Registerer (each shard adds its own label values).
type families struct {
	ops, gcOps, bucketRequests, bucketBytes *prometheus.CounterVec
	appendSeconds, fsyncSeconds             *prometheus.HistogramVec
	tailBatches, tailRecords, tailBytes     *prometheus.CounterVec
	tailReplicationFailed                   *prometheus.CounterVec
	cursorWriteFailed                       *prometheus.CounterVec
	tailRecoveredRecords                    *prometheus.CounterVec
	tailObjectsSuperseded                   *prometheus.CounterVec
	tailObjectsReclaimed, tailReclaimBytes  *prometheus.CounterVec
	tailReclaimFailed                       *prometheus.CounterVec
	segmentsUploaded, secondWriterDetected  *prometheus.CounterVec
	indexUploaded, indexUploadFailed        *prometheus.CounterVec
	tailObjectsRetained, tailObjectsUnparse *prometheus.GaugeVec
	oldestUnsealed, oldestUnreplicated      *prometheus.GaugeVec
	unshippedBytes                          *prometheus.GaugeVec
	fenced, fencedUnpublished               *prometheus.GaugeVec
	consumerLag                             *lagCollector
	zombieObjects                           *prometheus.GaugeVec
	damagedTails                            *prometheus.GaugeVec
	damagedSegments                         *prometheus.GaugeVec
	bucketSeconds                           *prometheus.HistogramVec
	positions                               *positionCollector
	remote                                  *remoteCollector
}

func newFamilies() *families {
	shard := []string{"shard"}
	counter := func(name string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts(opts(name)), shard)
	}
	gauge := func(name string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts(opts(name)), shard)
	}
	histogram := func(name string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "bucketlog", Name: name, Help: helps[name],
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, shard)
	}
	return &families{
		ops:                   prometheus.NewCounterVec(prometheus.CounterOpts(opts("eventlog_ops_total")), []string{"shard", "operation", "outcome"}),
		appendSeconds:         histogram("append_seconds"),
		fsyncSeconds:          histogram("fsync_seconds"),
		tailBatches:           counter("tail_batches_total"),
		tailRecords:           counter("tail_records_total"),
		tailBytes:             counter("tail_bytes_total"),
		tailReplicationFailed: counter("tail_replication_failed_total"),
		cursorWriteFailed:     counter("cursor_write_failed_total"),
		tailRecoveredRecords:  counter("tail_recovered_records_total"),
		tailObjectsSuperseded: counter("tail_objects_superseded_total"),
		tailObjectsReclaimed:  counter("tail_objects_reclaimed_total"),
		tailReclaimBytes:      counter("tail_reclaim_bytes_total"),
		tailReclaimFailed:     counter("tail_reclaim_failed_total"),
		tailObjectsRetained:   gauge("tail_objects_retained"),
		tailObjectsUnparse:    gauge("tail_objects_unparsed"),
		segmentsUploaded:      counter("segments_uploaded_total"),
		secondWriterDetected:  counter("second_writer_detected_total"),
		indexUploaded:         counter("index_objects_uploaded_total"),
		indexUploadFailed:     counter("index_object_uploads_failed_total"),
		gcOps:                 prometheus.NewCounterVec(prometheus.CounterOpts(opts("gc_ops_total")), []string{"shard", "outcome"}),
		bucketRequests:        prometheus.NewCounterVec(prometheus.CounterOpts(opts("bucket_requests_total")), []string{"shard", "operation", "result"}),
		bucketBytes:           prometheus.NewCounterVec(prometheus.CounterOpts(opts("bucket_bytes_total")), []string{"shard", "direction"}),
		oldestUnsealed:        gauge("oldest_unsealed_age_seconds"),
		oldestUnreplicated:    gauge("oldest_unreplicated_age_seconds"),
		unshippedBytes:        gauge("unshipped_bytes"),
		zombieObjects:         gauge("zombie_objects"),
		damagedTails:          gauge("damaged_tails_skipped"),
		damagedSegments:       gauge("damaged_segments_skipped"),
		fenced:                gauge("fenced"),
		fencedUnpublished:     gauge("fenced_unpublished_records"),
		consumerLag: &lagCollector{
			desc:   prometheus.NewDesc("bucketlog_consumer_lag", helps["consumer_lag"], []string{"shard", "consumer"}, nil),
			shards: map[string]func() (uint64, map[string]uint64){},
		},
		bucketSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "bucketlog", Name: "bucket_request_seconds", Help: helps["bucket_request_seconds"],
			Buckets: prometheus.ExponentialBuckets(500e-6, 2, 16),
		}, []string{"shard", "operation", "result"}),
		positions: newPositionCollector(),
		remote:    newRemoteCollector(),
	}
}

func (f *families) all() []prometheus.Collector {
	return []prometheus.Collector{
		f.ops, f.appendSeconds, f.fsyncSeconds, f.gcOps, f.bucketRequests, f.bucketBytes, f.consumerLag,
		f.tailBatches, f.tailRecords, f.tailBytes, f.tailReplicationFailed, f.cursorWriteFailed, f.tailRecoveredRecords,
		f.tailObjectsSuperseded, f.tailObjectsReclaimed, f.tailReclaimBytes, f.tailReclaimFailed,
		f.segmentsUploaded, f.secondWriterDetected, f.indexUploaded, f.indexUploadFailed,
		f.tailObjectsRetained, f.tailObjectsUnparse, f.oldestUnsealed, f.oldestUnreplicated, f.unshippedBytes,
		f.zombieObjects, f.damagedTails, f.damagedSegments,
		f.bucketSeconds, f.positions,
		f.fenced, f.fencedUnpublished, f.remote,
	}
}

// ErrRegistered is returned by New when the families are already registered
// on the Registerer by another owner.
var ErrRegistered = errors.New("metrics already registered on this registerer by another owner")

var (
	registryMu sync.Mutex
	registries = map[prometheus.Registerer]*families{}
)

// familiesFor returns the families registered on reg, registering them on
// first use, so several shards opened in one process share one set.
func familiesFor(reg prometheus.Registerer) (*families, error) {
	if reg == nil {
		return newFamilies(), nil
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if f, ok := registries[reg]; ok {
		return f, nil
	}
	f := newFamilies()
	for _, col := range f.all() {
		if err := reg.Register(col); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: %v", ErrRegistered, err)
			}
			return nil, err
		}
	}
	registries[reg] = f
	return f, nil
}

// Shard is one shard's handle on every series: one field per series, each
// created (at zero) by New.
type Shard struct {
	f     *families
	shard string
	ops   [numOps][numOutcomes]prometheus.Counter

	AppendSeconds prometheus.Observer
	FsyncSeconds  prometheus.Observer

	TailBatches           prometheus.Counter
	TailRecords           prometheus.Counter
	TailBytes             prometheus.Counter
	TailReplicationFailed prometheus.Counter
	CursorWriteFailed     prometheus.Counter
	TailRecoveredRecords  prometheus.Counter
	TailObjectsSuperseded prometheus.Counter
	TailObjectsReclaimed  prometheus.Counter
	TailReclaimBytes      prometheus.Counter
	TailReclaimFailed     prometheus.Counter
	SegmentsUploaded      prometheus.Counter
	SecondWriterDetected  prometheus.Counter
	IndexUploaded         prometheus.Counter
	IndexUploadFailed     prometheus.Counter

	TailObjectsRetained   prometheus.Gauge
	TailObjectsUnparsed   prometheus.Gauge
	OldestUnsealedAge     prometheus.Gauge
	OldestUnreplicatedAge prometheus.Gauge
	UnshippedBytes        prometheus.Gauge
	// ZombieObjects: the objects the last cold load skipped under the
	// lineage rule of writer fencing (coldload.Report.ZombieObjects).
	ZombieObjects prometheus.Gauge
	// DamagedTails: the damaged tail objects the last cold load skipped
	// (coldload.Report.DamagedTails).
	DamagedTails prometheus.Gauge
	// DamagedSegments: the damaged segment objects the last cold load
	// passed over (coldload.Report.DamagedSegments).
	DamagedSegments prometheus.Gauge
	// Fenced is 1 once a newer ownership epoch fenced this writer;
	// FencedUnpublished counts the records it acknowledged locally beyond
	// what the bucket holds (they stay in its directory).
	Fenced            prometheus.Gauge
	FencedUnpublished prometheus.Gauge

	GCReclaimed prometheus.Counter
	GCNoop      prometheus.Counter
	GCError     prometheus.Counter

	bucketRequests map[[2]string]prometheus.Counter
	bucketSeconds  map[[2]string]prometheus.Observer
	bytesUp        prometheus.Counter
	bytesDown      prometheus.Counter
}

// New returns shard's series on reg (nil: a private set nobody scrapes).
func New(reg prometheus.Registerer, shard int) (*Shard, error) {
	f, err := familiesFor(reg)
	if err != nil {
		return nil, err
	}
	s := strconv.Itoa(shard)
	m := &Shard{
		f: f, shard: s,
		AppendSeconds:         f.appendSeconds.WithLabelValues(s),
		FsyncSeconds:          f.fsyncSeconds.WithLabelValues(s),
		TailBatches:           f.tailBatches.WithLabelValues(s),
		TailRecords:           f.tailRecords.WithLabelValues(s),
		TailBytes:             f.tailBytes.WithLabelValues(s),
		TailReplicationFailed: f.tailReplicationFailed.WithLabelValues(s),
		CursorWriteFailed:     f.cursorWriteFailed.WithLabelValues(s),
		TailRecoveredRecords:  f.tailRecoveredRecords.WithLabelValues(s),
		TailObjectsSuperseded: f.tailObjectsSuperseded.WithLabelValues(s),
		TailObjectsReclaimed:  f.tailObjectsReclaimed.WithLabelValues(s),
		TailReclaimBytes:      f.tailReclaimBytes.WithLabelValues(s),
		TailReclaimFailed:     f.tailReclaimFailed.WithLabelValues(s),
		SegmentsUploaded:      f.segmentsUploaded.WithLabelValues(s),
		SecondWriterDetected:  f.secondWriterDetected.WithLabelValues(s),
		IndexUploaded:         f.indexUploaded.WithLabelValues(s),
		IndexUploadFailed:     f.indexUploadFailed.WithLabelValues(s),
		TailObjectsRetained:   f.tailObjectsRetained.WithLabelValues(s),
		TailObjectsUnparsed:   f.tailObjectsUnparse.WithLabelValues(s),
		OldestUnsealedAge:     f.oldestUnsealed.WithLabelValues(s),
		OldestUnreplicatedAge: f.oldestUnreplicated.WithLabelValues(s),
		UnshippedBytes:        f.unshippedBytes.WithLabelValues(s),
		ZombieObjects:         f.zombieObjects.WithLabelValues(s),
		DamagedTails:          f.damagedTails.WithLabelValues(s),
		DamagedSegments:       f.damagedSegments.WithLabelValues(s),
		Fenced:                f.fenced.WithLabelValues(s),
		FencedUnpublished:     f.fencedUnpublished.WithLabelValues(s),
		GCReclaimed:           f.gcOps.WithLabelValues(s, "reclaimed"),
		GCNoop:                f.gcOps.WithLabelValues(s, "noop"),
		GCError:               f.gcOps.WithLabelValues(s, "error"),
		bucketRequests:        map[[2]string]prometheus.Counter{},
		bucketSeconds:         map[[2]string]prometheus.Observer{},
		bytesUp:               f.bucketBytes.WithLabelValues(s, "up"),
		bytesDown:             f.bucketBytes.WithLabelValues(s, "down"),
	}
	for op := range numOps {
		for out := range numOutcomes {
			m.ops[op][out] = f.ops.WithLabelValues(s, Operations[op], Outcomes[out])
		}
	}
	for _, op := range bucketOps {
		for _, r := range bucketRes {
			m.bucketRequests[[2]string{string(op), string(r)}] = f.bucketRequests.WithLabelValues(s, string(op), string(r))
			m.bucketSeconds[[2]string{string(op), string(r)}] = f.bucketSeconds.WithLabelValues(s, string(op), string(r))
		}
	}
	return m, nil
}

// ColdLoad records what a cold load of this shard found: events recovered
// from tail objects, tail objects superseded, zombie objects skipped, and
// damaged tail and segment objects skipped.
func (m *Shard) ColdLoad(tailRecords, tailSuperseded, zombies, damagedTails, damagedSegments int) {
	m.TailRecoveredRecords.Add(float64(tailRecords))
	m.TailObjectsSuperseded.Add(float64(tailSuperseded))
	m.ZombieObjects.Set(float64(zombies))
	m.DamagedTails.Set(float64(damagedTails))
	m.DamagedSegments.Set(float64(damagedSegments))
}

// Op counts one operation with its outcome.
func (m *Shard) Op(op Op, out Outcome) {
	if op >= 0 && op < numOps && out >= 0 && out < numOutcomes {
		m.ops[op][out].Inc()
	}
}

// BucketObserver counts and times bucket requests (a decorator of the
// bucket: blobtier.ObserveTimed).
func (m *Shard) BucketObserver() blobtier.TimedObserver {
	return func(op blobtier.Op, res blobtier.Result, up, down int64, d time.Duration) {
		k := [2]string{string(op), string(res)}
		c, ok := m.bucketRequests[k]
		if !ok {
			c = m.f.bucketRequests.WithLabelValues(m.shard, k[0], k[1])
		}
		c.Inc()
		h, ok := m.bucketSeconds[k]
		if !ok {
			h = m.f.bucketSeconds.WithLabelValues(m.shard, k[0], k[1])
		}
		h.Observe(d.Seconds())
		if up > 0 {
			m.bytesUp.Add(float64(up))
		}
		if down > 0 {
			m.bytesDown.Add(float64(down))
		}
	}
}

// WatchLag makes consumer_lag report this shard's live consumers, read at
// scrape time so the figure is never stale.
func (m *Shard) WatchLag(state func() (tip uint64, consumers map[string]uint64)) {
	m.f.consumerLag.mu.Lock()
	defer m.f.consumerLag.mu.Unlock()
	m.f.consumerLag.shards[m.shard] = state
}

// Forget removes this shard's per-consumer series (Close).
func (m *Shard) Forget() {
	m.f.consumerLag.mu.Lock()
	defer m.f.consumerLag.mu.Unlock()
	delete(m.f.consumerLag.shards, m.shard)
	m.f.positions.forget(m.shard)
	m.f.remote.forget(m.shard)
}

// lagCollector exports consumer_lag: one series per live consumer of every
// open shard, computed when scraped.
type lagCollector struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	shards map[string]func() (uint64, map[string]uint64)
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fns := maps.Clone(c.shards)
	c.mu.Unlock()
	for shard, state := range fns {
		tip, consumers := state()
		for name, cur := range consumers {
			lag := uint64(0)
			if tip > cur {
				lag = tip - cur
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(lag), shard, name)
		}
	}
}
