package localseg_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// watchedRemote is fakeRemote as a localseg.WatchedSource: it shows the
// verifier the bytes in pieces of 97 bytes, as a GET's reads would.
type watchedRemote struct {
	*fakeRemote
	watched atomic.Int64
}

func (r *watchedRemote) FetchSegmentWatched(ctx context.Context, id uint64, v *frame.Verifier) ([]byte, uint64, error) {
	data, sum, err := r.FetchSegment(ctx, id)
	if err == nil && v != nil {
		r.watched.Add(1)
		v.Reset()
		for k := 97; k < len(data); k += 97 {
			v.Advance(data[:k])
		}
		v.Advance(data)
	}
	return data, sum, err
}

// TestWatchedSourceReadsEvicted: through a WatchedSource (the frames
// checked as the bytes arrive) every evicted event reads back byte for
// byte, and the fetches went through it.
func TestWatchedSourceReadsEvicted(t *testing.T) {
	f, dst, imp := importFixture(t, 3)
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	f.dir = dst
	w := &watchedRemote{fakeRemote: f.remote}
	o := f.options()
	o.Remote = w
	s, err := localseg.Open(dst, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.append(t, s, 5)
	f.check(t, s, 0)
	if w.watched.Load() == 0 {
		t.Fatal("no fetch went through FetchSegmentWatched")
	}
}

// TestEvictedFrameFailuresAreRemoteReads: a bucket copy whose length and
// xxh64 are the ones recorded but whose frames do not verify (a payload
// changed under its CRC, the body still valid JSON; a first event that is
// not the recorded one) is refused as ErrRemoteRead naming the check,
// never ErrCorrupt and never a page, whether the frames were checked as
// the bytes arrived or after.
func TestEvictedFrameFailuresAreRemoteReads(t *testing.T) {
	for _, watched := range []bool{false, true} {
		for _, c := range []struct {
			name, want string
			damage     func(b []byte, e *localseg.EvictedSegment)
		}{
			{"payload under its CRC", "CRC mismatch", func(b []byte, e *localseg.EvictedSegment) {
				i := bytes.Index(b[frame.HeaderSize:], []byte(`"payload":"`)) + frame.HeaderSize + len(`"payload":"`)
				b[i] = map[bool]byte{true: 'x', false: 'y'}[b[i] != 'x']
			}},
			{"first event", "gap in global_sequence", func(b []byte, e *localseg.EvictedSegment) { e.First++ }},
		} {
			t.Run(map[bool]string{false: "after", true: "watched"}[watched]+"/"+c.name, func(t *testing.T) {
				f, dst, imp := importFixture(t, 3)
				e := &imp[1]
				b := bytes.Clone(f.remote.objs[e.ID])
				c.damage(b, e)
				f.remote.objs[e.ID] = b
				e.Size, e.XXH64 = int64(len(b)), xxhash.Sum64(b)
				if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
					t.Fatal(err)
				}
				o := f.options()
				if watched {
					o.Remote = &watchedRemote{fakeRemote: f.remote}
				}
				s, err := localseg.Open(dst, o)
				if err == nil {
					defer s.Close()
					_, err = s.Scan(0, 1<<20)
				}
				if !errors.Is(err, localseg.ErrRemoteRead) || errors.Is(err, localseg.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%v, want ErrRemoteRead (%s), not ErrCorrupt", err, c.want)
				}
				if w, ok := o.Remote.(*watchedRemote); ok && w.watched.Load() == 0 {
					t.Fatal("no fetch went through FetchSegmentWatched")
				}
			})
		}
	}
}
