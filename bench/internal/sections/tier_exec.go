package sections

import (
	"context"
	"fmt"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
)

// tierExecRows reopens the filled shard over a client that waits
// latencyDelay before every request, with a remote cache too small to hold
// a segment (every read of an evicted segment is a miss), and times
// per-execution reads of executions spread over the evicted segments: p50,
// p99, and the GETs each made against the segments that hold the
// execution (the fewest a read can make without ranged GETs).
func tierExecRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator, ts tierShard) []harness.Row {
	const section = "tier"
	name := fmt.Sprintf("per-execution read of %d events in evicted segments, cache miss, %v per request", tierBlock, latencyDelay)
	fail := func(err error) []harness.Row { return []harness.Row{harness.Failed(section, name+"/p50", "ms", err)} }
	bk, tr, err := emu.OpenDelayed(ctx, ts.bucket, latencyDelay)
	if err != nil {
		return fail(err)
	}
	defer bk.Close()
	t0 := time.Now()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: ts.dir, Bucket: bk, SegmentMaxBytes: ts.segBytes, NoBackground: true, Logger: warnLogger(),
		LocalRetentionBytes: ts.segBytes, RemoteCacheBytes: 1})
	if err != nil {
		return fail(fmt.Errorf("reopen over the delayed client: %w", err))
	}
	defer l.Close()
	env.Logf("tier: reopened over the %v client in %v", latencyDelay, time.Since(t0).Round(time.Millisecond))
	// The executions wholly in evicted segments.
	nExec := int(ts.evLast) / tierBlock
	if nExec < 1 {
		return fail(fmt.Errorf("no execution lies wholly in an evicted segment"))
	}
	// Build the per-execution index first (from the index files the
	// eviction left on disk), with a read of an execution in a local
	// segment: it must fetch nothing.
	h0 := tr.Methods()
	f0 := l.Store().RemoteStats().Fetches
	local := int(ts.evLast+tierBlock-1) / tierBlock // its first event is past every evicted segment
	if local >= int(ts.tip)/tierBlock {
		return fail(fmt.Errorf("no execution lies wholly in the local segment (evicted through %d, tip %d)", ts.evLast, ts.tip))
	}
	if _, err := l.ReadExecution(ctx, tierExecID(local), 0, 2*tierBlock); err != nil {
		return fail(err)
	}
	warmGets := subMethods(tr.Methods(), h0)["GET"]
	if warmFetches := l.Store().RemoteStats().Fetches - f0; warmGets != 0 || warmFetches != 0 {
		return fail(fmt.Errorf("building the index from the evicted segments' index files made %d GETs, %d fetches", warmGets, warmFetches))
	}
	var lats []time.Duration
	var gets, over []float64
	var extra, hits int64
	execs := tierExecSample(ts, nExec)
	reads := len(execs)
	var twoSeg, twoSegGets int
	var twoLats []time.Duration
	for _, x := range execs {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		want := tierSegmentsOf(ts, uint64(x*tierBlock+1), uint64((x+1)*tierBlock))
		st0 := l.Store().RemoteStats()
		h := tr.Methods()
		t := time.Now()
		res, err := l.ReadExecution(ctx, tierExecID(x), 0, 2*tierBlock)
		el := time.Since(t)
		if err != nil {
			return fail(fmt.Errorf("execution %d: %w", x, err))
		}
		if err := tierCheckExec(res.Page, x); err != nil {
			return fail(err)
		}
		g := subMethods(tr.Methods(), h)["GET"]
		st := l.Store().RemoteStats()
		hits += st.CacheHits - st0.CacheHits
		lats, gets, over = append(lats, el), append(gets, float64(g)), append(over, float64(g-int64(want)))
		if g != int64(want) {
			extra++
		}
		if want == 2 {
			twoSeg++
			twoSegGets += int(g)
			twoLats = append(twoLats, el)
		}
	}
	p50, p99 := percentile(lats, 0.5), percentile(lats, 0.99)
	note := fmt.Sprintf("%d reads of %d executions (each %d events of %d B, in 1 or 2 of %d evicted %s segments), remote cache 1 B (nothing cached: %d hits); index built before timing (from the index files eviction leaves: 0 GETs)",
		reads, nExec, tierBlock, tierPayload, len(ts.evKeys), mibLabel(ts.segBytes), hits)
	return []harness.Row{
		harness.Measured(section, name+"/p50", "read latency p50", "ms", []float64{ms(p50)}, note),
		harness.Measured(section, name+"/p99", "read latency p99", "ms", []float64{ms(p99)}, "whole-segment GETs (ranged GETs not built): 20 ms + the segment's transfer and verification"),
		harness.Measured(section, name+"/GETs per read", "HTTP GETs per read (median)", "GETs", gets, fmt.Sprintf(
			"max %.0f; reads whose GETs were not the evicted segments holding the execution: %d of %d (median excess %.0f); %d reads of executions in two segments made %d GETs (their p50 %.1f ms)",
			maxOf(gets), extra, reads, harness.Median(over), twoSeg, twoSegGets, ms(percentile(twoLats, 0.5)))),
	}
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// tierSegmentsOf counts the evicted segments holding sequences first–last.
func tierSegmentsOf(ts tierShard, first, last uint64) int {
	n := 0
	for _, s := range ts.segs {
		if ts.evicted[s.ID] && s.Events > 0 && s.FirstSeq <= last && s.LastSeq >= first {
			n++
		}
	}
	return n
}

// tierCheckExec checks a per-execution page: execution x's tierBlock
// events, in order, its own id, whole payloads.
func tierCheckExec(p bucketlog.Page, x int) error {
	if len(p.Records) != tierBlock {
		return fmt.Errorf("execution %d: %d records, want %d", x, len(p.Records), tierBlock)
	}
	for i, r := range p.Records {
		if want := uint64(x*tierBlock + i + 1); r.Seq != want || r.ExecutionID != tierExecID(x) || len(r.Payload) != tierPayload {
			return fmt.Errorf("execution %d record %d: seq %d (want %d), %q, %d bytes", x, i, r.Seq, want, r.ExecutionID, len(r.Payload))
		}
	}
	return nil
}

// tierExecSample picks the executions to read: tierExecReads spread over
// the nExec executions wholly in evicted segments (a stride coprime with
// most counts, so consecutive reads land in different segments), then up
// to 10 that straddle two evicted segments, if they are not in already.
func tierExecSample(ts tierShard, nExec int) []int {
	seen := map[int]bool{}
	var out []int
	add := func(x int) {
		if x >= 0 && x < nExec && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	for i := range tierExecReads {
		add((i*7919 + 13) % nExec)
	}
	straddlers := 0
	for _, s := range ts.segs {
		if straddlers == 10 || !ts.evicted[s.ID] || s.Events == 0 {
			continue
		}
		if x := int(s.LastSeq) / tierBlock; int(s.LastSeq)%tierBlock != 0 && tierSegmentsOf(ts, uint64(x*tierBlock+1), uint64((x+1)*tierBlock)) == 2 {
			add(x)
			straddlers++
		}
	}
	return out
}
