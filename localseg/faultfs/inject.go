package faultfs

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// OpKind is the kind of a filesystem operation.
type OpKind uint8

const (
	// OpOpen is an OpenFile without O_CREATE.
	OpOpen OpKind = iota + 1
	// OpCreate is an OpenFile with O_CREATE (whether or not the file exists).
	OpCreate
	// OpWrite is File.WriteAt.
	OpWrite
	// OpRead is File.ReadAt.
	OpRead
	// OpSync is File.Sync or File.Datasync.
	OpSync
	// OpSyncDir is FS.SyncDir.
	OpSyncDir
	// OpRename is FS.Rename; Op.Path is the old name, Op.NewPath the new.
	OpRename
	// OpRemove is FS.Remove.
	OpRemove
	// OpTruncate is File.Truncate; Op.Offset is the new size.
	OpTruncate
	// OpAllocate is File.Allocate.
	OpAllocate
	// OpLock is FS.Lock.
	OpLock
	// OpStat is FS.Stat or File.Stat.
	OpStat
	// OpReadDir is FS.ReadDir.
	OpReadDir
	// OpMkdir is FS.MkdirAll.
	OpMkdir
)

var kindNames = [...]string{
	OpOpen: "open", OpCreate: "create", OpWrite: "write", OpRead: "read",
	OpSync: "sync", OpSyncDir: "syncdir", OpRename: "rename", OpRemove: "remove",
	OpTruncate: "truncate", OpAllocate: "allocate", OpLock: "lock", OpStat: "stat",
	OpReadDir: "readdir", OpMkdir: "mkdir",
}

func (k OpKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// IsWrite reports whether operations of kind k change what the filesystem
// holds or makes durable. They are the crash points of a crash sweep.
func (k OpKind) IsWrite() bool {
	switch k {
	case OpCreate, OpWrite, OpSync, OpSyncDir, OpRename, OpRemove, OpTruncate, OpAllocate, OpMkdir:
		return true
	}
	return false
}

// Op describes one operation about to run.
type Op struct {
	Kind OpKind
	// Path is the name the operation acts on (for a file operation, the name
	// the file was opened under).
	Path string
	// NewPath is the target of a rename.
	NewPath string
	// Offset and Len locate a read, write or allocate; a truncate carries the
	// new size in Offset.
	Offset, Len int64
}

func (op Op) String() string {
	switch op.Kind {
	case OpRename:
		return fmt.Sprintf("rename %s -> %s", op.Path, op.NewPath)
	case OpWrite, OpRead, OpAllocate:
		return fmt.Sprintf("%s %s [%d,+%d)", op.Kind, op.Path, op.Offset, op.Len)
	case OpTruncate:
		return fmt.Sprintf("truncate %s to %d", op.Path, op.Offset)
	}
	return fmt.Sprintf("%s %s", op.Kind, op.Path)
}

// Injector decides, before each operation, whether it fails. A nil result
// lets the operation run. Implementations must be safe for concurrent use.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeError calls f.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// ErrInjected is matched (errors.Is) by every error this package injects.
var ErrInjected = errors.New("faultfs: injected fault")

// ErrCrashed is matched by the errors of a crashed CrashAt: every operation
// after the crash point fails with it.
var ErrCrashed = errors.New("faultfs: process crashed")

// InjectedError is an injected failure carrying the errno a real system call
// would have returned. errors.Is matches ErrInjected and the errno (and
// ErrCrashed for a crash).
type InjectedError struct {
	Errno   syscall.Errno
	Crashed bool
}

func (e *InjectedError) Error() string {
	if e.Crashed {
		return e.Errno.Error() + " (injected: process crashed)"
	}
	return e.Errno.Error() + " (injected)"
}

// Unwrap returns the errno.
func (e *InjectedError) Unwrap() error { return e.Errno }

// Is matches ErrInjected, and ErrCrashed for a crash error.
func (e *InjectedError) Is(target error) bool {
	return target == ErrInjected || (e.Crashed && target == ErrCrashed)
}

// Errno returns an injectable error that unwraps to errno.
func Errno(errno syscall.Errno) error { return &InjectedError{Errno: errno} }

// Realistic failures of a disk: the device is full, or it failed the I/O.
var (
	ENOSPC = Errno(syscall.ENOSPC)
	EIO    = Errno(syscall.EIO)
)

// Pred selects operations.
type Pred func(op Op) bool

// AnyOp matches every operation.
func AnyOp(Op) bool { return true }

// WriteOps matches the write-class operations (see OpKind.IsWrite).
func WriteOps(op Op) bool { return op.Kind.IsWrite() }

// Kinds matches operations of the given kinds.
func Kinds(kinds ...OpKind) Pred {
	var set [len(kindNames)]bool
	for _, k := range kinds {
		if int(k) < len(set) {
			set[k] = true
		}
	}
	return func(op Op) bool { return int(op.Kind) < len(set) && set[op.Kind] }
}

// PathContains matches operations whose Path or NewPath contains sub.
func PathContains(sub string) Pred {
	return func(op Op) bool {
		return strings.Contains(op.Path, sub) || (op.NewPath != "" && strings.Contains(op.NewPath, sub))
	}
}

// And matches operations every pred matches.
func And(preds ...Pred) Pred {
	return func(op Op) bool {
		for _, p := range preds {
			if !p(op) {
				return false
			}
		}
		return true
	}
}

// Or matches operations any pred matches.
func Or(preds ...Pred) Pred {
	return func(op Op) bool {
		for _, p := range preds {
			if p(op) {
				return true
			}
		}
		return false
	}
}

// Fail fails every operation pred matches with err.
func Fail(err error, pred Pred) Injector {
	return InjectorFunc(func(op Op) error {
		if pred(op) {
			return err
		}
		return nil
	})
}

// Index fails exactly the n-th (0-based) operation its predicate matches.
type Index struct {
	n    int64
	err  error
	pred Pred
	seen atomic.Int64

	mu    sync.Mutex
	fired bool
	op    Op
}

var _ Injector = (*Index)(nil)

// OnIndex fails the n-th (0-based) operation pred matches with err, and no
// other.
func OnIndex(n int64, err error, pred Pred) *Index {
	return &Index{n: n, err: err, pred: pred}
}

// MaybeError implements Injector.
func (x *Index) MaybeError(op Op) error {
	if !x.pred(op) {
		return nil
	}
	if x.seen.Add(1)-1 != x.n {
		return nil
	}
	x.mu.Lock()
	x.fired, x.op = true, op
	x.mu.Unlock()
	return x.err
}

// Fired reports whether the n-th matching operation was reached (and
// failed), and which it was.
func (x *Index) Fired() (Op, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.op, x.fired
}

// Matched is the number of matching operations seen so far.
func (x *Index) Matched() int64 { return x.seen.Load() }

// Counter counts the operations its predicate matches and never fails one.
type Counter struct {
	pred Pred
	n    atomic.Int64
}

var _ Injector = (*Counter)(nil)

// NewCounter counts the operations pred matches.
func NewCounter(pred Pred) *Counter { return &Counter{pred: pred} }

// MaybeError implements Injector.
func (c *Counter) MaybeError(op Op) error {
	if c.pred(op) {
		c.n.Add(1)
	}
	return nil
}

// Count is the number of matching operations seen.
func (c *Counter) Count() int64 { return c.n.Load() }

// Recorder records the operations its predicate matches, in the order the
// injector saw them, and never fails one.
type Recorder struct {
	pred Pred
	mu   sync.Mutex
	ops  []Op
}

var _ Injector = (*Recorder)(nil)

// NewRecorder records the operations pred matches.
func NewRecorder(pred Pred) *Recorder { return &Recorder{pred: pred} }

// MaybeError implements Injector.
func (r *Recorder) MaybeError(op Op) error {
	if r.pred(op) {
		r.mu.Lock()
		r.ops = append(r.ops, op)
		r.mu.Unlock()
	}
	return nil
}

// Ops returns a copy of the recorded operations.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Toggle passes operations to an inner Injector only while it is on.
type Toggle struct {
	inner Injector
	on    atomic.Bool
}

var _ Injector = (*Toggle)(nil)

// NewToggle wraps inner, starting on or off.
func NewToggle(inner Injector, on bool) *Toggle {
	t := &Toggle{inner: inner}
	t.on.Store(on)
	return t
}

// On enables the inner injector.
func (t *Toggle) On() { t.on.Store(true) }

// Off disables it: every operation passes.
func (t *Toggle) Off() { t.on.Store(false) }

// Enabled reports whether the toggle is on.
func (t *Toggle) Enabled() bool { return t.on.Load() }

// MaybeError implements Injector.
func (t *Toggle) MaybeError(op Op) error {
	if !t.on.Load() {
		return nil
	}
	return t.inner.MaybeError(op)
}

// Chain consults every injector in order (so counters and recorders see
// every operation) and returns the first error.
func Chain(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) error {
		var first error
		for _, inj := range injs {
			if err := inj.MaybeError(op); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}

// Crash kills the process at a write-class operation: the write-class
// operations before index k run, and operation k and every later operation
// of any kind fail with an ErrCrashed error, so the state the filesystem
// underneath holds is the state at the crash. The test then takes a
// CrashClone of the MemFS underneath.
type Crash struct {
	k int64

	mu      sync.Mutex
	writes  int64
	crashed bool
	at      Op
	prev    []Op // the last write-class ops admitted, newest last
}

var _ Injector = (*Crash)(nil)

// keepPrev is how many admitted write-class operations a Crash remembers, so
// a sweep can tell what happened just before its crash point.
const keepPrev = 8

// CrashAt crashes at the k-th (0-based) write-class operation. A negative k
// never crashes on its own (see Crash.Now).
func CrashAt(k int64) *Crash { return &Crash{k: k} }

var errCrashed = &InjectedError{Errno: syscall.EIO, Crashed: true}

// MaybeError implements Injector.
func (c *Crash) MaybeError(op Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return errCrashed
	}
	if !op.Kind.IsWrite() {
		return nil
	}
	if c.writes == c.k {
		c.crashed, c.at = true, op
		return errCrashed
	}
	c.writes++
	if len(c.prev) == keepPrev {
		copy(c.prev, c.prev[1:])
		c.prev = c.prev[:keepPrev-1]
	}
	c.prev = append(c.prev, op)
	return nil
}

// Now crashes at once: every later operation fails.
func (c *Crash) Now() {
	c.mu.Lock()
	c.crashed = true
	c.mu.Unlock()
}

// Crashed reports whether the crash happened, and at which operation (the
// zero Op after Now).
func (c *Crash) Crashed() (Op, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, c.crashed
}

// Writes is the number of write-class operations admitted (that ran).
func (c *Crash) Writes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// Before returns the last write-class operations admitted before the crash
// (at most 8), oldest first.
func (c *Crash) Before() []Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Op(nil), c.prev...)
}
