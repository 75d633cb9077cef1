package live

import (
	"errors"
	"sync"

	"github.com/bucketlog/bucketlog/localseg"
)

// HubPage is how many records the hub reads at a time.
const HubPage = 1024

// ErrOverflow ends a subscription whose buffer filled: the subscriber did
// not take its records as fast as they were committed.
var ErrOverflow = errors.New("live: subscriber buffer full")

// Item is one record as a subscriber receives it: its sequence and its
// encoding (made once per record, shared by every subscriber).
type Item struct {
	Seq   uint64
	Frame []byte
}

// Hub fans the records a store commits out to live subscribers: one
// goroutine (running only while someone subscribes) reads each commit's
// records once, encodes them once and appends them to each subscriber's
// bounded buffer without ever waiting for a subscriber, so a slow or
// stalled one costs appends nothing and is dropped (ErrOverflow) when its
// buffer is full. A subscriber catches up on history by reading the store
// itself and joins once it has reached the hub's position. Safe for
// concurrent use.
type Hub struct {
	src      Source
	scan     func(after uint64, limit int) ([]localseg.Record, bool, error)
	encode   func(localseg.Record) []byte
	maxItems int
	maxBytes int

	mu      sync.Mutex
	subs    map[*Sub]struct{}
	running bool
	pos     uint64        // every record ≤ pos was offered to the subscribers
	kick    chan struct{} // a subscriber left: the loop re-checks
	wg      sync.WaitGroup
}

// NewHub is a hub over src; scan reads the records after a sequence
// (and says when it stopped short of limit for a byte budget),
// encode frames one; a subscriber holds at most maxItems records and
// maxBytes bytes of frames (one record always fits).
func NewHub(src Source, scan func(after uint64, limit int) ([]localseg.Record, bool, error), encode func(localseg.Record) []byte, maxItems, maxBytes int) *Hub {
	return &Hub{src: src, scan: scan, encode: encode, maxItems: max(maxItems, 1), maxBytes: maxBytes,
		subs: map[*Sub]struct{}{}, kick: make(chan struct{}, 1)}
}

// Sub is one subscription. Its records arrive in order, each once.
type Sub struct {
	exec  string
	ready chan struct{} // cap 1: something was buffered, or the end
	mu    sync.Mutex
	items []Item
	bytes int
	last  uint64 // the highest sequence offered to it
	err   error  // why it ended (ErrOverflow, a scan error, closed)
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
	s := &Sub{exec: exec, ready: make(chan struct{}, 1), last: after}
	h.subs[s] = struct{}{}
	return s, after
}

// Leave ends s's subscription.
func (h *Hub) Leave(s *Sub) {
	h.mu.Lock()
	delete(h.subs, s)
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
	for {
		ch, err := h.src.TipChanged()
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		pos := h.pos
		h.mu.Unlock()
		if err != nil {
			h.endAll(err)
			continue
		}
		if tip := h.src.Tip(); tip > pos {
			recs, cut, err := h.scan(pos, HubPage)
			if err != nil {
				h.endAll(err)
				continue
			}
			items := make([]Item, len(recs))
			for i, r := range recs {
				items[i] = Item{Seq: r.Seq, Frame: h.encode(r)}
			}
			h.mu.Lock()
			for s := range h.subs {
				if !s.offer(recs, items, h.maxItems, h.maxBytes) {
					delete(h.subs, s)
				}
			}
			h.pos = tip
			if n := len(recs); n > 0 && (n == HubPage || cut) {
				h.pos = recs[n-1].Seq // a full page: the rest comes next
			}
			h.mu.Unlock()
			continue
		}
		select {
		case <-ch:
		case <-h.kick:
		}
	}
}

// endAll ends every subscription with err (the store released its
// waiters, or a read failed).
func (h *Hub) endAll(err error) {
	h.mu.Lock()
	for s := range h.subs {
		s.end(err)
		delete(h.subs, s)
	}
	h.mu.Unlock()
}

// offer buffers the records s wants; false when it overflowed (ended).
func (s *Sub) offer(recs []localseg.Record, items []Item, maxItems, maxBytes int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := false
	for i, r := range recs {
		if r.Seq <= s.last || (s.exec != "" && r.ExecutionID != s.exec) {
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

func (s *Sub) end(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	s.signal()
}

func (s *Sub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when Take has something new.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Take returns the buffered records (emptying the buffer) and, once the
// subscription ended, why: write the records, then stop.
func (s *Sub) Take() ([]Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := s.items
	s.items, s.bytes = nil, 0
	return items, s.err
}
