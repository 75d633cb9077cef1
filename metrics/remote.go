package metrics

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/localseg"
)

// remoteNames are the series of local retention (evicted segments and
// their reads from the bucket; localseg evict.go), read at scrape time.
var remoteNames = []string{
	"local_bytes", "local_overshoot_bytes", "evicted_segments", "evicted_bytes",
	"remote_reads_total", "remote_read_bytes_total", "remote_read_failures_total",
	"remote_cache_hits_total", "remote_cache_misses_total",
	"segments_healed_total", "corrupt_segments",
	"index_object_reads_total", "index_objects_used_total", "index_objects_refused_total",
}

var remoteHelps = map[string]string{
	"local_bytes":                 "Logical bytes of the shard's segment files on the local disk, the active one included (read at scrape time).",
	"local_overshoot_bytes":       "Bytes by which the local sealed segments exceed the local retention budget (segments not yet durable in the bucket stay).",
	"evicted_segments":            "Sealed segments moved off the local disk; their reads go to the bucket.",
	"evicted_bytes":               "Bytes of the evicted segments.",
	"remote_reads_total":          "Evicted segments fetched from the bucket and verified.",
	"remote_read_bytes_total":     "Bytes of evicted segments fetched from the bucket.",
	"remote_read_failures_total":  "Fetches of evicted segments that failed (the read answered a storage error).",
	"remote_cache_hits_total":     "Reads of evicted segments served from the in-memory cache.",
	"remote_cache_misses_total":   "Reads of evicted segments that had to fetch from the bucket.",
	"segments_healed_total":       "Corrupt local sealed segments replaced by their verified bucket copies (their reads go to the bucket).",
	"corrupt_segments":            "Local sealed segments found corrupt that no verified bucket copy replaced (reads of their events fail; the shard is not ready).",
	"index_object_reads_total":    "Index objects of evicted segments fetched from the bucket (instead of the segments, to locate their events).",
	"index_objects_used_total":    "Fetched index objects that describe their evicted segments exactly and were used.",
	"index_objects_refused_total": "Fetched index objects that do not describe their evicted segments (ignored: the segment was read instead).",
}

type remoteWatch struct {
	budget int64
	state  func() (localseg.RemoteStats, bool)
}

type remoteCollector struct {
	descs  map[string]*prometheus.Desc
	mu     sync.Mutex
	shards map[string]remoteWatch
}

func newRemoteCollector() *remoteCollector {
	c := &remoteCollector{descs: map[string]*prometheus.Desc{}, shards: map[string]remoteWatch{}}
	for _, n := range remoteNames {
		c.descs[n] = prometheus.NewDesc("bucketlog_"+n, remoteHelps[n], []string{"shard"}, nil)
	}
	return c
}

func (c *remoteCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, n := range remoteNames {
		ch <- c.descs[n]
	}
}

func (c *remoteCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ws := maps.Clone(c.shards)
	c.mu.Unlock()
	for shard, w := range ws {
		r, ok := w.state()
		if !ok {
			continue
		}
		over := int64(0)
		if w.budget > 0 {
			over = max(r.LocalSealed-w.budget, 0)
		}
		vals := map[string]float64{
			"local_bytes": float64(r.LocalBytes), "local_overshoot_bytes": float64(over),
			"evicted_segments": float64(r.Evicted), "evicted_bytes": float64(r.EvictedBytes),
			"remote_reads_total": float64(r.Fetches), "remote_read_bytes_total": float64(r.FetchBytes),
			"remote_read_failures_total": float64(r.FetchFailures),
			"remote_cache_hits_total":    float64(r.CacheHits), "remote_cache_misses_total": float64(r.CacheMisses),
			"segments_healed_total": float64(r.Healed), "corrupt_segments": float64(r.Corrupt),
			"index_object_reads_total": float64(r.IndexFetches), "index_objects_used_total": float64(r.IndexUsed),
			"index_objects_refused_total": float64(r.IndexRefused),
		}
		for _, n := range remoteNames {
			t := prometheus.GaugeValue
			if len(n) > 6 && n[len(n)-6:] == "_total" {
				t = prometheus.CounterValue
			}
			ch <- prometheus.MustNewConstMetric(c.descs[n], t, vals[n], shard)
		}
	}
}

// WatchRemote makes the local retention series report this shard (budget:
// the local retention bytes, 0 when unset). Forget removes them.
func (m *Shard) WatchRemote(budget int64, state func() (localseg.RemoteStats, bool)) {
	m.f.remote.mu.Lock()
	defer m.f.remote.mu.Unlock()
	m.f.remote.shards[m.shard] = remoteWatch{budget: budget, state: state}
}

func (c *remoteCollector) forget(shard string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.shards, shard)
}
