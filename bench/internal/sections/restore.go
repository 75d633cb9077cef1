package sections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
)

func init() {
	harness.Register(harness.Section{
		Name:    "restore",
		Doc:     "bucketlog.Restore MiB/s and CPU ms/MiB of one shard, and of 4 at once, from in-process gofakes3 (256 MiB of 8 MiB segments each; 32 MiB with -quick) against a plain parallel download + fsync of the same objects",
		Default: true,
		Order:   40,
		Run:     runRestore,
	})
}

// Restore section sizes.
const (
	restoreFullBytes  = 256 << 20
	restoreQuickBytes = 32 << 20
	// restoreSegmentBytes is the store's SegmentMaxBytes while the bucket is
	// built: the engine's default, so the objects are the size a real shard
	// uploads.
	restoreSegmentBytes = 8 << 20
)

// restoreShards is how many shards the section restores at once (and how
// many the bucket holds).
const restoreShards = 4

// restoreConcurrency is the number of objects in flight, for Restore and
// for the limit alike: coldload's default.
const restoreConcurrency = coldload.DefaultConcurrency

// restoreBucket is the bucket the section restores from, built once per run.
type restoreBucket struct {
	keys  []string
	bytes int64  // segment object bytes
	tip   uint64 // the last sequence the bucket holds
	// needle is an execution whose needleEvents events were appended
	// together halfway through the history (a short-lived execution: the
	// lazyrestore section's per-execution read).
	needle string
}

// needleEvents is how many events the needle execution has.
const needleEvents = 64

// restoreNeedle is shard's needle execution id.
func restoreNeedle(shard int) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("needle-%d", i); affinity.ShardFor(id, restoreShards) == shard {
			return id
		}
	}
}

// buildRestoreBucket builds shard 0 of the section's bucket
// (buildRestoreShard).
func buildRestoreBucket(ctx context.Context, env *harness.Env, b blobtier.Bucket, target int64) (restoreBucket, error) {
	return buildRestoreShard(ctx, env, b, 0, target)
}

// buildRestoreShard appends events of BucketPayload bytes to a shard that
// ships to b until its segments hold at least target bytes, seals and
// ships everything (Ship with sealActive), closes it, and removes the local
// directory: the bucket alone is what Restore reads.
func buildRestoreShard(ctx context.Context, env *harness.Env, b blobtier.Bucket, shard int, target int64) (restoreBucket, error) {
	var rb restoreBucket
	dir, err := tempDir(env.WorkDir, "restore-source-")
	if err != nil {
		return rb, err
	}
	defer os.RemoveAll(dir)
	l, err := bucketlog.Open(ctx, bucketlog.Options{
		Dir: dir, Bucket: b, SegmentMaxBytes: restoreSegmentBytes, NoBackground: true, Logger: warnLogger(),
		ShardIndex: shard, ShardCount: restoreShards,
	})
	if err != nil {
		return rb, err
	}
	defer l.Close()
	src := newEventSource(BucketPayload, env.Executions)
	// Only the shard's own execution ids (the engine refuses the others).
	own := src.ids[:0]
	for _, id := range src.ids {
		if affinity.ShardFor(id, restoreShards) == shard {
			own = append(own, id)
		}
	}
	if len(own) == 0 {
		return rb, fmt.Errorf("none of %d execution ids belongs to shard %d", len(src.ids), shard)
	}
	src.ids = own
	for {
		n, _, err := localBytes(l)
		if err != nil {
			return rb, err
		}
		if n >= target {
			break
		}
		if rb.needle == "" && n >= target/2 {
			rb.needle = restoreNeedle(shard)
			needle := &eventSource{p: src.p, ids: []string{rb.needle}, next: 1 << 40}
			if err := appendEvents(ctx, l, needle, needleEvents); err != nil {
				return rb, err
			}
		}
		if err := appendEvents(ctx, l, src, 8*1000); err != nil {
			return rb, err
		}
	}
	rep, err := l.Ship(ctx, true)
	if err != nil {
		return rb, fmt.Errorf("ship: %w", err)
	}
	if rep.ShippedThrough != rep.Tip {
		return rb, fmt.Errorf("after shipping, the bucket holds through %d of %d", rep.ShippedThrough, rep.Tip)
	}
	rb.tip = rep.Tip
	if err := l.Close(); err != nil {
		return rb, err
	}
	rb.keys, rb.bytes, err = shardSegmentObjects(ctx, b, uint32(shard))
	if err != nil {
		return rb, err
	}
	return rb, nil
}

func runRestore(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "restore"
	target := int64(restoreFullBytes)
	if env.Quick {
		target = restoreQuickBytes
	}
	size := mibLabel(target)
	many := fmt.Sprintf("%dx%s", restoreShards, size)
	nameLimit := size + "/limit: raw GET, write, fsync"
	nameGet := size + "/verified GET, write, fsync"
	nameRestore := size + "/bucketlog.Restore"
	nameManyLimit := many + " at once/limit: raw GET, write, fsync"
	nameManyRestore := many + " at once/bucketlog.Restore"
	names := []string{nameLimit, nameGet, nameRestore, nameManyLimit, nameManyRestore}
	fail := func(err error) ([]harness.Row, error) {
		var rows []harness.Row
		for _, n := range names {
			rows = append(rows, harness.Failed(section, n, "MiB/s", err))
		}
		return rows, nil
	}

	emu, err := buckets.StartS3()
	if err != nil {
		return fail(err)
	}
	defer emu.Close()
	name, err := emu.NewBucket("restore")
	if err != nil {
		return fail(err)
	}
	bk, err := emu.Open(ctx, name)
	if err != nil {
		return fail(err)
	}
	defer bk.Close()
	raw, err := emu.Raw(ctx, name)
	if err != nil {
		return fail(err)
	}
	defer raw.Close()

	t0 := time.Now()
	shards := make([]restoreBucket, restoreShards)
	for i := range shards {
		if shards[i], err = buildRestoreShard(ctx, env, bk, i, target); err != nil {
			return fail(fmt.Errorf("build shard %d of the bucket: %w", i, err))
		}
	}
	rb := shards[0]
	var manyBytes int64
	for _, s := range shards {
		manyBytes += s.bytes
	}
	env.Logf("restore: built %d shards of %d segment objects, %s each, %d events in shard 0, in %v",
		restoreShards, len(rb.keys), mibLabel(rb.bytes), rb.tip, time.Since(t0).Round(time.Millisecond))

	download := func(get buckets.GetFunc, rb restoreBucket, dir string) (int64, error) {
		n, err := buckets.Download(ctx, get, rb.keys, dir, restoreConcurrency)
		if err == nil && n != rb.bytes {
			err = fmt.Errorf("downloaded %d bytes of %d", n, rb.bytes)
		}
		return n, err
	}
	restore := func(shard int, rb restoreBucket, dir string) (int64, error) {
		rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: bk, Shard: shard, Dir: dir, Concurrency: restoreConcurrency})
		if err != nil {
			return 0, err
		}
		if rep.LastSeq != rb.tip || rep.SegmentBytes != rb.bytes {
			return 0, fmt.Errorf("shard %d restored through %d (%d segment bytes), the bucket holds through %d (%d bytes)",
				shard, rep.LastSeq, rep.SegmentBytes, rb.tip, rb.bytes)
		}
		return rep.SegmentBytes, nil
	}
	// allShards runs one per shard at once, each in a directory of its own.
	allShards := func(one func(shard int, rb restoreBucket, dir string) (int64, error)) func(string) (int64, error) {
		return func(dir string) (int64, error) {
			g := new(errgroup.Group)
			ns := make([]int64, len(shards))
			for i, s := range shards {
				g.Go(func() error {
					d := filepath.Join(dir, fmt.Sprintf("s%d", i))
					if err := os.Mkdir(d, 0o755); err != nil {
						return err
					}
					n, err := one(i, s, d)
					ns[i] = n
					return err
				})
			}
			if err := g.Wait(); err != nil {
				return 0, err
			}
			var total int64
			for _, n := range ns {
				total += n
			}
			return total, nil
		}
	}
	rawGet := buckets.RawGet(raw)
	variants := []*restoreVariant{
		{name: nameLimit, run: func(dir string) (int64, error) { return download(rawGet, rb, dir) }},
		{name: nameGet, run: func(dir string) (int64, error) {
			return download(func(ctx context.Context, key string) ([]byte, error) {
				d, _, err := bk.Get(ctx, key)
				return d, err
			}, rb, dir)
		}},
		{name: nameRestore, run: func(dir string) (int64, error) { return restore(0, rb, dir) }},
		{name: nameManyLimit, run: allShards(func(_ int, rb restoreBucket, dir string) (int64, error) { return download(rawGet, rb, dir) })},
		{name: nameManyRestore, run: allShards(restore)},
	}
	// Repetitions are the outer loop, the variants alternate inside it, so
	// a noisy moment of the shared machine touches all of them. A quick
	// run's repetitions take a tenth of a second each: take more of them.
	reps := env.Reps
	if env.Quick {
		reps = max(reps, 7)
	}
	for rep := 0; rep < reps; rep++ {
		// The order rotates too, so no variant always runs first (after the
		// previous repetition's files were deleted) or last.
		for i := range variants {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			variants[(rep+i)%len(variants)].measure(env, rep)
		}
	}

	objects := fmt.Sprintf("%d objects of up to %s (%s, %d events of %d B), %d in flight",
		len(rb.keys), mibLabel(restoreSegmentBytes), mibLabel(rb.bytes), rb.tip, BucketPayload, restoreConcurrency)
	manyObjects := fmt.Sprintf("%d shards like it (%s in all) at once, each with %d in flight", restoreShards, mibLabel(manyBytes), restoreConcurrency)
	notes := map[string]string{
		nameLimit:       "the LIMIT: " + objects + "; gocloud NewReader read into a buffer of the response's size, no check; one file + fsync per object, one dir fsync",
		nameGet:         "as the limit, through blobtier.Get (length + xxh64 checked)",
		nameRestore:     objects + "; every object and frame verified; into an empty dir",
		nameManyLimit:   "the LIMIT for " + manyObjects + ": one plain download per shard, as above",
		nameManyRestore: manyObjects + ": one bucketlog.Restore per shard",
	}
	rows := make(map[string]harness.Row, len(variants))
	var out, cpu []harness.Row
	for _, v := range variants {
		var r, c harness.Row
		if v.err != nil {
			r = harness.Failed(section, v.name, "MiB/s", v.err)
			c = harness.Failed(section+"/cpu", v.name, "CPU ms/MiB", v.err)
		} else {
			r = harness.Measured(section, v.name, "MiB/s", "MiB/s", v.rates, notes[v.name])
			c = harness.Measured(section+"/cpu", v.name, "CPU ms/MiB", "ms/MiB", v.cpu,
				"user + system CPU of the whole process (getrusage) per MiB of segment objects, the in-process emulator's included")
		}
		rows[v.name] = r
		out = append(out, r)
		cpu = append(cpu, c)
	}
	out = append(out, cpu...)
	out = append(out,
		harness.Ratio(section+"/ratio", size+"/restore / limit", rows[nameRestore], rows[nameLimit], "TARGET ≥ 0.9"),
		harness.Ratio(section+"/ratio", many+" at once/restore / limit", rows[nameManyRestore], rows[nameManyLimit], "TARGET ≥ 0.9"),
		harness.Ratio(section+"/ratio", size+"/verified GET / limit", rows[nameGet], rows[nameLimit], "what blobtier's length + digest check costs"),
		harness.Ratio(section+"/ratio", size+"/restore / verified GET", rows[nameRestore], rows[nameGet], "what frame verification and the store's own files cost"),
	)
	return out, nil
}

// restoreVariant is one way of bringing the objects down, measured rep by
// rep: its rates (MiB/s) and CPU (ms of user + system time per MiB).
type restoreVariant struct {
	name  string
	run   func(dir string) (int64, error)
	rates []float64
	cpu   []float64
	err   error
}

// measure runs v once in a fresh directory, removed afterwards; the first
// failure ends v's repetitions.
func (v *restoreVariant) measure(env *harness.Env, rep int) {
	if v.err != nil {
		return
	}
	dir, err := tempDir(env.WorkDir, "restore-")
	if err != nil {
		v.err = err
		return
	}
	defer os.RemoveAll(dir)
	c0, err := processCPU()
	if err != nil {
		v.err = err
		return
	}
	t := time.Now()
	n, err := v.run(dir)
	d := time.Since(t)
	c1, cerr := processCPU()
	if err == nil {
		err = cerr
	}
	if err != nil {
		v.err = err
		env.Logf("restore %s: %v", v.name, err)
		return
	}
	mib := float64(n) / (1 << 20)
	cpu := (c1 - c0).Seconds() * 1000 / mib
	v.rates = append(v.rates, mib/d.Seconds())
	v.cpu = append(v.cpu, cpu)
	env.Logf("restore rep %d %s: %v (%.0f MiB/s, %.2f CPU ms/MiB)", rep+1, v.name, d.Round(time.Millisecond), mib/d.Seconds(), cpu)
}
