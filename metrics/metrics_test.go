package metrics_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
)

// Every series of Names is registered up front (consumer_lag exists per
// live consumer only), and nothing else is.
func TestRegisteredFamiliesAreNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.WatchLag(func() (uint64, map[string]uint64) { return 5, map[string]uint64{"c": 2} })
	m.WatchPositions(func() (metrics.Positions, bool) { return metrics.Positions{Tip: 5, ShippedThrough: 3, Base: 1}, true })
	m.WatchRemote(1, func() (localseg.RemoteStats, bool) { return localseg.RemoteStats{}, true })
	defer m.Forget()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, strings.TrimPrefix(mf.GetName(), "bucketlog_"))
	}
	want := slices.Clone(metrics.Names)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("registered %v\nwant %v", got, want)
	}
	// A second shard on the same registerer shares the families.
	if _, err := metrics.New(reg, 1); err != nil {
		t.Fatal(err)
	}
}

func TestAnotherOwnersFamiliesRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "bucketlog", Name: "tail_batches_total", Help: "Tail objects written to the bucket."}, []string{"shard"}))
	if _, err := metrics.New(reg, 0); !errors.Is(err, metrics.ErrRegistered) {
		t.Fatalf("families registered by another owner: %v", err)
	}
}
