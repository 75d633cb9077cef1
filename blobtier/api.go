package blobtier

// This file is the agreed exported surface of blobtier, written first so the
// packages above it can be built in parallel. Implementations replace the
// bodies; signatures change only by agreement.

import (
	"context"
	"errors"
	"iter"
	"time"

	"gocloud.dev/blob"
)

// Kind is the kind of an object.
type Kind uint8

const (
	KindSegment Kind = iota + 1
	KindTail
	KindWatermark
	KindCursor
)

// MaxObjectBytes: objects at or above 16 MiB would switch s3blob to a
// multipart upload, where some servers do not enforce create-if-absent.
// Objects over 15 MiB are refused.
const MaxObjectBytes = 15 << 20

// Key is a parsed object key.
type Key struct {
	Kind              Kind
	Shard             uint32
	Segment           uint64 // KindSegment
	FirstSeq, LastSeq uint64 // KindTail
}

// Errors. Callers test them with errors.Is.
var (
	ErrNotFound = errors.New("blobtier: object not found")
	// ErrConflict: a different object already sits under a write-once key
	// (a second writer on the shard).
	ErrConflict = errors.New("blobtier: a different object exists under the key")
	// ErrPrecondition: a compare-and-swap lost (the version changed).
	ErrPrecondition = errors.New("blobtier: version changed")
	// ErrUnsupported: the bucket cannot compare-and-swap (mem://, file://).
	ErrUnsupported = errors.New("blobtier: compare-and-swap unsupported by this bucket")
	// ErrCorrupt: an object's bytes disagree with its length or digest, or
	// its metadata is missing or malformed.
	ErrCorrupt  = errors.New("blobtier: object fails verification")
	ErrTooLarge = errors.New("blobtier: object too large")
	ErrBadKey   = errors.New("blobtier: key does not parse")
)

// Meta is the metadata every object carries.
type Meta struct {
	Length int64
	XXH64  uint64
	Epoch  uint64
}

// ObjectInfo describes a listed or stat'ed object. Meta is filled by Stat
// only (listings carry no user metadata). ParseErr is set for a key under a
// kind's prefix that does not parse (it is still listed, so cleanup can
// count it and keep it).
type ObjectInfo struct {
	Key      string
	Size     int64
	Meta     Meta
	Parsed   Key
	ParseErr error
}

// Version is the opaque version token of a rewritten object ("" = absent).
type Version string

// Bucket is the boundary over *blob.Bucket. Every method has a deadline
// (Options.Timeout) on top of ctx. It is safe for concurrent use.
type Bucket interface {
	// PutIfAbsent creates key with data (write-once). An existing object
	// with identical bytes and epoch is success; a different one is
	// ErrConflict.
	PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error
	// Get returns the object's bytes after checking length and digest.
	Get(ctx context.Context, key string) ([]byte, Meta, error)
	// GetVersioned is Get plus the version token for CompareAndSwap.
	GetVersioned(ctx context.Context, key string) ([]byte, Version, error)
	// CompareAndSwap writes key only if its version is still expect (""
	// means it must not exist). A lost race is ErrPrecondition.
	CompareAndSwap(ctx context.Context, key string, data []byte, expect Version) error
	// Put writes key unconditionally (the cursor object on buckets without
	// compare-and-swap, by its single owner).
	Put(ctx context.Context, key string, data []byte) error
	// List yields the objects of one kind of one shard in key order.
	List(ctx context.Context, shard uint32, kind Kind) iter.Seq2[ObjectInfo, error]
	// Stat returns size and metadata.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes key; a missing key is success.
	Delete(ctx context.Context, key string) error
	// CanCAS reports whether CompareAndSwap works on this bucket.
	CanCAS() bool
	Close() error
}

// Options configure New. The zero value works.
type Options struct {
	// Timeout bounds every call (default 30s).
	Timeout time.Duration
}

var errUnimplemented = errors.New("blobtier: not implemented")

// New wraps an opened *blob.Bucket.
func New(b *blob.Bucket, opts Options) Bucket { return nil }

// Open opens a bucket URL (s3://, gs://, mem://, file://).
func Open(ctx context.Context, url string, opts Options) (Bucket, error) { return nil, errUnimplemented }

func SegmentKey(shard uint32, id uint64) string               { return "" }
func TailKey(shard uint32, firstSeq, lastSeq uint64) string   { return "" }
func WatermarkKey(shard uint32) string                         { return "" }
func CursorKey(shard uint32) string                            { return "" }
func ParseKey(key string) (Key, error)                         { return Key{}, errUnimplemented }
func Digest(data []byte) uint64                                { return 0 }

// Op and Result label bucket requests for metrics.
type Op string
type Result string

const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpList   Op = "list"
	OpDelete Op = "delete"
	OpStat   Op = "stat"
	OpCAS    Op = "cas"

	ResultOK           Result = "ok"
	ResultNotFound     Result = "not_found"
	ResultPrecondition Result = "precondition"
	ResultError        Result = "error"
)

// Observer sees every request of a Bucket: bytesUp/bytesDown are payload
// bytes moved. It must not block.
type Observer func(op Op, res Result, bytesUp, bytesDown int64)

// Observe decorates b so every request is reported to o.
func Observe(b Bucket, o Observer) Bucket { return b }
