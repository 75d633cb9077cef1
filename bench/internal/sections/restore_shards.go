package sections

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bucketlog/bucketlog/blobtier"
)

// shardSegmentObjects lists one shard's segment objects and their bytes.
func shardSegmentObjects(ctx context.Context, b blobtier.Bucket, shard uint32) ([]string, int64, error) {
	var keys []string
	var total int64
	for info, err := range b.List(ctx, shard, blobtier.KindSegment) {
		if err != nil {
			return nil, 0, err
		}
		if info.ParseErr != nil {
			return nil, 0, fmt.Errorf("unexpected key %s in the bench bucket: %w", info.Key, info.ParseErr)
		}
		keys = append(keys, info.Key)
		total += info.Size
	}
	if len(keys) == 0 {
		return nil, 0, fmt.Errorf("shard %d has no segment object", shard)
	}
	return keys, total, nil
}

// processCPU is the user + system CPU time this process has used
// (getrusage RUSAGE_SELF: every thread, the in-process emulator's too).
func processCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
