package localseg

import "sync"

// tipNotice is the commit notification of a store: a channel closed and
// replaced each time the durable tip moves, so any number of readers can
// wait for the next commit with no polling and no cost to the appender
// beyond closing one channel (made only when someone waits). Released, it
// stays closed: every waiter wakes and later waits return ErrClosed.
type tipNotice struct {
	mu       sync.Mutex
	ch       chan struct{}
	released bool
}

func (n *tipNotice) wait() (<-chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.released {
		return nil, ErrClosed
	}
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch, nil
}

func (n *tipNotice) broadcast() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

func (n *tipNotice) release() {
	n.mu.Lock()
	n.released = true
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// TipChanged returns a channel that is closed once the durable tip moves
// past its value now (a group commit published new events) or the store's
// waiters are released (ReleaseWaiters, Close). Take the channel before
// reading the tip or the log: a commit after TipChanged returned closes
// it, so no commit is missed. After release it returns ErrClosed.
func (s *Store) TipChanged() (<-chan struct{}, error) { return s.notice.wait() }

// ReleaseWaiters wakes every waiter of TipChanged for good (their next
// TipChanged returns ErrClosed), ahead of a Close that may take a while.
func (s *Store) ReleaseWaiters() { s.notice.release() }
