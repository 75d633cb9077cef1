package localref

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// Record kinds of the JSONL file, one JSON object a line.
const (
	kindEvent          = "event"
	kindConsumerCreate = "consumer_create"
	kindAck            = "ack"
	kindConsumerDelete = "consumer_delete"
)

// line is one record of the file. Which fields are used depends on Kind.
type line struct {
	Kind          string `json:"kind"`
	Seq           uint64 `json:"global_sequence,omitempty"`
	ExecutionID   string `json:"execution_id,omitempty"`
	TransactionID string `json:"transaction_id,omitempty"`
	Payload       string `json:"payload,omitempty"`
	Consumer      string `json:"consumer,omitempty"`
	Sequence      uint64 `json:"sequence,omitempty"`
}

// Options configure a Driver. The zero value works.
type Options struct {
	// SegmentMaxBytes is the size limit mirrored from the durable store: an
	// event whose durable frame would be larger is refused, so that both
	// drivers accept the same events. Default localseg.DefaultSegmentMaxBytes.
	SegmentMaxBytes int64
}

// Driver is the local_reference event log: one JSONL file. It is safe for
// concurrent use.
type Driver struct {
	path     string
	maxFrame int64
	lock     io.Closer

	mu        sync.Mutex
	f         *os.File
	size      int64 // the end of the last whole line
	events    []localseg.Record
	byExec    map[string][]int // execution id → indexes into events
	consumers map[string]uint64
	poisoned  error
	closed    bool
}

// Open opens (creating) the log file at path. A last line without its
// newline is a torn write: it is dropped and the file truncated to the last
// whole line. Any whole line that does not decode, an unknown record kind, a
// gap in the sequence or a consumer record for an unknown consumer is
// corruption (localseg.ErrCorrupt), never skipped. A second Open of the same
// path fails with localseg.ErrLocked while the first is open.
func Open(path string, opts Options) (*Driver, error) {
	max := opts.SegmentMaxBytes
	if max <= 0 {
		max = localseg.DefaultSegmentMaxBytes
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("localref: %w", err)
	}
	lock, err := localseg.OSFS{}.Lock(path + ".lock")
	if err != nil {
		return nil, err
	}
	d := &Driver{path: path, maxFrame: max, lock: lock, byExec: map[string][]int{}, consumers: map[string]uint64{}}
	if err := d.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return d, nil
}

func (d *Driver) load() error {
	f, err := os.OpenFile(d.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("localref: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("localref: read %s: %w", d.path, err)
	}
	end := int64(bytes.LastIndexByte(data, '\n') + 1)
	if end < int64(len(data)) {
		// A crash cut the last line: it was never acknowledged.
		if err := f.Truncate(end); err != nil {
			f.Close()
			return fmt.Errorf("localref: truncate torn line of %s: %w", d.path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("localref: sync %s: %w", d.path, err)
		}
	}
	lineNo := 0
	for rest := data[:end]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		raw := rest[:i]
		rest = rest[i+1:]
		lineNo++
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			f.Close()
			return fmt.Errorf("%w: %s line %d: %v", localseg.ErrCorrupt, d.path, lineNo, err)
		}
		if err := d.apply(l); err != nil {
			f.Close()
			return fmt.Errorf("%w: %s line %d: %v", localseg.ErrCorrupt, d.path, lineNo, err)
		}
	}
	d.f, d.size = f, end
	return nil
}

// apply folds one record into the in-memory state.
func (d *Driver) apply(l line) error {
	switch l.Kind {
	case kindEvent:
		if want := uint64(len(d.events)) + 1; l.Seq != want {
			return fmt.Errorf("sequence %d where %d was expected", l.Seq, want)
		}
		d.byExec[l.ExecutionID] = append(d.byExec[l.ExecutionID], len(d.events))
		d.events = append(d.events, localseg.Record{Seq: l.Seq, ExecutionID: l.ExecutionID, TransactionID: l.TransactionID, Payload: l.Payload})
	case kindConsumerCreate:
		if _, ok := d.consumers[l.Consumer]; !ok {
			d.consumers[l.Consumer] = 0
		}
	case kindAck:
		cur, ok := d.consumers[l.Consumer]
		if !ok {
			return fmt.Errorf("ack for unknown consumer %q", l.Consumer)
		}
		if l.Sequence > cur {
			d.consumers[l.Consumer] = l.Sequence
		}
	case kindConsumerDelete:
		delete(d.consumers, l.Consumer)
	default:
		return fmt.Errorf("unknown record kind %q", l.Kind)
	}
	return nil
}

// writeLocked appends records as whole lines and fsyncs them before
// returning. A failed write or fsync poisons the driver: nothing is retried
// and acknowledged later, because after a failed fsync the kernel may have
// dropped the dirty pages.
func (d *Driver) writeLocked(ls ...line) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range ls {
		if err := enc.Encode(&ls[i]); err != nil {
			return fmt.Errorf("localref: encode: %w", err)
		}
	}
	if _, err := d.f.WriteAt(buf.Bytes(), d.size); err != nil {
		d.poisoned = err
		return fmt.Errorf("%w: write %s: %v", localseg.ErrPoisoned, d.path, err)
	}
	if err := unix.Fdatasync(int(d.f.Fd())); err != nil {
		d.poisoned = err
		return fmt.Errorf("%w: fsync %s: %v", localseg.ErrPoisoned, d.path, err)
	}
	d.size += int64(buf.Len())
	for _, l := range ls {
		if err := d.apply(l); err != nil {
			return fmt.Errorf("localref: %w", err)
		}
	}
	return nil
}

func (d *Driver) checkLocked(write bool) error {
	if d.closed {
		return localseg.ErrClosed
	}
	if write && d.poisoned != nil {
		return fmt.Errorf("%w: %v", localseg.ErrPoisoned, d.poisoned)
	}
	return nil
}

// checkSize refuses an event whose durable frame would exceed the segment
// size, the same limit the durable store applies.
func (d *Driver) checkSize(ev localseg.Event, seq uint64) error {
	enc, err := frame.Encode(nil, &frame.Frame{Kind: frame.KindEvent, Seq: seq, ExecutionID: ev.ExecutionID, TransactionID: ev.TransactionID, Payload: ev.Payload})
	if err != nil {
		return fmt.Errorf("localref: size event: %w", err)
	}
	if int64(len(enc)) > d.maxFrame {
		return fmt.Errorf("%w: a frame of %d bytes exceeds the segment size %d", localseg.ErrTooLarge, len(enc), d.maxFrame)
	}
	return nil
}

func eventLine(ev localseg.Event, seq uint64) line {
	return line{Kind: kindEvent, Seq: seq, ExecutionID: ev.ExecutionID, TransactionID: ev.TransactionID, Payload: ev.Payload}
}

// Append appends one event and returns after its fsync.
func (d *Driver) Append(ev localseg.Event) (localseg.AppendResult, error) {
	ev, err := validateEvent(ev)
	if err != nil {
		return localseg.AppendResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(true); err != nil {
		return localseg.AppendResult{}, err
	}
	seq := uint64(len(d.events)) + 1
	if err := d.checkSize(ev, seq); err != nil {
		return localseg.AppendResult{}, err
	}
	if err := d.writeLocked(eventLine(ev, seq)); err != nil {
		return localseg.AppendResult{}, err
	}
	return localseg.AppendResult{Seq: seq, Created: seq == 1, Tip: seq}, nil
}

// AppendBatch validates every event, then writes them with one fsync.
func (d *Driver) AppendBatch(evs []localseg.Event) (first, last uint64, err error) {
	if len(evs) == 0 {
		return 0, 0, fmt.Errorf("%w: empty batch", localseg.ErrInvalidInput)
	}
	checked := make([]localseg.Event, len(evs))
	for i, ev := range evs {
		if checked[i], err = validateEvent(ev); err != nil {
			return 0, 0, fmt.Errorf("batch event %d: %w", i, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(true); err != nil {
		return 0, 0, err
	}
	first = uint64(len(d.events)) + 1
	ls := make([]line, len(checked))
	for i, ev := range checked {
		if err := d.checkSize(ev, first+uint64(i)); err != nil {
			return 0, 0, fmt.Errorf("batch event %d: %w", i, err)
		}
		ls[i] = eventLine(ev, first+uint64(i))
	}
	if err := d.writeLocked(ls...); err != nil {
		return 0, 0, err
	}
	return first, first + uint64(len(ls)) - 1, nil
}

// Scan returns up to limit events after the given sequence.
func (d *Driver) Scan(after uint64, limit int) (localseg.Page, error) {
	if err := checkLimit(limit); err != nil {
		return localseg.Page{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(false); err != nil {
		return localseg.Page{}, err
	}
	p := localseg.Page{Exists: len(d.events) > 0, Base: 1}
	tip := uint64(len(d.events))
	if after >= tip {
		return p, nil
	}
	p.RecordCount = tip - after
	n := min(uint64(limit), p.RecordCount)
	p.Records = append([]localseg.Record(nil), d.events[after:after+n]...)
	return p, nil
}

// ReadExecution returns up to limit events of one execution after the
// given sequence.
func (d *Driver) ReadExecution(executionID string, after uint64, limit int) (localseg.Page, error) {
	id, err := validateID("execution id", executionID)
	if err != nil {
		return localseg.Page{}, err
	}
	if err := checkLimit(limit); err != nil {
		return localseg.Page{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(false); err != nil {
		return localseg.Page{}, err
	}
	idx := d.byExec[id]
	p := localseg.Page{Exists: len(idx) > 0, Base: 1}
	for _, i := range idx {
		if d.events[i].Seq <= after {
			continue
		}
		p.RecordCount++
		if len(p.Records) < limit {
			p.Records = append(p.Records, d.events[i])
		}
	}
	return p, nil
}

// Pull returns up to limit events after consumer's cursor, creating the
// consumer on its first pull of a non-empty log. A pull of an empty log
// answers Exists false and writes nothing.
func (d *Driver) Pull(consumer string, limit int) (localseg.PullResult, error) {
	name, err := validateID("consumer", consumer)
	if err != nil {
		return localseg.PullResult{}, err
	}
	if err := checkLimit(limit); err != nil {
		return localseg.PullResult{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(false); err != nil {
		return localseg.PullResult{}, err
	}
	tip := uint64(len(d.events))
	if tip == 0 {
		return localseg.PullResult{}, nil
	}
	var r localseg.PullResult
	r.Exists = true
	cur, ok := d.consumers[name]
	if !ok {
		if err := d.checkLocked(true); err != nil {
			return localseg.PullResult{}, err
		}
		if err := d.writeLocked(line{Kind: kindConsumerCreate, Consumer: name}); err != nil {
			return localseg.PullResult{}, err
		}
		r.Created = true
	}
	r.Acked = cur
	r.Pending = tip - cur
	n := min(uint64(limit), r.Pending)
	r.Records = append([]localseg.Record(nil), d.events[cur:cur+n]...)
	return r, nil
}

// Ack moves consumer's cursor to seq and returns the cursor. Acking at or
// below the cursor (but above 0) is a no-op; 0 or beyond the tip is an
// invalid-state error; an unknown consumer is localseg.ErrUnknownConsumer.
func (d *Driver) Ack(consumer string, seq uint64) (uint64, error) {
	name, err := validateID("consumer", consumer)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(false); err != nil {
		return 0, err
	}
	cur, ok := d.consumers[name]
	if !ok {
		return 0, fmt.Errorf("%w: %q", localseg.ErrUnknownConsumer, name)
	}
	tip := uint64(len(d.events))
	if seq == 0 || seq > tip {
		return 0, fmt.Errorf("%w: ack of sequence %d outside 1..%d", localseg.ErrInvalidState, seq, tip)
	}
	if seq <= cur {
		return cur, nil
	}
	if err := d.checkLocked(true); err != nil {
		return 0, err
	}
	if err := d.writeLocked(line{Kind: kindAck, Consumer: name, Sequence: seq}); err != nil {
		return 0, err
	}
	return seq, nil
}

// DeleteConsumer removes consumer; it does not come back on reopen.
func (d *Driver) DeleteConsumer(consumer string) error {
	name, err := validateID("consumer", consumer)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(true); err != nil {
		return err
	}
	if _, ok := d.consumers[name]; !ok {
		return fmt.Errorf("%w: %q", localseg.ErrUnknownConsumer, name)
	}
	return d.writeLocked(line{Kind: kindConsumerDelete, Consumer: name})
}

// Tip returns the highest sequence.
func (d *Driver) Tip() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return uint64(len(d.events))
}

// Close closes the file and releases the lock. Later calls fail with
// localseg.ErrClosed; a second Close returns nil.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.f.Close()
	if lerr := d.lock.Close(); err == nil {
		err = lerr
	}
	if errors.Is(err, fs.ErrClosed) {
		err = nil
	}
	return err
}
