package watermark_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/watermark"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gocloud's OpenCensus views and idle HTTP client connections keep
		// goroutines that are not ours; they end with the process.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

type backend struct {
	name string
	open func(t *testing.T) blobtier.Bucket
}

type emu interface {
	CreateBucket(string) error
	OpenBucket(context.Context, string) (*blob.Bucket, error)
	Close() error
}

func openEmulated(t *testing.T, start func() (emu, error)) blobtier.Bucket {
	t.Helper()
	e, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBucket("wm"); err != nil {
		t.Fatal(err)
	}
	bb, err := e.OpenBucket(context.Background(), "wm")
	if err != nil {
		t.Fatal(err)
	}
	b := blobtier.New(bb, blobtier.Options{Timeout: 30 * time.Second})
	t.Cleanup(func() { b.Close() })
	if !b.CanCAS() {
		t.Fatal("emulated bucket cannot compare-and-swap")
	}
	return b
}

var casBackends = []backend{
	{"gofakes3", func(t *testing.T) blobtier.Bucket {
		return openEmulated(t, func() (emu, error) { return emulator.StartS3() })
	}},
	{"fake-gcs-server", func(t *testing.T) blobtier.Bucket {
		return openEmulated(t, func() (emu, error) { return emulator.StartGCS() })
	}},
}

// TestAdvanceConcurrentWritersNeverGoBackward races 16 writers advancing
// one shard's mark to 16 different targets, in random order, while a reader
// checks every mark it sees against the one before: the mark never goes
// backward, each writer gets back a mark covering its own target, and the
// race ends at the highest target.
func TestAdvanceConcurrentWritersNeverGoBackward(t *testing.T) { // §6.1
	for _, be := range casBackends {
		t.Run(be.name, func(t *testing.T) {
			b := be.open(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard only
			defer cancel()
			const writers = 16
			const shard = 7
			for round := 0; round < 2; round++ {
				base := uint64(round * 10000)
				order := rand.Perm(writers)

				stopReader := make(chan struct{})
				readerErr := make(chan error, 1)
				go func() {
					readerErr <- watchMonotonic(ctx, b, shard, stopReader)
				}()

				var wg sync.WaitGroup
				start := make(chan struct{})
				errs := make(chan error, writers)
				for _, i := range order {
					seq, seg := base+uint64(100*(i+1)), base/10+uint64(10*(i+1))
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						m, err := watermark.Advance(ctx, b, shard, seq, seg)
						switch {
						case err != nil:
							errs <- fmt.Errorf("writer to (%d, %d): %w", seq, seg, err)
						case !m.AtLeast(seq, seg):
							errs <- fmt.Errorf("writer to (%d, %d) got back %+v", seq, seg, m)
						}
					}()
				}
				close(start)
				wg.Wait()
				close(stopReader)
				if err := <-readerErr; err != nil {
					t.Fatal(err)
				}
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				m, _, err := watermark.Read(ctx, b, shard)
				if err != nil {
					t.Fatal(err)
				}
				wantSeq, wantSeg := base+100*writers, base/10+10*writers
				if m.Seq != wantSeq || m.Segment != wantSeg {
					t.Fatalf("round %d ended at %+v, want seq %d segment %d", round, m, wantSeq, wantSeg)
				}
				if m.V < uint64(round+1) || m.V > uint64(writers*(round+1)) {
					t.Fatalf("round %d: version %d after at most %d writes", round, m.V, writers*(round+1))
				}
			}
			// A lower target afterwards changes nothing.
			before, _, _ := watermark.Read(ctx, b, shard)
			m, err := watermark.Advance(ctx, b, shard, 1, 1)
			if err != nil || m != before {
				t.Fatalf("Advance below the mark = %+v, %v; want %+v", m, err, before)
			}
		})
	}
}

// watchMonotonic reads the mark until stop closes and fails on the first
// read that is below the read before it.
func watchMonotonic(ctx context.Context, b blobtier.Bucket, shard uint32, stop <-chan struct{}) error {
	var prev watermark.Mark
	for reads := 0; ; reads++ {
		select {
		case <-stop:
			return nil
		default:
		}
		m, _, err := watermark.Read(ctx, b, shard)
		if err != nil {
			return fmt.Errorf("read %d: %w", reads, err)
		}
		if !m.AtLeast(prev.Seq, prev.Segment) || m.V < prev.V {
			return fmt.Errorf("read %d went backward: %+v after %+v", reads, m, prev)
		}
		prev = m
	}
}

func TestAdvanceOnMemblobIsUnsupported(t *testing.T) {
	ctx := context.Background()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer b.Close()
	if b.CanCAS() {
		t.Fatal("memblob claims compare-and-swap")
	}
	_, err := watermark.Advance(ctx, b, 0, 10, 2)
	if !errors.Is(err, blobtier.ErrUnsupported) {
		t.Fatalf("Advance on memblob: %v; want ErrUnsupported", err)
	}
	m, v, err := watermark.Read(ctx, b, 0)
	if err != nil || m != (watermark.Mark{}) || v != "" {
		t.Fatalf("nothing may have been written: %+v %q %v", m, v, err)
	}
}
