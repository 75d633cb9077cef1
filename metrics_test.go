package bucketlog

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gather returns every bucketlog_ series as "name{labels}" → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(labels)
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func families(series map[string]float64) map[string]bool {
	f := map[string]bool{}
	for k := range series {
		f[k[:strings.IndexByte(k, '{')]] = true
	}
	return f
}

func TestEveryMetricExistsAtZeroFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: memBucket(t), NoBackground: true, Registerer: reg})
	defer l.Close()
	series := gather(t, reg)
	fam := families(series)
	for _, name := range MetricNames {
		if name == "consumer_lag" {
			continue // exists per live consumer only
		}
		if !fam["bucketlog_"+name] {
			t.Errorf("metric bucketlog_%s missing at start", name)
		}
	}
	for k, v := range series {
		if !strings.Contains(k, "shard=0") {
			t.Errorf("series %s lacks the shard label", k)
		}
		// Open itself talks to the bucket and fsyncs; the base of an empty
		// store is 1 (its first retained sequence); everything else is 0.
		if k == "bucketlog_base{shard=0}" {
			if v != 1 {
				t.Errorf("series %s = %v at start, want 1", k, v)
			}
			continue
		}
		if v != 0 && !strings.HasPrefix(k, "bucketlog_bucket_") && !strings.HasPrefix(k, "bucketlog_fsync_seconds") {
			t.Errorf("series %s = %v at start, want 0", k, v)
		}
	}
	for _, op := range metrics.Operations {
		for _, out := range metrics.Outcomes {
			k := fmt.Sprintf("bucketlog_eventlog_ops_total{operation=%s,outcome=%s,shard=0}", op, out)
			if _, ok := series[k]; !ok {
				t.Errorf("series %s missing at start", k)
			}
		}
	}
}

func TestLifecycleMovesMetrics(t *testing.T) {
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	b := s3Bucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Registerer: reg, SegmentMaxBytes: 1024})
	defer l.Close()
	for i := 1; i <= 60; i++ {
		if _, err := l.Append(ctx, ev("5", i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Append(ctx, ev("bad id!", 1)) // invalid input
	if _, err := l.Pull(ctx, "proj", 10); err != nil {
		t.Fatal(err)
	}
	l.Ack(ctx, "proj", 55)
	l.Ack(ctx, "proj", 9999) // beyond the tip: invalid state
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.GC(ctx, GCRequest{}); err != nil {
		t.Fatal(err)
	}
	// Ship again after GC: the tail objects below the new watermark go.
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	s := gather(t, reg)
	moved := []string{
		"bucketlog_eventlog_ops_total{operation=append,outcome=ok,shard=0}",
		"bucketlog_eventlog_ops_total{operation=append,outcome=invalid_input,shard=0}",
		"bucketlog_eventlog_ops_total{operation=ack,outcome=invalid_state,shard=0}",
		"bucketlog_eventlog_ops_total{operation=pull,outcome=ok,shard=0}",
		"bucketlog_append_seconds{shard=0}",
		"bucketlog_fsync_seconds{shard=0}",
		"bucketlog_tail_batches_total{shard=0}",
		"bucketlog_tail_records_total{shard=0}",
		"bucketlog_tail_bytes_total{shard=0}",
		"bucketlog_segments_uploaded_total{shard=0}",
		"bucketlog_gc_ops_total{outcome=reclaimed,shard=0}",
		"bucketlog_bucket_requests_total{operation=put,result=ok,shard=0}",
		"bucketlog_bucket_requests_total{operation=list,result=ok,shard=0}",
		"bucketlog_bucket_requests_total{operation=cas,result=ok,shard=0}",
		"bucketlog_bucket_bytes_total{direction=up,shard=0}",
		"bucketlog_consumer_lag{consumer=proj,shard=0}",
	}
	for _, k := range moved {
		if s[k] <= 0 {
			t.Errorf("%s = %v after the lifecycle, want > 0", k, s[k])
		}
	}
	// RED control: what the lifecycle never drove stays at zero.
	for _, k := range []string{
		"bucketlog_second_writer_detected_total{shard=0}",
		"bucketlog_tail_replication_failed_total{shard=0}",
		"bucketlog_gc_ops_total{outcome=error,shard=0}",
		"bucketlog_eventlog_ops_total{operation=consumer_delete,outcome=ok,shard=0}",
	} {
		if v, ok := s[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", k, v, ok)
		}
	}
	if got := s["bucketlog_consumer_lag{consumer=proj,shard=0}"]; got != 5 {
		t.Errorf("consumer_lag = %v, want 5", got)
	}
}

// TestREADMEListsExactlyTheMetrics keeps the README's metrics reference and
// the code in step.
func TestREADMEListsExactlyTheMetrics(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	inReadme := map[string]bool{}
	for _, m := range regexp.MustCompile("`bucketlog_([a-z_]+)").FindAllStringSubmatch(string(data), -1) {
		inReadme[m[1]] = true
	}
	for _, name := range MetricNames {
		if !inReadme[name] {
			t.Errorf("README does not list bucketlog_%s", name)
		}
		delete(inReadme, name)
	}
	for name := range inReadme {
		t.Errorf("README lists bucketlog_%s, which the engine does not export", name)
	}
}
