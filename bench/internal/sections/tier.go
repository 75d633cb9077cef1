package sections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	harness.Register(harness.Section{
		Name: "tier",
		Doc: "tiered reads (issue 16) from in-process gofakes3: a Scan of 64 MiB of evicted 4 MiB segments (16 MiB of 2 MiB with -quick; remote cache 2 segments, so every one is fetched) against plain GETs of the same objects; " +
			"then, with 20 ms injected per request, p50/p99 of per-execution reads that miss the cache and the GETs each made",
		Default: false,
		Order:   46,
		Run:     runTier,
	})
}

// Tier section sizes: events of tierPayload bytes, tierBlock consecutive
// events per execution (so an execution lives in one segment or two, and
// a per-execution read has a known set of segments to fetch).
const (
	tierPayload   = 1024
	tierBlock     = 64
	tierPage      = 4096
	tierExecReads = 60
)

// tierShard is the section's shard after its fill: its directory, bucket
// and the segments it evicted.
type tierShard struct {
	dir, bucket  string
	segBytes     int64
	segs         []localseg.SegmentInfo // every segment, ascending
	evicted      map[uint64]bool
	evKeys       []string // the evicted segments' object keys, ascending
	evBytes      int64
	evLast       uint64 // the last sequence in an evicted segment
	tip          uint64
	payloadBytes int64 // payload bytes through evLast
}

func tierExecID(i int) string { return fmt.Sprintf("tier-%06d", i) }

func runTier(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "tier"
	total, seg := int64(64<<20), int64(4<<20)
	if env.Quick {
		total, seg = 16<<20, 2<<20
	}
	emu, err := buckets.StartS3()
	if err != nil {
		return []harness.Row{harness.Failed(section, "gofakes3", "", err)}, nil
	}
	defer emu.Close()
	root, err := tempDir(env.WorkDir, "tier-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	t0 := time.Now()
	ts, l, bk, err := tierFill(ctx, env, emu, filepath.Join(root, "d"), total, seg)
	if err != nil {
		return []harness.Row{harness.Failed(section, "fill", "", err)}, nil
	}
	env.Logf("tier: %d segments of %s, %d evicted (%s, events 1–%d), tip %d, in %v", len(ts.segs), mibLabel(seg), len(ts.evKeys),
		mibLabel(ts.evBytes), ts.evLast, ts.tip, time.Since(t0).Round(time.Millisecond))
	// The scans read through a serving log (background work on, as
	// under serve): its sequential reads fetch the next segment ahead in
	// the background, which a NoBackground log does within the read.
	l.Close()
	if l, err = bucketlog.Open(ctx, bucketlog.Options{Dir: ts.dir, Bucket: bk, SegmentMaxBytes: seg, Logger: warnLogger(),
		LocalRetentionBytes: seg, RemoteCacheBytes: 2 * seg}); err != nil {
		bk.Close()
		return []harness.Row{harness.Failed(section, "reopen", "", err)}, nil
	}
	// One untimed scan: the open's transaction-window rebuild left the
	// newest evicted segments cached; after a scan every repetition
	// starts from the same cache.
	if _, _, err := tierScan(ctx, l, ts); err != nil {
		l.Close()
		bk.Close()
		return []harness.Row{harness.Failed(section, "warm-up scan", "", err)}, nil
	}
	rows := tierScanRows(ctx, env, emu, ts, l)
	l.Close()
	bk.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return append(rows, tierExecRows(ctx, env, emu, ts)...), nil
}

// tierFill fills a shard to total bytes of seg-byte segments and ships
// every sealed segment with a local budget of one segment (every sealed
// segment but the newest leaves the disk), and returns it open with a
// remote cache of two segments.
func tierFill(ctx context.Context, env *harness.Env, emu *buckets.Emulator, dir string, total, seg int64) (tierShard, *bucketlog.Log, blobtier.Bucket, error) {
	ts := tierShard{dir: dir, segBytes: seg, evicted: map[uint64]bool{}}
	name, err := emu.NewBucket("tier")
	if err != nil {
		return ts, nil, nil, err
	}
	ts.bucket = name
	bk, err := emu.Open(ctx, name)
	if err != nil {
		return ts, nil, nil, err
	}
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, Bucket: bk, SegmentMaxBytes: seg, NoBackground: true, Logger: warnLogger(),
		LocalRetentionBytes: seg, RemoteCacheBytes: 2 * seg})
	if err != nil {
		bk.Close()
		return ts, nil, nil, err
	}
	fail := func(err error) (tierShard, *bucketlog.Log, blobtier.Bucket, error) {
		l.Close()
		bk.Close()
		return ts, nil, nil, err
	}
	p := targets.MakePayload(tierPayload)
	evs := make([]bucketlog.Event, tierBlock)
	for x := 0; ; x++ {
		n, snap, err := localBytes(l)
		if err != nil {
			return fail(err)
		}
		// Stop past total with a few executions in the active segment
		// (the per-execution rows build the index with a read there).
		if act := snap.Segments[len(snap.Segments)-1]; n >= total && !act.Sealed && act.Events >= 8*tierBlock {
			break
		}
		for i := range evs {
			evs[i] = bucketlog.Event{ExecutionID: tierExecID(x), TransactionID: targets.TxnID(uint64(x*tierBlock + i + 1)), Payload: p.S}
		}
		r, err := l.AppendBatch(ctx, evs)
		if err != nil {
			return fail(err)
		}
		if want := uint64(x*tierBlock + 1); r.FirstSequence != want || r.Appended != tierBlock {
			return fail(fmt.Errorf("execution %d: appended %d from %d, want %d from %d", x, r.Appended, r.FirstSequence, tierBlock, want))
		}
		if x%64 == 63 { // ship as it grows, so eviction keeps the disk bounded
			if _, err := l.Ship(ctx, false); err != nil {
				return fail(err)
			}
		}
	}
	rep, err := l.Ship(ctx, false) // every sealed segment; the active one stays local
	if err != nil {
		return fail(err)
	}
	ts.tip = rep.Tip
	_, snap, err := localBytes(l)
	if err != nil {
		return fail(err)
	}
	ts.segs = snap.Segments
	for _, s := range ts.segs {
		if _, _, ok := l.Store().EvictedSegment(s.ID); ok {
			ts.evicted[s.ID] = true
			ts.evKeys = append(ts.evKeys, blobtier.SegmentKey(0, s.ID))
			ts.evBytes += s.Size
			ts.evLast = max(ts.evLast, s.LastSeq)
		}
	}
	st := l.Store().RemoteStats()
	if len(ts.evKeys) < 2 || len(ts.evKeys) != len(ts.segs)-st.LocalSegments || st.LocalSegments > 2 {
		return fail(fmt.Errorf("%d of %d segments evicted, %d local (%s): the budget should leave only the newest", len(ts.evKeys), len(ts.segs), st.LocalSegments, mibLabel(st.LocalBytes)))
	}
	ts.payloadBytes = int64(ts.evLast) * tierPayload
	return ts, l, bk, nil
}

// tierScan reads every evicted event through Log.Scan, checking each
// record's sequence, execution id and payload length; it returns the
// elapsed time and the segment fetches it made.
func tierScan(ctx context.Context, l *bucketlog.Log, ts tierShard) (time.Duration, int64, error) {
	before := l.Store().RemoteStats()
	t0 := time.Now()
	var after, payload uint64
	// The expected execution id, formatted once per block of tierBlock
	// records rather than per record: a Sprintf a record was a tenth of
	// a millisecond per MiB of the scan's timed loop (CPU profile), work
	// the plain GET it is compared with does not do.
	wantX, wantID := -1, ""
	for after < ts.evLast {
		p, err := l.Scan(ctx, after, tierPage)
		if err != nil {
			return 0, 0, err
		}
		if len(p.Records) == 0 {
			return 0, 0, fmt.Errorf("an empty page after %d (evicted through %d)", after, ts.evLast)
		}
		for _, r := range p.Records {
			if r.Seq != after+1 {
				return 0, 0, fmt.Errorf("record %d after %d", r.Seq, after)
			}
			if r.Seq > ts.evLast {
				break
			}
			if x := int(r.Seq-1) / tierBlock; x != wantX {
				wantX, wantID = x, tierExecID(x)
			}
			if r.ExecutionID != wantID || len(r.Payload) != tierPayload {
				return 0, 0, fmt.Errorf("record %d: execution %q, %d payload bytes; want %q, %d", r.Seq, r.ExecutionID, len(r.Payload), wantID, tierPayload)
			}
			payload += uint64(len(r.Payload))
			after = r.Seq
		}
	}
	el := time.Since(t0)
	if int64(payload) != ts.payloadBytes {
		return 0, 0, fmt.Errorf("scanned %d payload bytes, want %d", payload, ts.payloadBytes)
	}
	return el, l.Store().RemoteStats().Fetches - before.Fetches, nil
}

// tierGet reads keys with conc GETs in flight through get, checking the
// total against want.
func tierGet(ctx context.Context, get buckets.GetFunc, keys []string, conc int, want int64) (time.Duration, error) {
	sizes := make([]int64, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	t0 := time.Now()
	for i, k := range keys {
		g.Go(func() error {
			b, err := get(gctx, k)
			sizes[i] = int64(len(b))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	el := time.Since(t0)
	var n int64
	for _, s := range sizes {
		n += s
	}
	if n != want {
		return 0, fmt.Errorf("read %d bytes, the evicted segments hold %d", n, want)
	}
	return el, nil
}

func tierScanRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator, ts tierShard, l *bucketlog.Log) []harness.Row {
	const section = "tier"
	size := mibLabel(ts.evBytes)
	nScan := size + "/Scan of evicted segments"
	nGet1 := size + "/limit: plain GET, one at a time"
	nGet8 := size + fmt.Sprintf("/plain GET, %d at a time", restoreConcurrency)
	fail := func(err error) []harness.Row {
		return []harness.Row{harness.Failed(section, nScan, "MiB/s", err), harness.Failed(section, nGet1, "MiB/s", err)}
	}
	raw, err := emu.Raw(ctx, ts.bucket)
	if err != nil {
		return fail(err)
	}
	defer raw.Close()
	get := buckets.RawGet(raw)
	mibs := func(d time.Duration) float64 { return float64(ts.evBytes) / (1 << 20) / d.Seconds() }
	var scan, get1, get8, fetches []float64
	for rep := 0; rep < env.Reps && ctx.Err() == nil; rep++ {
		d, f, err := tierScan(ctx, l, ts)
		if err != nil {
			return fail(fmt.Errorf("scan: %w", err))
		}
		if f != int64(len(ts.evKeys)) {
			return fail(fmt.Errorf("the scan fetched %d segments, %d are evicted: it did not measure remote reads", f, len(ts.evKeys)))
		}
		d1, err := tierGet(ctx, get, ts.evKeys, 1, ts.evBytes)
		if err != nil {
			return fail(err)
		}
		d8, err := tierGet(ctx, get, ts.evKeys, restoreConcurrency, ts.evBytes)
		if err != nil {
			return fail(err)
		}
		scan, get1, get8, fetches = append(scan, mibs(d)), append(get1, mibs(d1)), append(get8, mibs(d8)), append(fetches, float64(f))
		env.Logf("tier: rep %d: scan %.0f MiB/s (%d fetches), GET×1 %.0f MiB/s, GET×%d %.0f MiB/s", rep+1, mibs(d), f, mibs(d1), restoreConcurrency, mibs(d8))
	}
	rs := harness.Measured(section, nScan, "evicted segment MiB/s", "MiB/s", scan, fmt.Sprintf(
		"Log.Scan pages of %d from the first event through %d (every record's sequence, execution, payload checked) on a serving log; %d segments of %s, each fetched once (remote cache %s; the next segment read ahead); blobtier verified GET + length, xxh64, every frame",
		tierPage, ts.evLast, len(ts.evKeys), mibLabel(ts.segBytes), mibLabel(2*ts.segBytes)))
	r1 := harness.Measured(section, nGet1, "evicted segment MiB/s", "MiB/s", get1, "the same objects, gocloud NewReader into a buffer (buckets.RawGet), nothing checked, in order as the scan reads them")
	r8 := harness.Measured(section, nGet8, "evicted segment MiB/s", "MiB/s", get8, "the same, concurrent: more than one GET in flight")
	return []harness.Row{rs, r1, r8,
		harness.Ratio(section+"/ratio", "scan / plain GET one at a time", rs, r1, "TARGET ≥ 0.8"),
		harness.Ratio(section+"/ratio", fmt.Sprintf("scan / plain GET %d at a time", restoreConcurrency), rs, r8, "the scan has at most its page's fetches and one read-ahead in flight")}
}
