package blobtier

// This file is the agreed exported surface of blobtier. It was written first
// so the packages above it could be built in parallel; the implementations
// live in keys.go, meta.go, errors.go, bucket.go, url.go and observe.go.

import (
	"context"
	"errors"
	"iter"
	"time"
)

// Kind is the kind of an object: each kind has its own key space.
type Kind uint8

const (
	KindSegment   Kind = iota + 1 // a sealed segment, write-once
	KindTail                      // a tail batch, write-once
	KindWatermark                 // the reclaim watermark, rewritten by compare-and-swap
	KindCursor                    // the consumer cursors, rewritten by compare-and-swap
	KindClaim                     // a writer-fencing epoch claim, write-once, never deleted
	KindStart                     // a writer-fencing start record (the cut), write-once, never deleted
	KindIndex                     // a sealed segment's derived index, write-once, never needed for correctness
)

// MaxObjectBytes is the largest object blobtier writes. Objects at or above
// 16 MiB would switch s3blob to a multipart upload, where some servers
// (gofakes3) do not enforce create-if-absent, so anything over 15 MiB is
// refused with ErrTooLarge before any request is made.
const MaxObjectBytes = 15 << 20

// Key is a parsed object key.
type Key struct {
	Kind              Kind
	Shard             uint32
	Segment           uint64 // KindSegment and KindIndex only
	FirstSeq, LastSeq uint64 // KindTail only
	Epoch             uint64 // KindClaim and KindStart only
}

// Errors. Callers test them with errors.Is; every error a Bucket returns
// for one object is an *ObjectError naming the operation and the key.
var (
	ErrNotFound = errors.New("blobtier: object not found")
	// ErrConflict: a different object (other bytes or another epoch)
	// already sits under a write-once key. On a segment or tail key it means
	// a second writer on the shard.
	ErrConflict = errors.New("blobtier: a different object exists under the key")
	// ErrPrecondition: a compare-and-swap lost (the version changed, or the
	// object appeared or disappeared).
	ErrPrecondition = errors.New("blobtier: version changed")
	// ErrUnsupported: the bucket cannot compare-and-swap (mem://, file://).
	ErrUnsupported = errors.New("blobtier: compare-and-swap unsupported by this bucket")
	// ErrCorrupt: an object's bytes disagree with its length or digest, or
	// its metadata is missing or malformed.
	ErrCorrupt = errors.New("blobtier: object fails verification")
	// ErrTooLarge: an object over MaxObjectBytes (refused before any request).
	ErrTooLarge = errors.New("blobtier: object too large")
	// ErrBadKey: a key that does not parse (ParseKey, and every write).
	ErrBadKey = errors.New("blobtier: key does not parse")
	// ErrClosed: the Bucket was closed.
	ErrClosed = errors.New("blobtier: bucket closed")
)

// Meta is the metadata every object carries (user metadata keys `length`,
// `xxh64` and `epoch`).
type Meta struct {
	Length int64  // the object's length in bytes
	XXH64  uint64 // XXH64 (seed 0) of the whole object
	Epoch  uint64 // the writer's ownership epoch; 0 until writer fencing exists
}

// ObjectInfo describes a listed or stat'ed object. Meta is filled by Stat
// only (listings carry no user metadata). ParseErr is set for a key under a
// kind's prefix that does not parse (it is still listed, so cleanup can
// count it and keep it); Parsed is valid only when ParseErr is nil.
type ObjectInfo struct {
	Key      string
	Size     int64
	Meta     Meta
	Parsed   Key
	ParseErr error
}

// Version is the opaque version token of a rewritten object ("" = absent):
// the ETag on S3, the generation on GCS.
type Version string

// Bucket is the boundary over *blob.Bucket. Every method has a deadline
// (Options.Timeout) on top of ctx. It is safe for concurrent use.
type Bucket interface {
	// PutIfAbsent creates key with data (write-once). An existing object
	// with identical length, digest and epoch is success (a retried put
	// whose first answer was lost); a different one is ErrConflict. One
	// whose metadata is ours but whose size is not is ErrCorrupt and not
	// ErrConflict: our own earlier put that landed damaged, which the
	// caller deletes and puts again (a put with the same size but damaged
	// bytes succeeds here; only a read-back finds it).
	PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error
	// Get returns the object's bytes after checking length and digest; a
	// short, long or altered object is ErrCorrupt naming the key.
	Get(ctx context.Context, key string) ([]byte, Meta, error)
	// GetVersioned is Get plus the version token for CompareAndSwap. The
	// token is never newer than the bytes returned. When the object exists
	// but fails verification (ErrCorrupt), the token is returned with the
	// error, so its single owner can replace it by compare-and-swap.
	GetVersioned(ctx context.Context, key string) ([]byte, Version, error)
	// GetRange reads part of an object, unverified (RangeGetter, getrange.go).
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// CompareAndSwap writes key only if its version is still expect (""
	// means it must not exist). A lost race is ErrPrecondition; a bucket
	// without conditional writes returns ErrUnsupported.
	CompareAndSwap(ctx context.Context, key string, data []byte, expect Version) error
	// Put writes key unconditionally (the cursor object on buckets without
	// compare-and-swap, by its single owner).
	Put(ctx context.Context, key string, data []byte) error
	// List yields the objects of one kind of one shard in key order, keys
	// that do not parse included (with ParseErr set). It stops at the first
	// error, which it yields.
	List(ctx context.Context, shard uint32, kind Kind) iter.Seq2[ObjectInfo, error]
	// Stat returns size and metadata.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes key; a missing key is success.
	Delete(ctx context.Context, key string) error
	// CanCAS reports whether CompareAndSwap works on this bucket.
	CanCAS() bool
	Close() error
}

// Options configure New and Open. The zero value works.
type Options struct {
	// Timeout bounds every call, applied on top of the caller's ctx
	// (default DefaultTimeout). A listing gets it per page request.
	Timeout time.Duration
}

// DefaultTimeout is the per-call deadline when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

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

// Ops and Results list every label value, so a metrics layer can create
// every series at zero at start.
var (
	Ops     = []Op{OpPut, OpGet, OpList, OpDelete, OpStat, OpCAS}
	Results = []Result{ResultOK, ResultNotFound, ResultPrecondition, ResultError}
)

// Observer sees every request of a Bucket: bytesUp/bytesDown are payload
// bytes moved. It must not block.
type Observer func(op Op, res Result, bytesUp, bytesDown int64)
