package bucketlog

import (
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/prometheus/client_golang/prometheus"
)

// The position gauges follow the log at scrape time (tip on append,
// shipped_through on shipping) and every bucket request is timed by
// operation and result, beside its count.
func TestPositionGaugesAndBucketLatency(t *testing.T) {
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: s3Bucket(t), NoBackground: true, Registerer: reg})
	defer l.Close()
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, ev("5", i)); err != nil {
			t.Fatal(err)
		}
	}
	s := gather(t, reg)
	if s["bucketlog_tip{shard=0}"] != 3 || s["bucketlog_shipped_through{shard=0}"] != 0 || s["bucketlog_base{shard=0}"] != 1 {
		t.Fatalf("positions before shipping: tip %v shipped %v base %v", s["bucketlog_tip{shard=0}"], s["bucketlog_shipped_through{shard=0}"], s["bucketlog_base{shard=0}"])
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	s = gather(t, reg)
	if s["bucketlog_shipped_through{shard=0}"] != 3 {
		t.Fatalf("shipped_through after shipping: %v", s["bucketlog_shipped_through{shard=0}"])
	}
	for _, k := range []string{"operation=put,result=ok", "operation=list,result=ok"} {
		count := s["bucketlog_bucket_requests_total{"+k+",shard=0}"]
		timed := s["bucketlog_bucket_request_seconds{"+k+",shard=0}"]
		if count == 0 || timed != count {
			t.Errorf("%s: %v requests counted, %v timed", k, count, timed)
		}
	}
}

// oldest_unreplicated_age_seconds and unshipped_bytes rise while the bucket refuses the tail
// and falls back to 0 once it holds every event.
func TestOldestUnreplicatedAgeGauge(t *testing.T) {
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	fb, b := s3FaultBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, TailInterval: 20 * time.Millisecond, Registerer: reg, Logger: quiet()})
	defer l.Close()
	rule := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse})
	if _, err := l.Append(ctx, ev("5", 1)); err != nil {
		t.Fatal(err)
	}
	const k = "bucketlog_oldest_unreplicated_age_seconds{shard=0}"
	const bytes = "bucketlog_unshipped_bytes{shard=0}"
	waitGauge(t, reg, k, "above 0.1 s with the bucket refusing", func(v float64) bool { return v > 0.1 })
	waitGauge(t, reg, bytes, "the size of the unshipped frame", func(v float64) bool { return v > 0 })
	if st := l.Status(); st.UnshippedBytes <= 0 || st.Unshipped != 1 {
		t.Fatalf("status with one event unshipped: %+v", st)
	}
	fb.Remove(rule)
	waitGauge(t, reg, k, "0 once shipped", func(v float64) bool { return v == 0 })
	waitGauge(t, reg, bytes, "0 once shipped", func(v float64) bool { return v == 0 })
}

func waitGauge(t *testing.T, reg *prometheus.Registry, key, what string, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v := gather(t, reg)[key]
		if ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never %s: %v", key, what, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
