package sections

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
)

func init() {
	harness.Register(harness.Section{
		Name:    "restore",
		Doc:     "bucketlog.Restore MiB/s of one shard from in-process gofakes3 (256 MiB of 8 MiB segments; 32 MiB with -quick) against a plain parallel download + fsync of the same objects",
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

// restoreConcurrency is the number of objects in flight, for Restore and
// for the limit alike: coldload's default.
const restoreConcurrency = coldload.DefaultConcurrency

// restoreBucket is the bucket the section restores from, built once per run.
type restoreBucket struct {
	keys  []string
	bytes int64  // segment object bytes
	tip   uint64 // the last sequence the bucket holds
}

// buildRestoreBucket appends events of BucketPayload bytes to a shard that
// ships to b until its segments hold at least target bytes, seals and
// ships everything (Ship with sealActive), closes it, and removes the local
// directory: the bucket alone is what Restore reads.
func buildRestoreBucket(ctx context.Context, env *harness.Env, b blobtier.Bucket, target int64) (restoreBucket, error) {
	var rb restoreBucket
	dir, err := tempDir(env.WorkDir, "restore-source-")
	if err != nil {
		return rb, err
	}
	defer os.RemoveAll(dir)
	l, err := bucketlog.Open(ctx, bucketlog.Options{
		Dir: dir, Bucket: b, SegmentMaxBytes: restoreSegmentBytes, NoBackground: true, Logger: warnLogger(),
	})
	if err != nil {
		return rb, err
	}
	defer l.Close()
	src := newEventSource(BucketPayload, env.Executions)
	for {
		n, _, err := localBytes(l)
		if err != nil {
			return rb, err
		}
		if n >= target {
			break
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
	rb.keys, rb.bytes, err = segmentObjects(ctx, b)
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
	nameLimit := size + "/limit: raw GET, write, fsync"
	nameGet := size + "/verified GET, write, fsync"
	nameRestore := size + "/bucketlog.Restore"
	fail := func(err error) ([]harness.Row, error) {
		return []harness.Row{
			harness.Failed(section, nameLimit, "MiB/s", err),
			harness.Failed(section, nameGet, "MiB/s", err),
			harness.Failed(section, nameRestore, "MiB/s", err),
		}, nil
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
	rb, err := buildRestoreBucket(ctx, env, bk, target)
	if err != nil {
		return fail(fmt.Errorf("build the bucket: %w", err))
	}
	env.Logf("restore: built %d segment objects, %s, %d events in %v", len(rb.keys), mibLabel(rb.bytes), rb.tip, time.Since(t0).Round(time.Millisecond))

	type variant struct {
		name string
		run  func(dir string) (int64, error)
		reps []float64
		err  error
	}
	download := func(get buckets.GetFunc) func(string) (int64, error) {
		return func(dir string) (int64, error) {
			n, err := buckets.Download(ctx, get, rb.keys, dir, restoreConcurrency)
			if err == nil && n != rb.bytes {
				err = fmt.Errorf("downloaded %d bytes of %d", n, rb.bytes)
			}
			return n, err
		}
	}
	variants := []*variant{
		{name: nameLimit, run: download(buckets.RawGet(raw))},
		{name: nameGet, run: download(func(ctx context.Context, key string) ([]byte, error) {
			d, _, err := bk.Get(ctx, key)
			return d, err
		})},
		{name: nameRestore, run: func(dir string) (int64, error) {
			rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: bk, Shard: 0, Dir: dir, Concurrency: restoreConcurrency})
			if err != nil {
				return 0, err
			}
			if rep.LastSeq != rb.tip || rep.SegmentBytes != rb.bytes {
				return 0, fmt.Errorf("restored through %d (%d segment bytes), the bucket holds through %d (%d bytes)",
					rep.LastSeq, rep.SegmentBytes, rb.tip, rb.bytes)
			}
			return rep.SegmentBytes, nil
		}},
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
			v := variants[(rep+i)%len(variants)]
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if v.err != nil {
				continue
			}
			dir, err := tempDir(env.WorkDir, "restore-")
			if err != nil {
				v.err = err
				continue
			}
			t := time.Now()
			n, err := v.run(dir)
			d := time.Since(t)
			os.RemoveAll(dir)
			if err != nil {
				v.err = err
				env.Logf("restore %s: %v", v.name, err)
				continue
			}
			rate := float64(n) / (1 << 20) / d.Seconds()
			v.reps = append(v.reps, rate)
			env.Logf("restore rep %d %s: %v (%.0f MiB/s)", rep+1, v.name, d.Round(time.Millisecond), rate)
		}
	}

	objects := fmt.Sprintf("%d objects of up to %s (%s, %d events of %d B), %d in flight",
		len(rb.keys), mibLabel(restoreSegmentBytes), mibLabel(rb.bytes), rb.tip, BucketPayload, restoreConcurrency)
	notes := map[string]string{
		nameLimit:   "the LIMIT: " + objects + "; gocloud NewReader read into a buffer of the response's size, no check; one file + fsync per object, one dir fsync",
		nameGet:     "as the limit, through blobtier.Get (length + xxh64 checked)",
		nameRestore: objects + "; every object and frame verified; into an empty dir",
	}
	rows := make(map[string]harness.Row, len(variants))
	var out []harness.Row
	for _, v := range variants {
		var r harness.Row
		if v.err != nil {
			r = harness.Failed(section, v.name, "MiB/s", v.err)
		} else {
			r = harness.Measured(section, v.name, "MiB/s", "MiB/s", v.reps, notes[v.name])
		}
		rows[v.name] = r
		out = append(out, r)
	}
	out = append(out,
		harness.Ratio(section+"/ratio", size+"/restore / limit", rows[nameRestore], rows[nameLimit], "TARGET ≥ 0.8"),
		harness.Ratio(section+"/ratio", size+"/verified GET / limit", rows[nameGet], rows[nameLimit], "what blobtier's length + digest check costs"),
		harness.Ratio(section+"/ratio", size+"/restore / verified GET", rows[nameRestore], rows[nameGet], "what frame verification and the store's own files cost"),
	)
	return out, nil
}
