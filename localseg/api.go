package localseg

// This file is the agreed exported surface of localseg, written first so the
// packages above it can be built in parallel. Implementations replace the
// bodies; signatures change only by agreement.

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Wire format constants: part of the wire format; do not change.
const (
	FrameMagic uint32 = 0xE5DB0001
	HeaderSize        = 12
	// MaxBodyLen is the largest body a reader accepts.
	MaxBodyLen = 64 << 20
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
	ErrInvalidInput = errors.New("localseg: invalid input")
	ErrTooLarge     = fmt.Errorf("%w: event too large", ErrInvalidInput)
	ErrInvalidState = errors.New("localseg: invalid state")
	// ErrUnknownConsumer is also an ErrInvalidState.
	ErrUnknownConsumer = fmt.Errorf("%w: unknown consumer", ErrInvalidState)
	ErrCorrupt         = errors.New("localseg: corrupt")
	ErrPoisoned        = errors.New("localseg: store poisoned by an earlier write or fsync error; reopen it")
	ErrLocked          = errors.New("localseg: store locked by another writer")
	ErrReadOnly        = errors.New("localseg: store opened read-only")
	ErrClosed          = errors.New("localseg: store closed")
	// ErrReclaimed reports a read of a sequence at or below the reclaim base.
	ErrReclaimed = errors.New("localseg: reclaimed")
)

// CorruptionError names the segment and byte offset of a corrupt frame.
// errors.Is(err, ErrCorrupt) holds for it.
type CorruptionError struct {
	Segment uint64
	Offset  int64
	Err     error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("localseg: corrupt segment %d at offset %d: %v", e.Segment, e.Offset, e.Err)
}
func (e *CorruptionError) Unwrap() error      { return e.Err }
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// FrameKind is the variant of a frame.
type FrameKind uint8

const (
	KindEvent FrameKind = iota + 1
	KindConsumerCreate
	KindAck
	KindConsumerDelete
)

// Frame is one decoded frame. Which fields are meaningful depends on Kind:
// Event uses Seq, ExecutionID, TransactionID, Payload; ConsumerCreate and
// ConsumerDelete use Consumer; Ack uses Consumer and Seq.
type Frame struct {
	Kind          FrameKind
	Seq           uint64
	ExecutionID   string
	TransactionID string
	Payload       string
	Consumer      string
}

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
}

// Page is the outcome of a scan or a per-execution read.
type Page struct {
	Exists      bool
	Base        uint64 // first retained sequence (reclaimed-through + 1)
	Clamped     bool   // after was below the base
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
	ThroughSeq     uint64
	ThroughSegment uint64
	Removed        []uint64 // segment ids unlinked
	Bytes          int64
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
	// NoPreallocate disables preallocating the active segment.
	NoPreallocate bool
	FS            FS // default OSFS{}
	Now           func() time.Time
	Logger        *slog.Logger
	Observer      Observer
}

// ShardDir is the directory of a shard's store under root.
func ShardDir(root string, shard int) string { return fmt.Sprintf("%s/shard-%04d", root, shard) }

// SegmentFileName is the file name of segment id.
func SegmentFileName(id uint64) string { return fmt.Sprintf("seg-%016d.eslog", id) }

// Store is one shard's durable segment log. It is safe for concurrent use.
type Store struct{ _ int }

var errUnimplemented = errors.New("localseg: not implemented")

// Open opens (creating when writable) the store in dir.
func Open(dir string, opts Options) (*Store, error) { return nil, errUnimplemented }

func (s *Store) Close() error               { return errUnimplemented }
func (s *Store) Dir() string                { return "" }
func (s *Store) OpenReport() OpenReport     { return OpenReport{} }
func (s *Store) Tip() uint64                { return 0 }
func (s *Store) Snapshot() (Snapshot, error) { return Snapshot{}, errUnimplemented }

// Append appends one event; it returns after the fsync that covers it.
func (s *Store) Append(ev Event) (AppendResult, error) { return AppendResult{}, errUnimplemented }

// AppendBatch validates every event first, then appends them as one group
// (one fsync unless it rolls over). It returns the first and last sequence.
func (s *Store) AppendBatch(evs []Event) (first, last uint64, err error) { return 0, 0, errUnimplemented }

// AppendRecovered appends frames recovered from the bucket through the
// ordinary durable path. Event sequences must continue the tip exactly.
func (s *Store) AppendRecovered(frames []Frame) error { return errUnimplemented }

func (s *Store) Scan(after uint64, limit int) (Page, error) { return Page{}, errUnimplemented }
func (s *Store) ReadExecution(executionID string, after uint64, limit int) (Page, error) {
	return Page{}, errUnimplemented
}
func (s *Store) Get(seq uint64) (Record, error)                       { return Record{}, errUnimplemented }
func (s *Store) Pull(consumer string, limit int) (PullResult, error) { return PullResult{}, errUnimplemented }
func (s *Store) Ack(consumer string, seq uint64) (uint64, error)     { return 0, errUnimplemented }
func (s *Store) DeleteConsumer(consumer string) error                { return errUnimplemented }

// Seal seals the active segment when it is non-empty.
func (s *Store) Seal() (sealed bool, err error) { return false, errUnimplemented }

// SealIfDue seals the active segment when it is non-empty and older than
// SealMaxAge.
func (s *Store) SealIfDue() (sealed bool, err error) { return false, errUnimplemented }

// TailExtent returns the durable frames after event afterSeq (see Extent).
func (s *Store) TailExtent(afterSeq uint64, maxBytes int64) (Extent, bool, error) {
	return Extent{}, false, errUnimplemented
}

// ReadRange reads n bytes at off of a segment; the range must be durable.
func (s *Store) ReadRange(segment uint64, off, n int64) ([]byte, error) {
	return nil, errUnimplemented
}

// ReadSegment reads a whole sealed segment.
func (s *Store) ReadSegment(id uint64) ([]byte, error) { return nil, errUnimplemented }

// Reclaim removes sealed segments through throughSegment in the crash-safe
// order of SPEC §6.
func (s *Store) Reclaim(throughSegment uint64) (ReclaimResult, error) {
	return ReclaimResult{}, errUnimplemented
}

// IndexBytes is the memory held by the read index.
func (s *Store) IndexBytes() int64 { return 0 }

// SegmentSummary describes a verified segment image.
type SegmentSummary struct {
	Frames, Events    int
	FirstSeq, LastSeq uint64
}

// WriteSegmentFile durably creates segment id in dir with data (used by a
// cold load). The caller syncs the directory once after the last file.
func WriteSegmentFile(fsys FS, dir string, id uint64, data []byte) error { return errUnimplemented }

// ReadReclaimManifest reads reclaim.json (zero when absent).
func ReadReclaimManifest(fsys FS, dir string) (ReclaimManifest, error) {
	return ReclaimManifest{}, errUnimplemented
}

// WriteReclaimManifest commits reclaim.json: temp file, fsync, rename,
// directory fsync.
func WriteReclaimManifest(fsys FS, dir string, m ReclaimManifest) error { return errUnimplemented }
