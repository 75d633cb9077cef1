package blobtier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cespare/xxhash/v2"
)

// BufferedGetter is implemented by the Bucket New returns and by Observe's
// wrapper of one: Get reading into a buffer the caller reuses.
type BufferedGetter interface {
	// GetBuffered is Get with the bytes read into buf when it can hold
	// them (cap(buf) > the object's length); otherwise into a new buffer.
	// The result aliases buf in the first case. Every check of Get is
	// made, the same way: length and XXH64 against the object's metadata.
	GetBuffered(ctx context.Context, key string, buf []byte) ([]byte, Meta, error)
}

// GetBuffered reads key through r's GetBuffered when it has one, else
// through its Get (buf is then unused). A caller that reads many large
// objects in turn (a restore) passes the buffer of the previous one, so no
// object costs an allocation, its zeroing and its page faults.
func GetBuffered(ctx context.Context, r interface {
	Get(ctx context.Context, key string) ([]byte, Meta, error)
}, key string, buf []byte) ([]byte, Meta, error) {
	if g, ok := r.(BufferedGetter); ok {
		return g.GetBuffered(ctx, key, buf)
	}
	return r.Get(ctx, key)
}

func (t *bucket) GetBuffered(ctx context.Context, key string, buf []byte) ([]byte, Meta, error) {
	return t.GetWatched(ctx, key, buf, nil)
}

func (w *observed) GetBuffered(ctx context.Context, key string, buf []byte) ([]byte, Meta, error) {
	return w.GetWatched(ctx, key, buf, nil)
}

// Watcher sees the bytes of a verified read as they arrive (GetWatched), so
// that the caller's own checks of them (a frame.Verifier's, which has these
// methods) overlap the download and find the bytes still in the cache.
type Watcher interface {
	// Reset is called before the first byte of every attempt to read the
	// object: nothing seen before belongs to it (a stat-then-read Get
	// reads an object replaced meanwhile a second time).
	Reset()
	// Advance is called each time more bytes have arrived, with every
	// byte this attempt read so far: each call's slice holds the
	// previous call's bytes, unchanged, and more. They are not yet checked
	// against the metadata (the read may still fail, and they may run one
	// byte past its length); they alias the read's buffer: not to be
	// modified, nor kept past GetWatched. For an object of more than one
	// chunk it is called on a goroutine of the read's own while the read
	// goes on (never concurrently with itself or Reset); every call has
	// returned when GetWatched does.
	Advance(soFar []byte)
}

// WatchedGetter is implemented by the Bucket New returns and by Observe's
// wrapper of one: GetBuffered that shows a Watcher the bytes as they
// arrive. When it returns no error, the last Advance held exactly the bytes
// it returns.
type WatchedGetter interface {
	GetWatched(ctx context.Context, key string, buf []byte, w Watcher) ([]byte, Meta, error)
}

// GetWatched is GetBuffered that shows w the bytes as they arrive (w may
// be nil). Every check of Get is made, the same way, and its verdict is the
// result: what w concluded counts only when GetWatched returned no error,
// and then w saw exactly the bytes returned. Where r has no GetWatched, w
// sees them at once after a successful read (Reset, then one Advance).
func GetWatched(ctx context.Context, r interface {
	Get(ctx context.Context, key string) ([]byte, Meta, error)
}, key string, buf []byte, w Watcher) ([]byte, Meta, error) {
	if g, ok := r.(WatchedGetter); ok {
		return g.GetWatched(ctx, key, buf, w)
	}
	data, m, err := GetBuffered(ctx, r, key, buf)
	if err == nil && w != nil {
		w.Reset()
		w.Advance(data)
	}
	return data, m, err
}

func (t *bucket) GetWatched(ctx context.Context, key string, buf []byte, w Watcher) ([]byte, Meta, error) {
	ctx, cancel, err := t.begin(ctx, OpGet, key)
	if err != nil {
		return nil, Meta{}, err
	}
	defer cancel()
	if t.cas != casNone {
		if data, m, _, ok, err := t.getOne(ctx, OpGet, key, buf, w); ok {
			return data, m, err
		}
	}
	data, m, _, err := t.getTwo(ctx, OpGet, key, buf, w)
	return data, m, err
}

func (w *observed) GetWatched(ctx context.Context, key string, buf []byte, wa Watcher) ([]byte, Meta, error) {
	start := time.Now()
	data, m, err := GetWatched(ctx, w.b, key, buf, wa)
	w.report(OpGet, err, 0, int64(len(data)), start)
	return data, m, err
}

// digestChunk is how much readBodyDigest reads before it hashes: small
// enough that the bytes are still in the cache when they are hashed, so
// the digest costs no second trip through memory.
const digestChunk = 256 << 10

// readBodyDigest reads at most length+1 bytes, into buf when it can hold
// them: one more than the metadata promises is enough to know the object
// is too long, without trusting its size. The XXH64 of what was read is
// computed as it arrives, and w (when not nil) is shown the bytes read so
// far after each chunk is hashed (a digester). Only what this read
// returned is in the result (buf[:n]): stale bytes of an earlier object in
// buf never are. When it returns, the digester is done: nothing reads buf
// any more and w is not called again.
func readBodyDigest(r io.Reader, length int64, buf []byte, w Watcher) ([]byte, uint64, error) {
	if int64(cap(buf)) > length {
		buf = buf[:length+1]
	} else {
		buf = make([]byte, length+1)
	}
	g := newDigester(buf, w, w != nil && length > digestChunk)
	n := 0
	for n < len(buf) {
		end := min(n+digestChunk, len(buf))
		k, err := io.ReadFull(r, buf[n:end])
		n += k
		if k > 0 {
			g.arrived(n)
		}
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return buf[:n], g.sum(), nil // short: verification says so
		case err != nil:
			g.sum()
			return nil, 0, err
		}
	}
	return buf[:n], g.sum(), nil
}

// digester hashes the bytes of buf as they arrive and shows them to w
// (when not nil): on the reading goroutine, or, when async, on a goroutine
// of its own fed chunk by chunk, so that the hash and the watcher's checks
// (a segment's frames) run beside the reads instead of between them. The
// reader never waits for it until sum, which waits for every chunk: the
// bytes it reads (buf[:n], n the last arrived) are never written again
// while it runs, and the reader writes only past them.
type digester struct {
	buf    []byte
	w      Watcher
	d      xxhash.Digest
	hashed int
	ch     chan int // async: the lengths arrived, in order
	done   chan struct{}
}

func newDigester(buf []byte, w Watcher, async bool) *digester {
	g := &digester{buf: buf, w: w}
	g.d.Reset()
	if w != nil {
		w.Reset()
	}
	if async {
		// Room for every chunk: the reader never blocks on a send.
		g.ch, g.done = make(chan int, len(buf)/digestChunk+1), make(chan struct{})
		go func() {
			defer close(g.done)
			for n := range g.ch {
				g.step(n)
			}
		}()
	}
	return g
}

// arrived reports that buf[:n] has been read.
func (g *digester) arrived(n int) {
	if g.ch != nil {
		g.ch <- n
		return
	}
	g.step(n)
}

func (g *digester) step(n int) {
	g.d.Write(g.buf[g.hashed:n])
	g.hashed = n
	if g.w != nil {
		g.w.Advance(g.buf[:n])
	}
}

// sum waits for every chunk arrived and returns the digest of them.
func (g *digester) sum() uint64 {
	if g.ch != nil {
		close(g.ch)
		<-g.done
		g.ch = nil
	}
	return g.d.Sum64()
}

// verifySum is verify with the digest already computed.
func verifySum(data []byte, sum uint64, m Meta) error {
	switch n := int64(len(data)); {
	case n < m.Length:
		return fmt.Errorf("%w: short object: %d bytes, metadata length %d", ErrCorrupt, n, m.Length)
	case n > m.Length:
		return fmt.Errorf("%w: long object: more than the metadata length %d", ErrCorrupt, m.Length)
	}
	if sum != m.XXH64 {
		return fmt.Errorf("%w: xxh64 %016x, metadata says %016x", ErrCorrupt, sum, m.XXH64)
	}
	return nil
}
