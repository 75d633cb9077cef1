// Package routed is the routed replica the affinity drive exercises: one
// owned shard's store kept open and writable, everything else routed by
// affinity's pure functions (refused as not-owner, or read by a cold load).
// The engine (the root package) routes on its own, once; this is harness
// code, kept for the drive and its tests.
package routed

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// ErrClosed reports use of a closed Log.
var ErrClosed = errors.New("affinity: log closed")

// Options configure a Log. The zero value works.
type Options struct {
	// Store configures the owner's resident store. ReadOnly is ignored: the
	// owner always opens its shard writable.
	Store localseg.Options
	// ColdReader serves reads of shards this replica does not own. Nil
	// means affinity.LocalColdReader(root, Store).
	ColdReader affinity.ColdReader
}

// ReadResult is a routed read: the page, the shard it came from and who
// served it (affinity.ServedByOwnerResident or affinity.ServedByNonOwnerColdLoad).
type ReadResult struct {
	Page     localseg.Page
	Shard    int
	ServedBy string
}

// Log is one replica's view of a sharded log under one root: it owns one
// shard, whose store it keeps open and writable, and routes everything else.
// It is safe for concurrent use.
type Log struct {
	root string
	own  affinity.Ownership
	cold affinity.ColdReader

	mu     sync.RWMutex // guards store against Close; the store serialises its own writes
	store  *localseg.Store
	closed bool
}

// Open opens the replica that owns own.Index of own.Count under root. The
// owner's shard store localseg.ShardDir(root, own.Index) is opened
// writable (it takes the shard's lock, so a second writer of the same shard
// fails here) and stays open until Close.
func Open(root string, own affinity.Ownership, opts Options) (*Log, error) {
	if err := own.Validate(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(root) == "" {
		return nil, fmt.Errorf("%w: empty root", localseg.ErrInvalidInput)
	}
	storeOpts := opts.Store
	storeOpts.ReadOnly = false
	// The store records the pair it is written with and refuses another
	// (localseg shard.json): a configuration error.
	storeOpts.Shard = localseg.ShardPair{Index: own.Index, Count: own.Count}
	st, err := localseg.Open(localseg.ShardDir(root, own.Index), storeOpts)
	if errors.Is(err, localseg.ErrShardMismatch) {
		return nil, fmt.Errorf("open owned %s: %w: %w", own, affinity.ErrConfig, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open owned %s: %w", own, err)
	}
	cold := opts.ColdReader
	if cold == nil {
		cold = affinity.LocalColdReader(root, opts.Store)
	}
	return &Log{root: root, own: own, cold: cold, store: st}, nil
}

// Ownership returns the replica's ownership.
func (l *Log) Ownership() affinity.Ownership { return l.own }

// Root returns the root directory.
func (l *Log) Root() string { return l.root }

// Store returns the owner's resident store, for the components that ship,
// reclaim and observe it. Writes through it bypass routing; only events the
// replica owns may be appended to it.
func (l *Log) Store() *localseg.Store { return l.store }

// Close closes the resident store. Later calls fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.store.Close()
}

// owned returns the resident store for an operation, holding the read lock;
// the caller must call l.mu.RUnlock.
func (l *Log) ownedRLocked() (*localseg.Store, error) {
	if l.closed {
		return nil, ErrClosed
	}
	return l.store, nil
}

// route validates ev and refuses it when another shard owns it.
func (l *Log) route(ev localseg.Event) error {
	if err := validateEvent(ev); err != nil {
		return err
	}
	if owner := l.own.OwnerOf(ev.ExecutionID); owner != l.own.Index {
		return &affinity.NotOwnerError{Owner: owner, Shard: l.own.Index, ExecutionID: strings.TrimSpace(ev.ExecutionID)}
	}
	return nil
}

// Append appends ev when this replica owns its execution. Otherwise it
// returns a *affinity.NotOwnerError naming the owner and touches no store: no byte
// is written and no sequence is consumed, so re-routing the event to its
// owner can never duplicate it. An invalid event is refused as
// localseg.ErrInvalidInput whichever replica receives it.
func (l *Log) Append(ev localseg.Event) (localseg.AppendResult, error) {
	if err := l.route(ev); err != nil {
		return localseg.AppendResult{}, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	st, err := l.ownedRLocked()
	if err != nil {
		return localseg.AppendResult{}, err
	}
	return st.Append(ev)
}

// AppendBatch appends evs when this replica owns every one of them. The
// batch is checked whole before anything is written: one invalid or
// non-owned event refuses the batch (the first such event names the error)
// and nothing is written.
func (l *Log) AppendBatch(evs []localseg.Event) (first, last uint64, err error) {
	for i, ev := range evs {
		if err := l.route(ev); err != nil {
			return 0, 0, fmt.Errorf("batch event %d: %w", i, err)
		}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	st, err := l.ownedRLocked()
	if err != nil {
		return 0, 0, err
	}
	return st.AppendBatch(evs)
}

// Read reads executionID's events after the given sequence. The owner
// serves it from its resident store; any other replica cold-loads the
// owner's shard read-only. The result says which.
func (l *Log) Read(executionID string, after uint64, limit int) (ReadResult, error) {
	if err := validateID("execution id", executionID); err != nil {
		return ReadResult{}, err
	}
	shard := l.own.OwnerOf(executionID)
	return l.read(shard, func(r affinity.Reader) (localseg.Page, error) {
		return r.ReadExecution(executionID, after, limit)
	})
}

// ScanShard scans shard's whole log after the given sequence, served like
// Read.
func (l *Log) ScanShard(shard int, after uint64, limit int) (ReadResult, error) {
	if shard < 0 || shard >= l.own.Count {
		return ReadResult{}, fmt.Errorf("%w: shard %d is not in a pool of %d", localseg.ErrInvalidInput, shard, l.own.Count)
	}
	return l.read(shard, func(r affinity.Reader) (localseg.Page, error) { return r.Scan(after, limit) })
}

func (l *Log) read(shard int, op func(affinity.Reader) (localseg.Page, error)) (ReadResult, error) {
	if shard == l.own.Index {
		l.mu.RLock()
		defer l.mu.RUnlock()
		st, err := l.ownedRLocked()
		if err != nil {
			return ReadResult{}, err
		}
		p, err := op(st)
		if err != nil {
			return ReadResult{}, err
		}
		return ReadResult{Page: p, Shard: shard, ServedBy: affinity.ServedByOwnerResident}, nil
	}
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ReadResult{}, ErrClosed
	}
	r, err := l.cold(shard)
	if err != nil {
		return ReadResult{}, err
	}
	p, err := op(r)
	if cerr := r.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close cold load of shard %d: %w", shard, cerr)
	}
	if err != nil {
		return ReadResult{}, err
	}
	return ReadResult{Page: p, Shard: shard, ServedBy: affinity.ServedByNonOwnerColdLoad}, nil
}

// checkShard refuses consumer operations on a shard this replica does not
// own: a consumer's cursor is writer state, so only the owner may move it.
func (l *Log) checkShard(shard int) error {
	if shard != l.own.Index {
		return &affinity.NotOwnerError{Owner: shard, Shard: l.own.Index}
	}
	return nil
}

// Pull pulls up to limit events for consumer from shard. Only the owner of
// shard may; any other replica is refused with a *affinity.NotOwnerError.
func (l *Log) Pull(shard int, consumer string, limit int) (localseg.PullResult, error) {
	if err := l.checkShard(shard); err != nil {
		return localseg.PullResult{}, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	st, err := l.ownedRLocked()
	if err != nil {
		return localseg.PullResult{}, err
	}
	return st.Pull(consumer, limit)
}

// Ack moves consumer's cursor on shard. Only the owner of shard may.
func (l *Log) Ack(shard int, consumer string, seq uint64) (uint64, error) {
	if err := l.checkShard(shard); err != nil {
		return 0, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	st, err := l.ownedRLocked()
	if err != nil {
		return 0, err
	}
	return st.Ack(consumer, seq)
}

// DeleteConsumer removes consumer from shard. Only the owner of shard may.
func (l *Log) DeleteConsumer(shard int, consumer string) error {
	if err := l.checkShard(shard); err != nil {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	st, err := l.ownedRLocked()
	if err != nil {
		return err
	}
	return st.DeleteConsumer(consumer)
}

// validateEvent checks what routing needs before any store is involved, so
// that an invalid event is invalid on every replica (not "not owner" on
// some). It is the store's own rule; the owner's store also checks the size
// limit, which depends on its segment size.
func validateEvent(ev localseg.Event) error {
	_, err := localseg.ValidateEvent(ev, 0)
	return err
}

// validateID is the store's identifier rule.
func validateID(what, raw string) error {
	_, err := localseg.ValidateName(what, raw)
	return err
}
