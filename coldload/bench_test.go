package coldload_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"golang.org/x/sync/errgroup"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// benchBucket fills a memblob bucket with segs segment objects of about
// segBytes each (events with 1 KiB payloads), plus one tail object.
func benchBucket(b *testing.B, segs int, segBytes int) (blobtier.Bucket, *blob.Bucket, int64) {
	b.Helper()
	raw := memblob.OpenBucket(nil)
	bk := blobtier.New(raw, blobtier.Options{})
	b.Cleanup(func() { bk.Close() })
	payload := strings.Repeat("x", 1000)
	var seq uint64
	var total int64
	for id := 1; id <= segs; id++ {
		var data []byte
		for len(data) < segBytes {
			seq++
			f := localseg.Frame{Kind: localseg.KindEvent, Seq: seq, ExecutionID: "42", TransactionID: fmt.Sprintf("t%d", seq), Payload: payload}
			var err error
			if data, err = localseg.EncodeFrame(data, &f); err != nil {
				b.Fatal(err)
			}
		}
		if err := bk.PutIfAbsent(context.Background(), blobtier.SegmentKey(0, uint64(id)), data, 0); err != nil {
			b.Fatal(err)
		}
		total += int64(len(data))
	}
	return bk, raw, total
}

// BenchmarkRestore compares Hydrate with a plain parallel download of the
// same segment objects written to files, one fsync each and one for the
// directory (the bar: Hydrate should reach 0.8× of it). "plain" reads
// through blobtier.Get too (length and digest checked), "raw" straight from
// the *blob.Bucket.
func BenchmarkRestore(b *testing.B) {
	for _, size := range []int{1 << 20, 8 << 20} {
		segs := (64 << 20) / size
		bk, raw, total := benchBucket(b, segs, size)
		keys := make([]string, segs)
		for i := range keys {
			keys[i] = blobtier.SegmentKey(0, uint64(i+1))
		}
		plain := func(b *testing.B, get func(ctx context.Context, key string) ([]byte, error)) {
			b.SetBytes(total)
			for b.Loop() {
				if err := plainOnce(b.TempDir(), keys, get); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(fmt.Sprintf("size=%d/coldload", size), func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				dir := localseg.ShardDir(b.TempDir(), 0)
				if _, err := coldload.Hydrate(context.Background(), bk, 0, dir, coldload.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%d/plain", size), func(b *testing.B) {
			plain(b, func(ctx context.Context, key string) ([]byte, error) {
				d, _, err := bk.Get(ctx, key)
				return d, err
			})
		})
		b.Run(fmt.Sprintf("size=%d/raw", size), func(b *testing.B) {
			plain(b, raw.ReadAll)
		})
		// The machine is shared: run the two alternately and report the
		// median of the per-pair ratios (plain time / restore time), which
		// load drifts affect far less than separate runs. "segments" restores
		// sealed segments only (the store is never opened); "cursor" adds a
		// cursor object with a consumer, so the restore opens the store to
		// append the consumer's frames, and localseg.Open replays every
		// segment (it has no checkpoint yet).
		for _, variant := range []string{"segments", "cursor"} {
			b.Run(fmt.Sprintf("size=%d/ratio/%s", size, variant), func(b *testing.B) {
				if variant == "cursor" {
					c, err := tailbatch.EncodeCursor(tailbatch.Cursor{V: 1, ShippedThrough: 1, Consumers: map[string]uint64{"c": 1}})
					if err != nil {
						b.Fatal(err)
					}
					if err := bk.Put(context.Background(), blobtier.CursorKey(0), c); err != nil {
						b.Fatal(err)
					}
					defer bk.Delete(context.Background(), blobtier.CursorKey(0))
				}
				var ratios []float64
				for b.Loop() {
					t0 := time.Now()
					dir := localseg.ShardDir(b.TempDir(), 0)
					if _, err := coldload.Hydrate(context.Background(), bk, 0, dir, coldload.Options{}); err != nil {
						b.Fatal(err)
					}
					cl := time.Since(t0)
					t1 := time.Now()
					if err := plainOnce(b.TempDir(), keys, func(ctx context.Context, key string) ([]byte, error) {
						d, _, err := bk.Get(ctx, key)
						return d, err
					}); err != nil {
						b.Fatal(err)
					}
					ratios = append(ratios, time.Since(t1).Seconds()/cl.Seconds())
				}
				slices.Sort(ratios)
				b.ReportMetric(ratios[len(ratios)/2], "speed-vs-plain")
			})
		}
	}
}

// plainOnce downloads keys in parallel into files in dir, one fsync each
// and one for the directory.
func plainOnce(dir string, keys []string, get func(ctx context.Context, key string) ([]byte, error)) error {
	g := new(errgroup.Group)
	g.SetLimit(coldload.DefaultConcurrency)
	for i, k := range keys {
		g.Go(func() error {
			data, err := get(context.Background(), k)
			if err != nil {
				return err
			}
			f, err := os.Create(filepath.Join(dir, localseg.SegmentFileName(uint64(i+1))))
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				f.Close()
				return err
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return localseg.OSFS{}.SyncDir(dir)
}
