package affinity

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bucketlog/bucketlog/localseg"
)

// ErrNotOwner is the class of a refusal because another replica owns the
// execution or the shard.
var ErrNotOwner = errors.New("affinity: not the owner")

// NotOwnerError names the shard that owns what was refused, so the caller
// can re-route. errors.Is(err, ErrNotOwner) holds for it.
type NotOwnerError struct {
	Owner       int    // the owner shard
	Shard       int    // the shard this replica owns
	ExecutionID string // empty for shard-level operations (pull, ack)
}

func (e *NotOwnerError) Error() string {
	if e.ExecutionID != "" {
		return fmt.Sprintf("affinity: execution %q belongs to shard %d, this replica owns shard %d", e.ExecutionID, e.Owner, e.Shard)
	}
	return fmt.Sprintf("affinity: shard %d is owned by another replica, this replica owns shard %d", e.Owner, e.Shard)
}

func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }

// Reader is what a cold load must offer: the read side of a shard's store.
// *localseg.Store satisfies it.
type Reader interface {
	Scan(after uint64, limit int) (localseg.Page, error)
	ReadExecution(executionID string, after uint64, limit int) (localseg.Page, error)
	Close() error
}

// ColdReader opens a read-only view of a shard this replica does not own.
// The returned Reader is closed after one read. It must not change the
// shard's data in any way.
type ColdReader func(shard int) (Reader, error)

// LocalColdReader returns the default ColdReader: it opens
// localseg.ShardDir(root, shard) read-only with opts (ReadOnly forced on),
// through opts.FS. A shard directory that does not exist reads as empty and
// is not created.
func LocalColdReader(root string, opts localseg.Options) ColdReader {
	opts.ReadOnly = true
	fsys := opts.FS
	if fsys == nil {
		fsys = localseg.OSFS{}
	}
	return func(shard int) (Reader, error) {
		dir := localseg.ShardDir(root, shard)
		if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return emptyReader{}, nil
		} else if err != nil {
			return nil, fmt.Errorf("cold load shard %d: %w", shard, err)
		}
		st, err := localseg.Open(dir, opts)
		if err != nil {
			return nil, fmt.Errorf("cold load shard %d: %w", shard, err)
		}
		return st, nil
	}
}

// emptyReader is a never-written shard: it exists nowhere, so every read
// answers "does not exist" with the base of an unreclaimed log.
type emptyReader struct{}

func (emptyReader) Scan(after uint64, limit int) (localseg.Page, error) {
	return localseg.Page{Base: 1}, nil
}

func (emptyReader) ReadExecution(executionID string, after uint64, limit int) (localseg.Page, error) {
	if _, err := localseg.ValidateName("execution id", executionID); err != nil {
		return localseg.Page{}, err
	}
	return localseg.Page{Base: 1}, nil
}

func (emptyReader) Close() error { return nil }

// Route decides an event's ownership once, before any store is touched:
// an invalid event is invalid on every shard (localseg.ValidateEvent), and
// an event of another shard's execution is refused with a *NotOwnerError
// naming the owner (no byte written, no sequence consumed, so re-routing
// it is safe).
func (o Ownership) Route(ev localseg.Event) error {
	if _, err := localseg.ValidateEvent(ev, 0); err != nil {
		return err
	}
	if owner := o.OwnerOf(ev.ExecutionID); owner != o.Index {
		return &NotOwnerError{Owner: owner, Shard: o.Index, ExecutionID: strings.TrimSpace(ev.ExecutionID)}
	}
	return nil
}
