package bucketlog

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// Finding 14d: concurrent shipping passes on mem:// never move the cursor
// object's shipped_through (or a consumer's cursor) backward.
func TestCursorObjectNeverMovesBackwardOnMem(t *testing.T) {
	ctx := ctxT(t)
	b := &cursorWatch{Bucket: memBucket(t)}
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Logger: quiet()})
	defer l.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l.ship.ShipTail(ctx)
			}
		}()
	}
	// At least 300 appends, and on until the shipping passes wrote the
	// cursor object often enough to race (a loaded machine may schedule
	// them late; bounded so a shipper that never writes fails below).
	for i := 1; i <= 300 || (b.writes() < 10 && i <= 20000); i++ {
		if _, err := l.Append(ctx, ev("7", i)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := l.Pull(ctx, "c", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Ack(ctx, "c", uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if err := b.err(); err != nil {
		t.Fatal(err)
	}
	if b.writes() < 10 {
		t.Fatalf("only %d cursor writes: the test did not race", b.writes())
	}
}

// cursorWatch checks every cursor object put against the previous one.
type cursorWatch struct {
	blobtier.Bucket
	mu    sync.Mutex
	last  tailbatch.Cursor
	n     int
	fault error
}

func (c *cursorWatch) Put(ctx context.Context, key string, data []byte) error {
	if err := c.Bucket.Put(ctx, key, data); err != nil {
		return err
	}
	if !strings.HasPrefix(key, "noetl.ehdb.cur.") {
		return nil
	}
	cur, err := tailbatch.DecodeCursor(data)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.fault == nil {
		switch {
		case cur.ShippedThrough < c.last.ShippedThrough:
			c.fault = errors.New("shipped_through moved backward: " + string(data))
		case cur.Consumers["c"] < c.last.Consumers["c"]:
			c.fault = errors.New("consumer cursor moved backward: " + string(data))
		}
	}
	c.last = cur
	return nil
}

func (c *cursorWatch) err() error  { c.mu.Lock(); defer c.mu.Unlock(); return c.fault }
func (c *cursorWatch) writes() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }
