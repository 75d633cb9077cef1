// Package faultbucket is a gocloud blob driver that injects faults into the
// bucket it wraps, for tests: refusals with any gcerrors code, delays,
// writes that land but report failure (a lost answer), objects truncated,
// extended or corrupted on the way in or out, objects hidden from listings
// for a while, and failing deletes. It sits below *blob.Bucket (open it with
// Bucket(), which is blob.NewBucket over the wrapper), so everything above
// it — blobtier's verification, retries, error mapping and compare-and-swap
// hooks — runs unchanged.
//
// Faults are Rules, matched per operation and key pattern, added and removed
// at runtime. Random choices (a rule's probability, which byte to corrupt)
// come from one generator seeded at construction, so a single-goroutine test
// sees the same faults on every run. Every injected fault is counted by
// kind, so a test can check that each one was seen (for example that every
// fault shows up in a metric).
//
// The wrapped bucket is usually a *blob.Bucket (memblob, s3blob, gcsblob,
// fileblob): gocloud keeps drivers private and the provider packages export
// only *blob.Bucket constructors, so New adapts the portable type back into
// a driver. As, ErrorAs and the BeforeWrite/BeforeRead hooks are forwarded,
// so blobtier still finds the S3 or GCS client behind it and can
// compare-and-swap through the faults. NewDriver wraps a driver directly.
//
// A Bucket is safe for concurrent use. Writes are buffered and committed at
// Close (the moment a real upload completes), which is when write rules are
// consulted.
package faultbucket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier/internal/blobdriver"
)

// Op is the operation a rule matches.
type Op string

const (
	OpAny    Op = ""       // every operation
	OpRead   Op = "read"   // opening a reader and the bytes it returns
	OpWrite  Op = "write"  // a write, decided when the writer closes
	OpStat   Op = "stat"   // Attributes
	OpList   Op = "list"   // one list request (one page)
	OpDelete Op = "delete" // Delete
	OpCopy   Op = "copy"   // Copy (matched on the destination key)

	// OpRangeRead is a read of part of an object (blobtier's GetRange): an
	// OpRead rule matches it too, an OpRangeRead rule matches nothing else.
	OpRangeRead Op = "range_read"
)

// Kind is what a rule does.
type Kind string

const (
	// Refuse fails the operation with Code; nothing happens in the bucket.
	Refuse Kind = "refuse"
	// Delay waits Delay (or until the request's context ends, which fails
	// it) before the operation proceeds.
	Delay Kind = "delay"
	// LostAck lets a write or delete land, then reports Code: the answer
	// was lost.
	LostAck Kind = "lost_ack"
	// Truncate drops the last Bytes bytes (default: half, at least one) of
	// what is read or written.
	Truncate Kind = "truncate"
	// Extend appends Bytes bytes (default 1) to what is read or written.
	Extend Kind = "extend"
	// Corrupt flips one bit of one byte (chosen by the seed) of what is read
	// or written. A read that finds no object alters nothing: Truncate,
	// Extend and Corrupt do not count it as fired (Times, Fired, Counts).
	Corrupt Kind = "corrupt"
	// Hide leaves matching objects out of listings, for the next Listings
	// list requests or for the duration For after the rule is added (both
	// zero: until removed). Each object left out is one fault.
	Hide Kind = "hide"
)

// Kinds lists every kind, so a metrics test can walk them.
var Kinds = []Kind{Refuse, Delay, LostAck, Truncate, Extend, Corrupt, Hide}

// Rule is one fault. The zero values of the optional fields mean: any key,
// always, every time, code Internal.
type Rule struct {
	Op   Op
	Kind Kind
	// Key is a path.Match pattern over the object key ("*" and "" match
	// every key). Refuse and Delay rules on OpList match the listing prefix.
	Key string
	// Code is the error of Refuse and LostAck (default gcerrors.Internal).
	Code gcerrors.ErrorCode
	// Delay is the wait of a Delay rule.
	Delay time.Duration
	// Bytes is how many bytes Truncate drops or Extend adds.
	Bytes int
	// Prob is the chance a matching operation is hit (0 means always).
	Prob float64
	// Skip lets the first Skip matching operations through untouched.
	Skip int
	// Times stops the rule after it fired Times times (0: no limit).
	Times int
	// Listings and For bound a Hide rule (see Hide).
	Listings int
	For      time.Duration
}

// Error is an injected failure. Its gcerrors code is Code.
type Error struct {
	Op   Op
	Key  string
	Kind Kind
	Code gcerrors.ErrorCode
}

func (e *Error) Error() string {
	return fmt.Sprintf("faultbucket: injected %s (%v) on %s %q", e.Kind, e.Code, e.Op, e.Key)
}

// ErrBadRule is returned by Add for a rule that cannot apply.
var ErrBadRule = errors.New("faultbucket: bad rule")

type rule struct {
	Rule
	id       int
	added    time.Time
	matches  int // matching operations seen (for Skip)
	fired    int
	listings int // list requests a Hide rule has applied to
}

// Bucket is the fault-injecting driver.
type Bucket struct {
	inner    driver.Bucket
	portable *blob.Bucket

	mu     sync.Mutex
	rules  []*rule
	nextID int
	rng    *rand.Rand
	counts map[Kind]int64
	now    func() time.Time
}

var _ driver.Bucket = (*Bucket)(nil)

// New wraps an opened *blob.Bucket; closing the wrapper closes it.
func New(inner *blob.Bucket, seed uint64) *Bucket {
	return NewDriver(blobdriver.New(inner, false), seed)
}

// NewDriver wraps a driver.
func NewDriver(inner driver.Bucket, seed uint64) *Bucket {
	f := &Bucket{
		inner:  inner,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		counts: map[Kind]int64{},
		now:    time.Now,
	}
	f.portable = blob.NewBucket(f)
	return f
}

// Bucket is the portable bucket over the wrapper (always the same one).
func (f *Bucket) Bucket() *blob.Bucket { return f.portable }

// SetClock replaces the clock Hide rules' For is measured with.
func (f *Bucket) SetClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// Add installs r and returns its id.
func (f *Bucket) Add(r Rule) (int, error) {
	if err := check(&r); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.rules = append(f.rules, &rule{Rule: r, id: f.nextID, added: f.now()})
	return f.nextID, nil
}

// MustAdd is Add for rules known to be valid; it panics on a bad rule (a
// bug in the test that wrote it).
func (f *Bucket) MustAdd(r Rule) int {
	id, err := f.Add(r)
	if err != nil {
		panic(err)
	}
	return id
}

// Remove uninstalls rule id and reports whether it was installed.
func (f *Bucket) Remove(id int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.rules {
		if r.id == id {
			f.rules = slices.Delete(f.rules, i, i+1)
			return true
		}
	}
	return false
}

// Clear uninstalls every rule. Counts are kept.
func (f *Bucket) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Fired is how many faults rule id injected (0 once removed).
func (f *Bucket) Fired(id int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.id == id {
			return r.fired
		}
	}
	return 0
}

// Count is how many faults of kind were injected.
func (f *Bucket) Count(kind Kind) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[kind]
}

// Counts is every kind's count (kinds never injected included, at zero).
func (f *Bucket) Counts() map[Kind]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Kind]int64, len(Kinds))
	for _, k := range Kinds {
		out[k] = f.counts[k]
	}
	return out
}

// Total is how many faults were injected.
func (f *Bucket) Total() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, c := range f.counts {
		n += c
	}
	return n
}

func check(r *Rule) error {
	bad := func(why string) error { return fmt.Errorf("%w: %+v: %s", ErrBadRule, *r, why) }
	switch r.Op {
	case OpAny, OpRead, OpRangeRead, OpWrite, OpStat, OpList, OpDelete, OpCopy:
	default:
		return bad("unknown op")
	}
	if _, err := path.Match(r.Key, ""); err != nil {
		return bad("key pattern: " + err.Error())
	}
	if r.Prob < 0 || r.Prob > 1 {
		return bad("probability outside [0, 1]")
	}
	if r.Skip < 0 || r.Times < 0 || r.Bytes < 0 || r.Listings < 0 || r.For < 0 || r.Delay < 0 {
		return bad("negative count or duration")
	}
	if r.Code == gcerrors.OK {
		r.Code = gcerrors.Internal
	}
	switch r.Kind {
	case Refuse:
	case Delay:
		if r.Delay <= 0 {
			return bad("a delay rule needs Delay > 0")
		}
	case LostAck:
		if r.Op != OpWrite && r.Op != OpDelete && r.Op != OpCopy {
			return bad("lost_ack applies to write, delete or copy")
		}
	case Truncate, Extend, Corrupt:
		if r.Op != OpRead && r.Op != OpRangeRead && r.Op != OpWrite {
			return bad(string(r.Kind) + " applies to read or write")
		}
		if r.Kind == Extend && r.Bytes == 0 {
			r.Bytes = 1
		}
	case Hide:
		if r.Op == OpAny {
			r.Op = OpList
		}
		if r.Op != OpList {
			return bad("hide applies to list")
		}
	default:
		return bad("unknown kind")
	}
	return nil
}

// opMatches reports whether a rule on ruleOp applies to an operation op (a
// ranged read is a read).
func opMatches(ruleOp, op Op) bool {
	return ruleOp == OpAny || ruleOp == op || (ruleOp == OpRead && op == OpRangeRead)
}

func keyMatches(pattern, key string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	ok, _ := path.Match(pattern, key)
	return ok
}

// effects is what the rules decided for one operation.
type effects struct {
	delay   time.Duration
	refuse  *Error
	lostAck *Error
	mutate  []mutation
}

type mutation struct {
	kind  Kind
	bytes int
	pick  uint64 // random draw for Corrupt's position
	rule  *rule  // the rule it came from (unfired when nothing was read)
}

// decide consults every rule (except Hide) for one operation on key and
// counts what fires.
func (f *Bucket) decide(op Op, key string) effects {
	f.mu.Lock()
	defer f.mu.Unlock()
	var e effects
	for _, r := range f.rules {
		if r.Kind == Hide || !opMatches(r.Op, op) || !keyMatches(r.Key, key) {
			continue
		}
		r.matches++
		if r.matches <= r.Skip || (r.Times > 0 && r.fired >= r.Times) {
			continue
		}
		if r.Prob > 0 && f.rng.Float64() >= r.Prob {
			continue
		}
		switch r.Kind {
		case Delay:
			e.delay += r.Delay
		case Refuse:
			if e.refuse != nil {
				continue
			}
			e.refuse = &Error{Op: op, Key: key, Kind: Refuse, Code: r.Code}
		case LostAck:
			if e.lostAck != nil {
				continue
			}
			e.lostAck = &Error{Op: op, Key: key, Kind: LostAck, Code: r.Code}
		case Truncate, Extend, Corrupt:
			e.mutate = append(e.mutate, mutation{kind: r.Kind, bytes: r.Bytes, pick: f.rng.Uint64(), rule: r})
		}
		r.fired++
		f.counts[r.Kind]++
	}
	return e
}

// wait applies a delay, failing if ctx ends first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unfire takes back the firing of mutations that altered nothing.
func (f *Bucket) unfire(ms []mutation) {
	if len(ms) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range ms {
		m.rule.fired--
		f.counts[m.kind]--
	}
}

// apply runs the mutations on a copy of data.
func apply(data []byte, ms []mutation) []byte {
	if len(ms) == 0 {
		return data
	}
	out := bytes.Clone(data)
	for _, m := range ms {
		switch m.kind {
		case Truncate:
			cut := m.bytes
			if cut == 0 {
				cut = max(len(out)/2, 1)
			}
			out = out[:max(len(out)-cut, 0)]
		case Extend:
			for i := range m.bytes {
				out = append(out, byte(0xa5+i))
			}
		case Corrupt:
			if len(out) > 0 {
				pos := int(m.pick % uint64(len(out)))
				out[pos] ^= 1 << ((m.pick >> 32) % 8)
			}
		}
	}
	return out
}

func (f *Bucket) ErrorCode(err error) gcerrors.ErrorCode {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return f.inner.ErrorCode(err)
}

func (f *Bucket) As(i any) bool { return f.inner.As(i) }

func (f *Bucket) ErrorAs(err error, i any) bool { return f.inner.ErrorAs(err, i) }

func (f *Bucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	e := f.decide(OpStat, key)
	if err := wait(ctx, e.delay); err != nil {
		return nil, err
	}
	if e.refuse != nil {
		return nil, e.refuse
	}
	return f.inner.Attributes(ctx, key)
}

func (f *Bucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	e := f.decide(OpList, opts.Prefix)
	if err := wait(ctx, e.delay); err != nil {
		return nil, err
	}
	if e.refuse != nil {
		return nil, e.refuse
	}
	page, err := f.inner.ListPaged(ctx, opts)
	if err != nil {
		return nil, err
	}
	f.hide(page)
	return page, nil
}

// hide removes the objects of page that an active Hide rule covers. Each
// call is one list request for the rules' Listings budget.
func (f *Bucket) hide(page *driver.ListPage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var active []*rule
	now := f.now()
	for _, r := range f.rules {
		if r.Kind != Hide {
			continue
		}
		if r.For > 0 && !now.Before(r.added.Add(r.For)) {
			continue
		}
		if r.Listings > 0 {
			if r.listings >= r.Listings {
				continue
			}
			r.listings++
		}
		active = append(active, r)
	}
	if len(active) == 0 {
		return
	}
	kept := page.Objects[:0]
	for _, o := range page.Objects {
		hidden := false
		for _, r := range active {
			if keyMatches(r.Key, o.Key) {
				hidden = true
				r.fired++
				f.counts[Hide]++
				break
			}
		}
		if !hidden {
			kept = append(kept, o)
		}
	}
	page.Objects = kept
}

func (f *Bucket) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	op := OpRead
	if offset > 0 || length >= 0 {
		op = OpRangeRead // gocloud reads a whole object with offset 0, length -1
	}
	e := f.decide(op, key)
	if err := wait(ctx, e.delay); err != nil {
		return nil, err
	}
	if e.refuse != nil {
		return nil, e.refuse
	}
	r, err := f.inner.NewRangeReader(ctx, key, offset, length, opts)
	if err != nil {
		// Nothing was read (a missing key), so nothing was altered: the
		// mutations did not fire and stay for the next read with bytes.
		f.unfire(e.mutate)
		return nil, err
	}
	if len(e.mutate) == 0 {
		return r, nil
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return &reader{Reader: bytes.NewReader(apply(data, e.mutate)), attrs: *r.Attributes(), as: r.As}, nil
}

// reader serves bytes altered on the way out; it keeps the attributes the
// server sent (a size that no longer matches, as a broken server's would).
type reader struct {
	*bytes.Reader
	attrs driver.ReaderAttributes
	as    func(any) bool
}

func (r *reader) Close() error                         { return nil }
func (r *reader) Attributes() *driver.ReaderAttributes { return &r.attrs }
func (r *reader) As(i any) bool                        { return r.as(i) }

func (f *Bucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	o := driver.WriterOptions{}
	if opts != nil {
		o = *opts
	}
	return &writer{f: f, ctx: ctx, key: key, contentType: contentType, opts: o}, nil
}

// writer buffers the object and commits it at Close, the point where a real
// upload completes and where write rules decide.
type writer struct {
	f           *Bucket
	ctx         context.Context
	key         string
	contentType string
	opts        driver.WriterOptions
	buf         bytes.Buffer
}

func (w *writer) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *writer) Close() error {
	e := w.f.decide(OpWrite, w.key)
	if err := wait(w.ctx, e.delay); err != nil {
		return err
	}
	if e.refuse != nil {
		return e.refuse
	}
	data := w.buf.Bytes()
	opts := w.opts
	if len(e.mutate) > 0 {
		data = apply(data, e.mutate)
		// The caller's MD5 describes the bytes it meant; a server that
		// stores other bytes does not check it.
		opts.ContentMD5 = nil
	}
	dw, err := w.f.inner.NewTypedWriter(w.ctx, w.key, w.contentType, &opts)
	if err != nil {
		return err
	}
	if _, err := dw.Write(data); err != nil {
		_ = dw.Close()
		return err
	}
	if err := dw.Close(); err != nil {
		return err
	}
	if e.lostAck != nil {
		return e.lostAck
	}
	return nil
}

func (f *Bucket) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	e := f.decide(OpCopy, dstKey)
	if err := wait(ctx, e.delay); err != nil {
		return err
	}
	if e.refuse != nil {
		return e.refuse
	}
	if err := f.inner.Copy(ctx, dstKey, srcKey, opts); err != nil {
		return err
	}
	if e.lostAck != nil {
		return e.lostAck
	}
	return nil
}

func (f *Bucket) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	e := f.decide(OpDelete, key)
	if err := wait(ctx, e.delay); err != nil {
		return err
	}
	if e.refuse != nil {
		return e.refuse
	}
	if err := f.inner.Delete(ctx, key, opts); err != nil {
		return err
	}
	if e.lostAck != nil {
		return e.lostAck
	}
	return nil
}

func (f *Bucket) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	return f.inner.SignedURL(ctx, key, opts)
}

func (f *Bucket) Close() error { return f.inner.Close() }
