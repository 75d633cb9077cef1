package buckets

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// GetFunc reads one object's bytes.
type GetFunc func(ctx context.Context, key string) ([]byte, error)

// Download is the restore section's limit: it reads keys with at most conc
// reads in flight and writes each object to its own file in dir as soon as
// it arrives (create, write, fsync, close), then fsyncs dir once. It checks
// nothing about the bytes. It returns the bytes written; the files stay for
// the caller to check or remove.
//
// The file names are the keys' positions (obj-000000, …), so dir needs
// nothing but to exist.
func Download(ctx context.Context, get GetFunc, keys []string, dir string, conc int) (int64, error) {
	if conc < 1 {
		return 0, fmt.Errorf("concurrency must be at least 1, got %d", conc)
	}
	sizes := make([]int64, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for i, key := range keys {
		g.Go(func() error {
			data, err := get(gctx, key)
			if err != nil {
				return fmt.Errorf("get %s: %w", key, err)
			}
			if err := writeSynced(filepath.Join(dir, fmt.Sprintf("obj-%06d", i)), data); err != nil {
				return err
			}
			sizes[i] = int64(len(data))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	if err := syncDir(dir); err != nil {
		return 0, err
	}
	var total int64
	for _, n := range sizes {
		total += n
	}
	return total, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
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
}

func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// RawGet reads whole objects from b with nothing checked, into a buffer
// sized from the response (no growing and copying as io.ReadAll does):
// the leanest plain read gocloud offers, for the limit.
func RawGet(b *blob.Bucket) GetFunc {
	return func(ctx context.Context, key string) ([]byte, error) {
		r, err := b.NewReader(ctx, key, nil)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		buf := make([]byte, r.Size())
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
}
