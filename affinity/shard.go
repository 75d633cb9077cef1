package affinity

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// HashID is the ownership hash of an execution id (docs/FORMAT.md §5). The id is
// trimmed first; an id that parses as a decimal int64 is hashed as the eight
// little-endian bytes of that integer, so that a snowflake id routes exactly as
// the workers that carry it as an integer route it. Any other id is hashed as
// its UTF-8 bytes. The hash is XXH64 with seed 0.
func HashID(executionID string) uint64 {
	id := strings.TrimSpace(executionID)
	if v, err := strconv.ParseInt(id, 10, 64); err == nil {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		return xxhash.Sum64(b[:])
	}
	return xxhash.Sum64String(id)
}

// ShardFor returns the shard of executionID in a pool of n shards: 0 when
// n ≤ 1, else HashID(executionID) mod n. It is a pure function: every replica
// and every process computes the same owner for the same id.
func ShardFor(executionID string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(HashID(executionID) % uint64(n))
}
