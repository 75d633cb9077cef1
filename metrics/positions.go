package metrics

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Positions is where a shard's log stands, read at scrape time.
type Positions struct {
	Tip, ShippedThrough, Base uint64
}

// positionCollector exports tip, shipped_through and base: one series each
// per open shard, read when scraped so they are never stale.
type positionCollector struct {
	tip, shipped, base *prometheus.Desc
	mu                 sync.Mutex
	shards             map[string]func() (Positions, bool)
}

func newPositionCollector() *positionCollector {
	d := func(name string) *prometheus.Desc {
		return prometheus.NewDesc("bucketlog_"+name, helps[name], []string{"shard"}, nil)
	}
	return &positionCollector{tip: d("tip"), shipped: d("shipped_through"), base: d("base"),
		shards: map[string]func() (Positions, bool){}}
}

func (c *positionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tip
	ch <- c.shipped
	ch <- c.base
}

func (c *positionCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fns := maps.Clone(c.shards)
	c.mu.Unlock()
	for shard, state := range fns {
		p, ok := state()
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.tip, prometheus.GaugeValue, float64(p.Tip), shard)
		ch <- prometheus.MustNewConstMetric(c.shipped, prometheus.GaugeValue, float64(p.ShippedThrough), shard)
		ch <- prometheus.MustNewConstMetric(c.base, prometheus.GaugeValue, float64(p.Base), shard)
	}
}

func (c *positionCollector) forget(shard string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.shards, shard)
}

// WatchPositions makes tip, shipped_through and base report this shard
// (state's false: nothing to report at this scrape). Forget removes them.
func (m *Shard) WatchPositions(state func() (Positions, bool)) {
	m.f.positions.mu.Lock()
	defer m.f.positions.mu.Unlock()
	m.f.positions.shards[m.shard] = state
}
