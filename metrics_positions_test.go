package bucketlog

import (
	"testing"

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
