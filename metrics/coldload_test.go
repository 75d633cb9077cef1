package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bucketlog/bucketlog/metrics"
)

// TestColdLoadSetsZombieObjects: a cold load adds its tail counts and sets
// bucketlog_zombie_objects to what it skipped (the last cold load's count,
// not a running total).
func TestColdLoadSetsZombieObjects(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry(), 0)
	if err != nil {
		t.Fatal(err)
	}
	m.ColdLoad(5, 2, 3, 2, 4)
	m.ColdLoad(1, 0, 1, 1, 1)
	if z, r, s := testutil.ToFloat64(m.ZombieObjects), testutil.ToFloat64(m.TailRecoveredRecords), testutil.ToFloat64(m.TailObjectsSuperseded); z != 1 || r != 6 || s != 2 {
		t.Fatalf("zombie objects %v, recovered %v, superseded %v", z, r, s)
	}
	if d := testutil.ToFloat64(m.DamagedTails); d != 1 {
		t.Fatalf("damaged tails skipped %v, want the last cold load's 1", d)
	}
	if d := testutil.ToFloat64(m.DamagedSegments); d != 1 {
		t.Fatalf("damaged segments skipped %v, want the last cold load's 1", d)
	}
}
