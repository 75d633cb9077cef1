package blobtier

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/cespare/xxhash/v2"
)

// prefixes records what a Watcher is shown.
type prefixes struct {
	resets int
	seen   [][]byte
}

func (p *prefixes) Reset()               { p.resets++; p.seen = nil }
func (p *prefixes) Advance(soFar []byte) { p.seen = append(p.seen, soFar) }

// readBodyDigest shows the watcher a Reset, then the bytes so far after
// each chunk it hashed, growing, in the buffer it returns; a second read
// with the same watcher (getTwo reading a replaced object again) starts
// with a Reset.
func TestReadBodyDigestWatcher(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (3*digestChunk+100)/16)
	var w prefixes
	w.Advance([]byte("stale"))
	got, sum, err := readBodyDigest(iotest.HalfReader(bytes.NewReader(data)), int64(len(data)), nil, &w)
	if err != nil || !bytes.Equal(got, data) || sum != xxhash.Sum64(data) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	if w.resets != 1 || len(w.seen) != 4 {
		t.Fatalf("%d resets, %d advances; want 1 and 4 (chunks of %d)", w.resets, len(w.seen), digestChunk)
	}
	for i, s := range w.seen {
		if want := min((i+1)*digestChunk, len(data)); len(s) != want || &s[0] != &got[0] {
			t.Fatalf("advance %d: %d bytes, want %d of the result's buffer", i, len(s), want)
		}
	}
	// One byte more than the metadata says is read and shown (the
	// caller's verdict waits for the length check), and a failed read
	// shows what it read before it failed.
	_, _, _ = readBodyDigest(bytes.NewReader(data), int64(len(data)-1), nil, &w)
	if w.resets != 2 || len(w.seen[len(w.seen)-1]) != len(data) {
		t.Fatalf("a long object: %d resets, last %d bytes", w.resets, len(w.seen[len(w.seen)-1]))
	}
	boom := errors.New("boom")
	_, _, err = readBodyDigest(io.MultiReader(bytes.NewReader(data[:digestChunk+5]), iotest.ErrReader(boom)), int64(len(data)), nil, &w)
	if !errors.Is(err, boom) || w.resets != 3 || len(w.seen) != 2 || len(w.seen[1]) != digestChunk+5 {
		t.Fatalf("a failed read: %v, %d resets, %d advances", err, w.resets, len(w.seen))
	}
}

// gatedWatcher's first Advance waits until the read has gone past it.
type gatedWatcher struct {
	prefixes
	release chan struct{}
	waited  bool
}

func (g *gatedWatcher) Advance(soFar []byte) {
	if !g.waited {
		g.waited = true
		select {
		case <-g.release:
		case <-time.After(10 * time.Second):
			panic("the read waited for its watcher: the watcher's checks do not run beside it")
		}
	}
	g.prefixes.Advance(soFar)
}

// releaseAfter closes release once more than n bytes were read from r.
type releaseAfter struct {
	r       io.Reader
	n, read int
	release chan struct{}
}

func (r *releaseAfter) Read(p []byte) (int, error) {
	k, err := r.r.Read(p)
	if r.read += k; r.read > r.n && r.release != nil {
		close(r.release)
		r.release = nil
	}
	return k, err
}

// An object of several chunks is hashed and shown to the watcher beside
// the reads: the read goes on while the watcher is still at the first
// chunk, and when readBodyDigest returns the watcher has seen every chunk.
func TestReadBodyDigestWatcherRunsBesideTheRead(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (3*digestChunk+100)/16)
	w := &gatedWatcher{release: make(chan struct{})}
	r := &releaseAfter{r: bytes.NewReader(data), n: 2 * digestChunk, release: w.release}
	got, sum, err := readBodyDigest(r, int64(len(data)), nil, w)
	if err != nil || !bytes.Equal(got, data) || sum != xxhash.Sum64(data) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	if len(w.seen) != 4 || len(w.seen[3]) != len(data) {
		t.Fatalf("the watcher saw %d pieces by the return", len(w.seen))
	}
}
