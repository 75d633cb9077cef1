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
	ctx, cancel, err := t.begin(ctx, OpGet, key)
	if err != nil {
		return nil, Meta{}, err
	}
	defer cancel()
	if t.cas != casNone {
		if data, m, _, ok, err := t.getOne(ctx, OpGet, key, buf); ok {
			return data, m, err
		}
	}
	data, m, _, err := t.getTwo(ctx, OpGet, key, buf)
	return data, m, err
}

func (w *observed) GetBuffered(ctx context.Context, key string, buf []byte) ([]byte, Meta, error) {
	start := time.Now()
	data, m, err := GetBuffered(ctx, w.b, key, buf)
	w.report(OpGet, err, 0, int64(len(data)), start)
	return data, m, err
}

// digestChunk is how much readBodyDigest reads before it hashes: small
// enough that the bytes are still in the core's cache when they are
// hashed, so the digest costs no second trip through memory.
const digestChunk = 256 << 10

// readBodyDigest reads at most length+1 bytes, into buf when it can hold
// them: one more than the metadata promises is enough to know the object
// is too long, without trusting its size. The XXH64 of what was read is
// computed as it arrives. Only what this read returned is in the result
// (buf[:n]): stale bytes of an earlier object in buf never are.
func readBodyDigest(r io.Reader, length int64, buf []byte) ([]byte, uint64, error) {
	if int64(cap(buf)) > length {
		buf = buf[:length+1]
	} else {
		buf = make([]byte, length+1)
	}
	var d xxhash.Digest
	d.Reset()
	n := 0
	for n < len(buf) {
		end := min(n+digestChunk, len(buf))
		k, err := io.ReadFull(r, buf[n:end])
		d.Write(buf[n : n+k])
		n += k
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return buf[:n], d.Sum64(), nil // short: verification says so
		case err != nil:
			return nil, 0, err
		}
	}
	return buf[:n], d.Sum64(), nil
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
