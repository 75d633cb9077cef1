package bucketlog

import (
	"errors"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// MetricNames lists every metric the engine exports (SPEC §9), without the
// bucketlog_ prefix. The README's metrics reference is checked against it.
var MetricNames = []string{
	"eventlog_ops_total", "append_seconds", "fsync_seconds",
	"tail_batches_total", "tail_records_total", "tail_bytes_total", "tail_replication_failed_total",
	"tail_recovered_records_total", "tail_objects_superseded_total", "tail_objects_reclaimed_total",
	"tail_reclaim_bytes_total", "tail_reclaim_failed_total", "tail_objects_retained", "tail_objects_unparsed",
	"segments_uploaded_total", "second_writer_detected_total", "gc_ops_total",
	"bucket_requests_total", "bucket_bytes_total", "oldest_unsealed_age_seconds",
	"oldest_unreplicated_age_seconds", "unshipped_bytes", "consumer_lag",
}

// Label values are fixed lists created at start, so every series exists at
// zero from the first scrape.
var (
	opOperations = []string{"append", "scan", "read", "pull", "ack", "consumer_delete"}
	opOutcomes   = []string{"ok", "invalid_input", "invalid_state", "not_owner", "storage"}
	gcOutcomes   = []string{"reclaimed", "noop", "error"}
	bucketOps    = []blobtier.Op{blobtier.OpPut, blobtier.OpGet, blobtier.OpList, blobtier.OpDelete, blobtier.OpStat, blobtier.OpCAS}
	bucketRes    = []blobtier.Result{blobtier.ResultOK, blobtier.ResultNotFound, blobtier.ResultPrecondition, blobtier.ResultError}
)

// collectors are the metric families, shared by every shard opened against
// one Registerer (each Open adds its shard's label values).
type collectors struct {
	ops            *prometheus.CounterVec
	appendSeconds  *prometheus.HistogramVec
	fsyncSeconds   *prometheus.HistogramVec
	counters       map[string]*prometheus.CounterVec // shard-only counters by name
	gauges         map[string]*prometheus.GaugeVec   // shard-only gauges by name
	gcOps          *prometheus.CounterVec
	bucketRequests *prometheus.CounterVec
	bucketBytes    *prometheus.CounterVec
	consumerLag    *lagCollector
}

var shardCounterNames = []string{
	"tail_batches_total", "tail_records_total", "tail_bytes_total", "tail_replication_failed_total",
	"tail_recovered_records_total", "tail_objects_superseded_total", "tail_objects_reclaimed_total",
	"tail_reclaim_bytes_total", "tail_reclaim_failed_total", "segments_uploaded_total",
	"second_writer_detected_total",
}

var shardGaugeNames = []string{
	"tail_objects_retained", "tail_objects_unparsed", "oldest_unsealed_age_seconds",
	"oldest_unreplicated_age_seconds", "unshipped_bytes",
}

var helps = map[string]string{
	"eventlog_ops_total":              "Event log operations by operation and outcome.",
	"append_seconds":                  "Latency of appends, from call to durable acknowledgement.",
	"fsync_seconds":                   "Latency of each data fsync of the segment store.",
	"tail_batches_total":              "Tail objects written to the bucket.",
	"tail_records_total":              "Events shipped in tail objects.",
	"tail_bytes_total":                "Bytes shipped in tail objects.",
	"tail_replication_failed_total":   "Tail object puts that failed (the next tick re-ships the same events).",
	"tail_recovered_records_total":    "Events recovered from tail objects by a cold load.",
	"tail_objects_superseded_total":   "Tail objects found redundant with a sealed segment during a cold load.",
	"tail_objects_reclaimed_total":    "Tail objects deleted because a durable segment covers them.",
	"tail_reclaim_bytes_total":        "Bytes of tail objects deleted (sized before the delete).",
	"tail_reclaim_failed_total":       "Tail object deletes that failed.",
	"tail_objects_retained":           "Tail objects left in the bucket after the last cleanup pass.",
	"tail_objects_unparsed":           "Keys under the tail key space that do not parse (never deleted).",
	"segments_uploaded_total":         "Sealed segments made durable in the bucket.",
	"second_writer_detected_total":    "Different objects found under this shard's write-once keys.",
	"gc_ops_total":                    "Reclaim passes by outcome.",
	"bucket_requests_total":           "Bucket requests by operation and result.",
	"bucket_bytes_total":              "Bytes moved to (up) and from (down) the bucket.",
	"oldest_unsealed_age_seconds":     "Age of the active segment's oldest frame (0 when empty).",
	"oldest_unreplicated_age_seconds": "Age of the oldest event not yet in the bucket (0 when none).",
	"unshipped_bytes":                 "Durable local bytes not yet in the bucket.",
	"consumer_lag":                    "Events between the tip and a live consumer's cursor.",
}

func fq(name string) prometheus.Opts {
	return prometheus.Opts{Namespace: "bucketlog", Name: name, Help: helps[name]}
}

func newCollectors() *collectors {
	c := &collectors{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts(fq("eventlog_ops_total")), []string{"shard", "operation", "outcome"}),
		appendSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "bucketlog", Name: "append_seconds", Help: helps["append_seconds"],
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"shard"}),
		fsyncSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "bucketlog", Name: "fsync_seconds", Help: helps["fsync_seconds"],
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"shard"}),
		counters:       map[string]*prometheus.CounterVec{},
		gauges:         map[string]*prometheus.GaugeVec{},
		gcOps:          prometheus.NewCounterVec(prometheus.CounterOpts(fq("gc_ops_total")), []string{"shard", "outcome"}),
		bucketRequests: prometheus.NewCounterVec(prometheus.CounterOpts(fq("bucket_requests_total")), []string{"shard", "operation", "result"}),
		bucketBytes:    prometheus.NewCounterVec(prometheus.CounterOpts(fq("bucket_bytes_total")), []string{"shard", "direction"}),
		consumerLag: &lagCollector{
			desc:   prometheus.NewDesc("bucketlog_consumer_lag", helps["consumer_lag"], []string{"shard", "consumer"}, nil),
			shards: map[string]func() (uint64, map[string]uint64){},
		},
	}
	for _, n := range shardCounterNames {
		c.counters[n] = prometheus.NewCounterVec(prometheus.CounterOpts(fq(n)), []string{"shard"})
	}
	for _, n := range shardGaugeNames {
		c.gauges[n] = prometheus.NewGaugeVec(prometheus.GaugeOpts(fq(n)), []string{"shard"})
	}
	return c
}

var (
	registryMu sync.Mutex
	registries = map[prometheus.Registerer]*collectors{}
)

// collectorsFor returns the families registered on reg, registering them on
// first use, so several shards opened in one process share one set.
func collectorsFor(reg prometheus.Registerer) (*collectors, error) {
	if reg == nil {
		return newCollectors(), nil
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if c, ok := registries[reg]; ok {
		return c, nil
	}
	c := newCollectors()
	all := []prometheus.Collector{c.ops, c.appendSeconds, c.fsyncSeconds, c.gcOps, c.bucketRequests, c.bucketBytes, c.consumerLag}
	for _, n := range shardCounterNames {
		all = append(all, c.counters[n])
	}
	for _, n := range shardGaugeNames {
		all = append(all, c.gauges[n])
	}
	for _, col := range all {
		if err := reg.Register(col); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, usagef("metrics already registered on this registerer by another owner: %v", err)
			}
			return nil, err
		}
	}
	registries[reg] = c
	return c, nil
}

// metrics is one shard's handle on the families.
type metrics struct {
	c       *collectors
	shard   string
	ops     map[[2]string]prometheus.Counter
	append  prometheus.Observer
	fsync   prometheus.Observer
	counter map[string]prometheus.Counter
	gauge   map[string]prometheus.Gauge
	gc      map[string]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, shard int) (*metrics, error) {
	c, err := collectorsFor(reg)
	if err != nil {
		return nil, err
	}
	s := strconv.Itoa(shard)
	m := &metrics{
		c: c, shard: s,
		ops:     map[[2]string]prometheus.Counter{},
		append:  c.appendSeconds.WithLabelValues(s),
		fsync:   c.fsyncSeconds.WithLabelValues(s),
		counter: map[string]prometheus.Counter{},
		gauge:   map[string]prometheus.Gauge{},
		gc:      map[string]prometheus.Counter{},
	}
	for _, op := range opOperations {
		for _, out := range opOutcomes {
			m.ops[[2]string{op, out}] = c.ops.WithLabelValues(s, op, out)
		}
	}
	for _, n := range shardCounterNames {
		m.counter[n] = c.counters[n].WithLabelValues(s)
	}
	for _, n := range shardGaugeNames {
		m.gauge[n] = c.gauges[n].WithLabelValues(s)
	}
	for _, out := range gcOutcomes {
		m.gc[out] = c.gcOps.WithLabelValues(s, out)
	}
	for _, op := range bucketOps {
		for _, r := range bucketRes {
			c.bucketRequests.WithLabelValues(s, string(op), string(r))
		}
	}
	c.bucketBytes.WithLabelValues(s, "up")
	c.bucketBytes.WithLabelValues(s, "down")
	return m, nil
}

// op counts one operation by the class of its error.
func (m *metrics) op(operation string, err error) {
	outcome := "ok"
	switch Class(err) {
	case ClassOK, ClassNotInBucket:
	case ClassInvalidInput, ClassUsage:
		outcome = "invalid_input"
	case ClassInvalidState:
		outcome = "invalid_state"
	case ClassNotOwner:
		outcome = "not_owner"
	default:
		outcome = "storage"
	}
	if c, ok := m.ops[[2]string{operation, outcome}]; ok {
		c.Inc()
	}
}

func (m *metrics) add(name string, v float64) {
	if v > 0 {
		m.counter[name].Add(v)
	}
}

func (m *metrics) set(name string, v float64) { m.gauge[name].Set(v) }

// bucketObserver counts bucket requests (the decorator of SPEC §9).
func (m *metrics) bucketObserver() blobtier.Observer {
	return func(op blobtier.Op, res blobtier.Result, up, down int64) {
		m.c.bucketRequests.WithLabelValues(m.shard, string(op), string(res)).Inc()
		if up > 0 {
			m.c.bucketBytes.WithLabelValues(m.shard, "up").Add(float64(up))
		}
		if down > 0 {
			m.c.bucketBytes.WithLabelValues(m.shard, "down").Add(float64(down))
		}
	}
}

// watchLag makes consumer_lag report this shard's live consumers, read at
// scrape time so the figure is never stale.
func (m *metrics) watchLag(state func() (tip uint64, consumers map[string]uint64)) {
	m.c.consumerLag.mu.Lock()
	defer m.c.consumerLag.mu.Unlock()
	m.c.consumerLag.shards[m.shard] = state
}

// forget removes this shard's per-consumer series (Close).
func (m *metrics) forget() {
	m.c.consumerLag.mu.Lock()
	defer m.c.consumerLag.mu.Unlock()
	delete(m.c.consumerLag.shards, m.shard)
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

// storeObserver adapts the store's callbacks.
type storeObserver struct {
	m      *metrics
	sealed func(localseg.SegmentInfo)
}

func (o storeObserver) Fsync(d time.Duration) { o.m.fsync.Observe(d.Seconds()) }
func (o storeObserver) Sealed(info localseg.SegmentInfo) {
	if o.sealed != nil {
		o.sealed(info)
	}
}
