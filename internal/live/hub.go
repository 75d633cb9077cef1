package live

import (
	"errors"
	"sync"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// HubPage is how many records the hub reads at a time.
const HubPage = 1024

// hubPagesPerPublish bounds how many pages the hub reads before it
// publishes what it has.
const hubPagesPerPublish = 16

// Default publication gaps (Hub.MinGap, Hub.GapPerSub).
const (
	DefaultMinGap = 2 * time.Millisecond
	// DefaultGapPerSub: a publication costs each subscriber a fixed
	// ~20 µs (a wake-up and a loopback write here, a wake-up and a read
	// in the subscriber) however few records it carries, so 500 µs per
	// subscriber keeps that fixed cost of a busy stream at ~4% of one
	// core (it was 100 µs: ~20%, BENCHMARKS.md, Live reads).
	DefaultGapPerSub = 500 * time.Microsecond
	// DefaultMaxGap caps the per-subscriber part: with many subscribers
	// delivery latency stays bounded (10,000 subscribers would otherwise
	// wait a second per publication) at the cost of delivery CPU.
	DefaultMaxGap = 50 * time.Millisecond
)

// ErrOverflow ends a subscription whose buffer filled: the subscriber did
// not take its records as fast as they were committed.
var ErrOverflow = errors.New("live: subscriber buffer full")

// Item is one record as a subscriber receives it: its sequence and its
// encoding (made once per record, shared by every subscriber).
type Item struct {
	Seq   uint64
	Frame []byte
	// A whole-log subscriber's frames lie in their publication's block,
	// Frame at off (Runs joins adjacent ones); nil for an execution's.
	block []byte
	off   int
}

// Hub fans the records a store commits out to live subscribers: one
// goroutine (running only while someone subscribes) reads each commit's
// records once and encodes each once into a shared tail (a ring of
// frames) that every whole-log subscriber reads through its own cursor,
// so a record costs one read and one encoding however many subscribe,
// and a commit costs the hub one signal per subscriber. Publications are
// coalesced: after one, the next waits out the gap (MinGap, or GapPerSub
// per subscriber when larger), so under load each subscriber is woken
// once per gap for all the records committed in it, and delivery's share
// of the CPU is bounded by construction; the first commit after a quiet
// gap is published at once. The hub never waits for a subscriber: one
// whose untaken records exceed maxItems or maxBytes is ended
// (ErrOverflow), holding exactly what fitted. A subscriber of one
// execution gets its records copied into its own bounded buffer. A
// subscriber catches up on history by reading the store itself and joins
// once it has reached the hub's position. Safe for concurrent use; set
// MinGap, GapPerSub and MaxGap before the first Join.
type Hub struct {
	src      Source
	scan     func(after uint64, limit int) ([]localseg.Record, bool, error)
	encode   func(localseg.Record) []byte
	maxItems int
	maxBytes int

	MinGap    time.Duration // at least this between two publications
	GapPerSub time.Duration // and at least this per subscriber
	MaxGap    time.Duration // but the per-subscriber part at most this (0: no cap)

	mu      sync.Mutex
	subs    map[*Sub]struct{}
	running bool
	pos     uint64 // every record ≤ pos was offered to the subscribers
	// The shared tail: tail[i] is item number base+i (counted from the
	// hub's start); cum[i] the bytes of all items through it. It holds
	// what some whole-log subscriber has not taken, at most maxItems and
	// maxBytes beyond the slowest (a slower one is ended).
	tail []Item
	cum  []uint64
	base uint64
	kick chan struct{} // a subscriber left: the loop re-checks
	wg   sync.WaitGroup
}

// NewHub is a hub over src; scan reads the records after a sequence
// (and says when it stopped short of limit for a byte budget),
// encode frames one; a subscriber holds at most maxItems records and
// maxBytes bytes of frames untaken (one record always fits).
func NewHub(src Source, scan func(after uint64, limit int) ([]localseg.Record, bool, error), encode func(localseg.Record) []byte, maxItems, maxBytes int) *Hub {
	return &Hub{src: src, scan: scan, encode: encode, maxItems: max(maxItems, 1), maxBytes: maxBytes,
		MinGap: DefaultMinGap, GapPerSub: DefaultGapPerSub, MaxGap: DefaultMaxGap,
		subs: map[*Sub]struct{}{}, kick: make(chan struct{}, 1)}
}

// gap is the wait between two publications with n subscribers: MinGap,
// or GapPerSub per subscriber (capped at MaxGap) when longer.
func (h *Hub) gap(n int) time.Duration {
	per := h.GapPerSub * time.Duration(n)
	if h.MaxGap > 0 {
		per = min(per, h.MaxGap)
	}
	return max(h.MinGap, per)
}

// Sub is one subscription. Its records arrive in order, each once.
type Sub struct {
	h     *Hub
	exec  string
	ready chan struct{} // cap 1: something was published, or the end
	// Guarded by h.mu:
	last  uint64 // the highest sequence it holds or took
	next  uint64 // whole log: the tail item it takes next
	items []Item // an execution's records, or what an ended one holds
	bytes int
	err   error // why it ended (ErrOverflow, a scan error, closed)
}

// Join subscribes from after (records of exec only, unless exec is ""):
// it succeeds when the hub has offered nothing beyond after, else it
// returns nil and the hub's position, which the caller reaches by reading
// the store itself before joining again.
func (h *Hub) Join(after uint64, exec string) (*Sub, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		h.pos, h.running = after, true
		h.wg.Add(1)
		go h.loop()
	}
	if h.pos > after {
		return nil, h.pos
	}
	s := &Sub{h: h, exec: exec, ready: make(chan struct{}, 1), last: after, next: h.base + uint64(len(h.tail))}
	h.subs[s] = struct{}{}
	return s, after
}

// Leave ends s's subscription.
func (h *Hub) Leave(s *Sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.trimLocked()
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Wait waits for the hub's goroutine to end (once every subscriber left).
func (h *Hub) Wait() { h.wg.Wait() }

func (h *Hub) loop() {
	defer h.wg.Done()
	var published time.Time
	var gap *time.Timer
	more := false // the last publication stopped at its cap: the rest goes at once
	defer func() {
		if gap != nil {
			gap.Stop()
		}
	}()
	for {
		ch, err := h.src.TipChanged()
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.running = false
			h.tail, h.cum = nil, nil
			h.mu.Unlock()
			return
		}
		pos, n := h.pos, len(h.subs)
		h.mu.Unlock()
		if err != nil {
			h.endAll(err)
			continue
		}
		if h.src.Tip() <= pos {
			select {
			case <-ch:
			case <-h.kick:
			}
			continue
		}
		// Coalesce: wait out the gap since the last publication, then
		// publish everything committed by then at once — or as soon as
		// half a subscriber's bound is waiting, so that the gap never
		// ends a subscriber that takes every publication.
		if d := h.gap(n) - time.Since(published); d > 0 && !more {
			if gap == nil {
				gap = time.NewTimer(d)
			} else {
				gap.Reset(d)
			}
			if !h.waitGap(gap, ch, pos) {
				continue
			}
		}
		if more, err = h.publish(pos); err != nil {
			h.endAll(err)
			continue
		}
		published = time.Now()
	}
}

// waitGap waits for the gap's timer, or until maxItems/2 records lie
// beyond pos (it follows the commits through ch); false when a
// subscriber left first (the loop re-checks).
func (h *Hub) waitGap(gap *time.Timer, ch <-chan struct{}, pos uint64) bool {
	early := uint64(max(h.maxItems/2, 1))
	// The commits before ch was taken close no channel this wait sees:
	// count them first, or half a bound committed at once waits out the
	// whole gap (and a subscriber may be ended for what it gathered).
	if h.src.Tip()-pos >= early {
		gap.Stop()
		return true
	}
	for {
		select {
		case <-gap.C:
			return true
		case <-h.kick:
			gap.Stop()
			return false
		case <-ch:
			var err error
			if ch, err = h.src.TipChanged(); err != nil || h.src.Tip()-pos >= early {
				gap.Stop()
				return true // publish; the loop then sees the error
			}
		}
	}
}

// publish reads the records after pos (up to the tip, a bounded number of
// pages, and at most half a subscriber's bound of records and of bytes),
// encodes each once and offers them to the subscribers. One publication
// never holds more than a subscriber may hold, or a hub that fell behind
// would end every subscriber with it, however fast they take: the rest
// is the next publication's, at once (more).
func (h *Hub) publish(pos uint64) (more bool, _ error) {
	var recs []localseg.Record
	var items []Item
	maxItems, maxBytes := max(h.maxItems/2, 1), max(h.maxBytes/2, 1)
	bytes := 0
	for range hubPagesPerPublish {
		tip := h.src.Tip()
		if tip <= pos {
			break
		}
		limit := min(HubPage, maxItems-len(items))
		page, cut, err := h.scan(pos, limit)
		if err != nil {
			return false, err
		}
		full := false
		for k, r := range page {
			it := Item{Seq: r.Seq, Frame: h.encode(r)}
			if len(items) > 0 && bytes+len(it.Frame) > maxBytes {
				page, full = page[:k], true // the rest is the next publication's
				break
			}
			recs = append(recs, r)
			items = append(items, it)
			bytes += len(it.Frame)
		}
		if n := len(page); n > 0 && (n == limit || cut || full) {
			pos = page[n-1].Seq // a full page: the rest comes next
			if full || len(items) >= maxItems {
				more = h.src.Tip() > pos // left for the next publication
				break
			}
			continue
		}
		pos = tip
		break
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pos = pos
	whole := false
	for s := range h.subs {
		if s.exec == "" {
			whole = true
			break
		}
	}
	if whole {
		var c uint64
		if n := len(h.cum); n > 0 {
			c = h.cum[n-1]
		}
		for _, it := range pack(items) {
			c += uint64(len(it.Frame))
			h.tail = append(h.tail, it)
			h.cum = append(h.cum, c)
		}
	}
	for s := range h.subs {
		if s.exec != "" {
			if !s.offer(recs, items, h.maxItems, h.maxBytes) {
				delete(h.subs, s)
			}
			continue
		}
		if len(items) == 0 {
			continue
		}
		if !h.boundLocked(s) {
			delete(h.subs, s)
		}
		s.signal()
	}
	h.trimLocked()
	return more, nil
}

// boundLocked ends s (ErrOverflow) if its untaken records exceed the
// bounds, leaving it exactly what fits; false when it ended.
func (h *Hub) boundLocked(s *Sub) bool {
	head := h.base + uint64(len(h.tail))
	i := int(s.next - h.base)
	var before uint64
	if i > 0 {
		before = h.cum[i-1]
	}
	n := int(head - s.next)
	if n <= h.maxItems && (n <= 1 || h.cum[len(h.cum)-1]-before <= uint64(h.maxBytes)) {
		return true
	}
	k := min(n, h.maxItems)
	for k > 1 && h.cum[i+k-1]-before > uint64(h.maxBytes) {
		k--
	}
	s.items = h.tail[i : i+k : i+k]
	s.next = head
	s.err = ErrOverflow
	return false
}

// trimLocked drops the tail items every whole-log subscriber has taken.
func (h *Hub) trimLocked() {
	low := h.base + uint64(len(h.tail))
	for s := range h.subs {
		if s.exec == "" && s.err == nil {
			low = min(low, s.next)
		}
	}
	if k := int(low - h.base); k > 0 {
		h.tail, h.cum = h.tail[k:], h.cum[k:]
		h.base = low
		if len(h.tail) == 0 {
			h.tail, h.cum = nil, nil // let the old arrays go
		}
	}
}

// endAll ends every subscription with err (the store released its
// waiters, or a read failed).
func (h *Hub) endAll(err error) {
	h.mu.Lock()
	for s := range h.subs {
		if s.exec == "" {
			// It keeps what it has not taken.
			i, j := int(s.next-h.base), len(h.tail)
			s.items = h.tail[i:j:j]
			s.next = h.base + uint64(j)
		}
		s.err = err
		s.signal()
		delete(h.subs, s)
	}
	h.trimLocked()
	h.mu.Unlock()
}

// offer buffers the records an execution's subscriber wants; false when
// it overflowed (ended). Called with h.mu held.
func (s *Sub) offer(recs []localseg.Record, items []Item, maxItems, maxBytes int) bool {
	added := false
	for i, r := range recs {
		if r.Seq <= s.last || r.ExecutionID != s.exec {
			continue
		}
		n := len(items[i].Frame)
		if len(s.items) > 0 && (len(s.items) >= maxItems || s.bytes+n > maxBytes) {
			s.err = ErrOverflow
			s.signal()
			return false
		}
		s.items = append(s.items, items[i])
		s.bytes += n
		s.last = r.Seq
		added = true
	}
	if added {
		s.signal()
	}
	return true
}

func (s *Sub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when Take has something new.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Take returns the records published to s since its last Take (the
// slice is shared: read it, do not modify it) and, once the subscription
// ended, why: write the records, then stop.
func (s *Sub) Take() ([]Item, error) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	items := s.items
	s.items, s.bytes = nil, 0
	if s.exec == "" && s.err == nil {
		i, j := int(s.next-h.base), len(h.tail)
		items = h.tail[i:j:j]
		s.next = h.base + uint64(j) // the next publication trims the tail
	}
	if s.exec == "" {
		// A whole-log subscriber may have joined past the hub's
		// position: what it already holds is not sent again.
		for len(items) > 0 && items[0].Seq <= s.last {
			items = items[1:]
		}
		if n := len(items); n > 0 {
			s.last = items[n-1].Seq
		}
	}
	return items, s.err
}
