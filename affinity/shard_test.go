package affinity

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestShardForVectors pins ShardFor to the docs/FORMAT.md §5 vectors (CHECKLIST §2.2).
func TestShardForVectors(t *testing.T) {
	cases := []struct {
		id     string
		hash   uint64
		shards [4]int // n = 2, 4, 8, 16
	}{
		{"1", 0x9f29cb17a2a49995, [4]int{1, 1, 5, 5}},
		{"42", 0xb556806fb6d14353, [4]int{1, 3, 3, 3}},
		{"320816801799737344", 0x7c38cb2fcd528abe, [4]int{0, 2, 6, 14}},
		{"-1", 0x85d136adb773c6c9, [4]int{1, 1, 1, 9}},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			if got := HashID(c.id); got != c.hash {
				t.Fatalf("HashID(%q) = %016x, want %016x", c.id, got, c.hash)
			}
			for i, n := range []int{2, 4, 8, 16} {
				if got := ShardFor(c.id, n); got != c.shards[i] {
					t.Errorf("ShardFor(%q, %d) = %d, want %d", c.id, n, got, c.shards[i])
				}
			}
			// Surrounding whitespace is trimmed before routing.
			if got := ShardFor(" \t"+c.id+"\n", 16); got != c.shards[3] {
				t.Errorf("ShardFor(padded %q, 16) = %d, want %d", c.id, got, c.shards[3])
			}
		})
	}
}

// TestShardForSingleShard: n ≤ 1 always routes to shard 0 (CHECKLIST §2.1).
func TestShardForSingleShard(t *testing.T) {
	for _, id := range []string{"1", "42", "-1", "exec-abc", "", "日本"} {
		for _, n := range []int{1, 0, -3} {
			if got := ShardFor(id, n); got != 0 {
				t.Errorf("ShardFor(%q, %d) = %d, want 0", id, n, got)
			}
		}
	}
}

// TestShardForDecimalVersusBytes: decimal ids route as their int64, other
// ids hash their bytes (CHECKLIST §2.2).
func TestShardForDecimalVersusBytes(t *testing.T) {
	// "042" parses as the int64 42, so it must route with 42.
	if HashID("042") != HashID("42") {
		t.Errorf("HashID(\"042\") differs from HashID(\"42\"): decimal ids must route as their int64")
	}
	// An id beyond int64 is not a decimal int64 and hashes as bytes, so it
	// differs from the integer hash of anything it might wrap to.
	big := "9223372036854775808" // MaxInt64 + 1
	if HashID(big) == HashID("-9223372036854775808") {
		t.Errorf("an id out of int64 range must hash as bytes")
	}
	// Non-decimal ids are deterministic.
	for _, id := range []string{"exec-abc", "a_b-C", "0x10"} {
		if HashID(id) != HashID(id) || ShardFor(id, 7) != ShardFor(id, 7) {
			t.Errorf("HashID(%q) is not stable", id)
		}
	}
	// The integer hash, not the byte hash, is the one used for "42".
	if HashID("42") == xxhash.Sum64String("42") {
		t.Errorf("HashID(\"42\") hashed the bytes, not the int64")
	}
	if HashID("exec-abc") != xxhash.Sum64String("exec-abc") {
		t.Errorf("a non-decimal id must hash its UTF-8 bytes")
	}
}

// TestShardForStableAndInRange: stable across calls and in [0, n)
// (CHECKLIST §2.2).
func TestShardForStableAndInRange(t *testing.T) {
	for n := 2; n <= 17; n++ {
		for i := range 500 {
			id := strconv.Itoa(i*7919 - 1000)
			if i%3 == 0 {
				id = fmt.Sprintf("exec-%d", i)
			}
			s := ShardFor(id, n)
			if s < 0 || s >= n {
				t.Fatalf("ShardFor(%q, %d) = %d out of range", id, n, s)
			}
			if again := ShardFor(id, n); again != s {
				t.Fatalf("ShardFor(%q, %d) unstable: %d then %d", id, n, s, again)
			}
		}
	}
}

// TestShardForSnowflakeSpread: 800 snowflake-like ids over 8 shards give
// every shard more than 40 (CHECKLIST §2.4).
func TestShardForSnowflakeSpread(t *testing.T) {
	const n = 8
	counts := make([]int, n)
	// Snowflake layout: 41 bits of milliseconds since an epoch, 10 bits of
	// machine, 12 bits of sequence. Consecutive ids from one machine differ
	// only in the low bits, which is the hard case for a weak hash.
	const base = int64(1_700_000_000_000-1_288_834_974_657) << 22
	for i := range 800 {
		ms := int64(i / 4)
		seq := int64(i % 4)
		id := base + ms<<22 + 17<<12 + seq
		counts[ShardFor(strconv.FormatInt(id, 10), n)]++
	}
	for s, c := range counts {
		if c <= 40 {
			t.Errorf("shard %d got %d of 800 ids, want > 40 (counts %v)", s, c, counts)
		}
	}
}
