package localseg

// This file is the agreed exported surface of localseg (types, constants,
// errors); the methods live in the files named after what they do.

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog/frame"
)

// Store limits.
const (
	DefaultSegmentMaxBytes = 8 << 20
	// MaxSegmentBytes keeps every segment object below the 16 MiB multipart
	// threshold of S3 uploads.
	MaxSegmentBytes = 15 << 20
	MaxIDLen        = 256
	// MaxTransactionIDLen bounds transaction ids.
	MaxTransactionIDLen = 1024
)

// Errors. Callers test them with errors.Is.
var (
	// ErrInvalidInput and ErrTooLarge are frame's (its encoder refuses
	// with them), so both packages' errors match either name.
	ErrInvalidInput = frame.ErrInvalidInput
	ErrTooLarge     = frame.ErrTooLarge
	ErrInvalidState = errors.New("localseg: invalid state")
	// ErrUnknownConsumer is also an ErrInvalidState.
	ErrUnknownConsumer = fmt.Errorf("%w: unknown consumer", ErrInvalidState)
	// ErrCorrupt is frame.ErrCorrupt: a corrupt frame and a corrupt store
	// file are one class.
	ErrCorrupt = frame.ErrCorrupt
	// ErrLostState reports a store whose own durable records (checkpoint,
	// index files, reclaim.json) show more than its segment files hold: a
	// file was lost. It is also an ErrInvalidState.
	ErrLostState = fmt.Errorf("%w: durable state missing", ErrInvalidState)
	ErrPoisoned  = errors.New("localseg: store poisoned by an earlier write or fsync error; reopen it")
	// ErrLocked is also an ErrInvalidState.
	ErrLocked   = fmt.Errorf("%w: store locked by another writer", ErrInvalidState)
	ErrReadOnly = errors.New("localseg: store opened read-only")
	ErrClosed   = errors.New("localseg: store closed")
	// ErrReclaimed reports a read of a sequence at or below the reclaim base.
	ErrReclaimed = errors.New("localseg: reclaimed")
	// ErrNotFound reports a point read of a sequence that does not exist
	// (0, or above the tip).
	ErrNotFound = errors.New("localseg: no such sequence")
	// ErrTransactionConflict (an ErrInvalidState) refuses an append whose
	// transaction id the window holds for another execution id or payload.
	ErrTransactionConflict = fmt.Errorf("%w: transaction id reused", ErrInvalidState)
)

// Event is an event to append. Identifiers are trimmed and validated.
type Event struct {
	ExecutionID   string `json:"execution_id"`
	TransactionID string `json:"transaction_id"`
	Payload       string `json:"payload"`
}

// Record is a stored event.
type Record struct {
	Seq           uint64
	ExecutionID   string
	TransactionID string
	Payload       string
}

// AppendResult is the outcome of one append.
type AppendResult struct {
	Seq     uint64
	Created bool   // the shard's first event (sequence 1)
	Tip     uint64 // highest sequence after the append
	// Duplicate: the transaction id was in the log with the same execution
	// id and payload; nothing was written and Seq is the original's.
	Duplicate bool
}

// Duplicate names an event of a batch that was not written because its
// transaction id is in the log (or earlier in the batch): Seq holds it.
type Duplicate struct {
	Index int    `json:"index"`
	Seq   uint64 `json:"global_sequence"`
}

// BatchResult is the outcome of AppendEvents.
type BatchResult struct {
	// First..Last are the sequences of the events written, in batch order
	// (both 0 when every event was a duplicate).
	First, Last uint64
	Duplicates  []Duplicate
}

// Page is the outcome of a scan or a per-execution read.
type Page struct {
	Exists      bool
	Base        uint64 // first retained sequence (reclaimed-through + 1)
	Clamped     bool   // records after the cursor were reclaimed (after < Base-1): the page starts at Base
	RecordCount uint64 // records in scope after the cursor
	Records     []Record
}

// PullResult is the outcome of a consumer pull.
type PullResult struct {
	Exists  bool // false: the store is empty and nothing was written
	Created bool // this pull created the consumer
	Acked   uint64
	Pending uint64 // tip - acked
	Records []Record
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	ID     uint64
	Size   int64 // logical size (without preallocated zeros)
	Sealed bool  // has a successor; immutable
	// FirstSeq..LastSeq are the Event sequences in the segment; Events is
	// their count (0 when the segment holds only consumer frames, in which
	// case FirstSeq = LastSeq+1 = the next sequence).
	FirstSeq, LastSeq uint64
	Events            int
}

// Snapshot is a consistent view of the store for planning (reclaim,
// shipping). It owns its slices and maps.
type Snapshot struct {
	Tip            uint64
	ReclaimedSeq   uint64 // base - 1
	ReclaimedSeg   uint64
	Consumers      map[string]uint64 // live consumers and their cursors (0 = never acked)
	Segments       []SegmentInfo     // id order; the last is the active one
	TornTailBytes  int64             // bytes dropped by this open's repair
	ActiveOpenedAt time.Time         // when the active segment got its first frame (or the store was opened)
	Jumps          []Jump            // the recorded segment-id jumps (jumps.go): ids no segment ever held

	// Deleted: consumers deleted since the store opened, and those an
	// owner recalled at start (RecallDeleted), at most MaxRecentDeletes,
	// the latest, each with the sequence of the last event before its
	// ConsumerDelete frame (or a bound above it); a name created again is
	// not in it. The cursor object's tombstones come from it
	// (docs/FORMAT.md §6.6).
	Deleted map[string]uint64
}

// Extent is a run of whole frames inside one segment, every byte of it
// covered by a completed fsync.
type Extent struct {
	Segment    uint64
	Start, End int64
	// FirstSeq and LastSeq are the first and last Event sequences in the
	// range; the range ends with the frame of LastSeq.
	FirstSeq, LastSeq uint64
	Sealed            bool
}

// ReclaimResult reports one local reclaim.
type ReclaimResult struct {
	ThroughSeq     uint64   `json:"through_seq"`
	ThroughSegment uint64   `json:"through_segment"`
	Removed        []uint64 `json:"removed"` // segment ids unlinked
	Bytes          int64    `json:"bytes"`
}

// ReclaimManifest is reclaim.json.
type ReclaimManifest struct {
	ReclaimedThroughSeq     uint64 `json:"reclaimed_through_seq"`
	ReclaimedThroughSegment uint64 `json:"reclaimed_through_segment"`
}

// OpenReport says what an open found and did.
type OpenReport struct {
	Replayed         bool  // a replay ran (checkpoint missing, stale or not trusted)
	TornTailBytes    int64 // bytes dropped from the highest segment
	TornTailSegment  uint64
	LeftoversRemoved []uint64 // segment files at or below the reclaim base deleted at open
}

// Observer receives timings for metrics. Methods must not block.
type Observer interface {
	Fsync(d time.Duration)
	Sealed(info SegmentInfo)
}

// Options configure a Store. The zero value works.
type Options struct {
	// SegmentMaxBytes caps a segment (default 8 MiB, at most 15 MiB).
	SegmentMaxBytes int64
	// SealMaxAge seals a non-empty active segment older than this when
	// SealIfDue runs (0: never by age).
	SealMaxAge time.Duration
	// ReadOnly opens without the lock, serves reads and changes nothing.
	ReadOnly bool
	// DeferCleanup makes a writable open keep what its recovery would
	// delete (segment files at or below the reclaim base, unfinished
	// temporary files) and the highest segment as it found it (a torn
	// tail, the preallocation, the checkpoint's rewrite) until
	// RemoveLeftovers or the first write: an owner whose open the bucket
	// may still refuse leaves the directory as it found it.
	DeferCleanup bool
	// NoPreallocate disables preallocating the active segment.
	NoPreallocate bool
	// Shard, when Count is not 0, is the shard pair the store belongs to:
	// a writable open records it (shard.json), and an open of a store that
	// records another pair fails with ErrShardMismatch before it changes
	// anything (see shardpair.go).
	Shard    ShardPair
	FS       FS // default OSFS{}
	Now      func() time.Time
	Logger   *slog.Logger
	Observer Observer

	// TransactionWindow is how many of the newest events' transaction ids
	// an append is checked against (txwindow.go): 0 means
	// DefaultTransactionWindow, a negative value turns de-duplication off.
	TransactionWindow int
	// MaxConsumers bounds the consumers a pull may create (consumerlimit.go;
	// 0: DefaultMaxConsumers, at most MaxConsumersCeiling).
	MaxConsumers int

	// Remote reads evicted segments from the bucket (evict.go); nil: an
	// evicted segment's reads fail with ErrRemoteRead. RemoteCacheBytes
	// bounds the fetched segments kept in memory (0:
	// DefaultRemoteCacheBytes).
	Remote           RemoteSource
	RemoteCacheBytes int64
	// ReadAheadInline fetches a sequential read's next evicted segment
	// (remote.go, readAhead) within the read, after its page is located
	// and before its own fetches, instead of in the background: no
	// goroutine outlives a call (a NoBackground log; the simulation's
	// bucket calls stay in one order).
	ReadAheadInline bool
	// ResolveFirsts makes a writable open read, before it changes a
	// byte, every evicted segment a lazy hydrate recorded with its first
	// event not known (FirstUnknown) and record its real first event in
	// evicted.json, or refuse (ErrRemoteRead) when the bucket cannot
	// serve one (resolvefirsts.go). An owner needs it: its start and GC
	// read every segment's event range from the snapshot.
	ResolveFirsts bool
}

// ShardPair names shard Index of a pool of Count.
type ShardPair struct {
	Index, Count int
}

// ShardDir is the directory of a shard's store under root.
func ShardDir(root string, shard int) string {
	return fmt.Sprintf("%s/"+shardDirPrefix+"%04d", root, shard)
}

const shardDirPrefix = "shard-"

// ShardOfDir parses the base name of a shard directory (shard-NNNN, any
// number of digits) and returns its shard; false for any other name.
func ShardOfDir(base string) (uint64, bool) {
	digits, ok := strings.CutPrefix(base, shardDirPrefix)
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	return n, err == nil
}

// SegmentFileName is the file name of segment id.
func SegmentFileName(id uint64) string { return fmt.Sprintf("seg-%016d.eslog", id) }
