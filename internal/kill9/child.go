package kill9

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// reporter writes report lines to the parent. Each call is one write(2)
// of at most a few hundred bytes to a pipe, which the kernel keeps whole;
// the mutex keeps lines of different goroutines from interleaving within
// a call that the kernel splits anyway.
type reporter struct {
	mu sync.Mutex
	f  *os.File
}

func (r *reporter) write(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(b); err != nil {
		// The parent is gone: nobody is checking, stop writing at once.
		os.Exit(5)
	}
}

func (r *reporter) printf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	// One fact a line: a message must not forge further lines.
	s = strings.ReplaceAll(s, "\n", " ")
	r.write([]byte(s + "\n"))
}

// RunChild is the child process: it opens the engine as ChildConfig (in
// the environment) says, runs the workload until it is killed, and
// reports on file descriptor 3. It returns an exit code only when it cannot
// go on.
func RunChild() int {
	rep := &reporter{f: os.NewFile(reportFD, "kill9-report")}
	cfg, err := decodeChildConfig(os.Getenv(ConfigEnv))
	if err != nil {
		rep.printf("E %v", err)
		return 3
	}
	go func() {
		time.Sleep(ChildLifetime)
		rep.printf("E watchdog: nobody killed this child within %s", ChildLifetime)
		os.Exit(4)
	}()
	c := &child{cfg: cfg, rep: rep}
	if err := c.run(context.Background()); err != nil {
		rep.printf("E %v", err)
		return 3
	}
	select {} // the parent kills us
}

type child struct {
	cfg ChildConfig
	rep *reporter
	l   *bucketlog.Log
}

func (c *child) options() bucketlog.Options {
	cfg := c.cfg
	return bucketlog.Options{
		Dir:             cfg.Dir,
		BucketURL:       cfg.BucketURL,
		SegmentMaxBytes: cfg.SegmentMaxBytes,
		SealMaxAge:      cfg.SealMaxAge,
		TailInterval:    cfg.TailInterval,
		SyncToBucket:    cfg.Sync,
		SyncWait:        cfg.SyncWait,
		GC: bucketlog.GCOptions{
			Enabled:             cfg.GC,
			Interval:            cfg.GCInterval,
			MaxRetainedSegments: cfg.MaxRetained,
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func (c *child) run(ctx context.Context) error {
	l, err := bucketlog.Open(ctx, c.options())
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	c.l = l
	or := l.OpenReport()
	replayed := 0
	if or.Store.Replayed {
		replayed = 1
	}
	c.rep.printf("O %d %d", or.Store.TornTailBytes, replayed)

	// The consumers exist before any writer starts, so GC (which starts
	// with Open but needs sealed segments) is bounded by them from the
	// first pass: a consumer pulls only a non-empty store, hence the seed.
	if l.Store().Tip() == 0 {
		if err := c.append(ctx, Ident{Run: c.cfg.Run}); err != nil {
			return fmt.Errorf("seed append: %w", err)
		}
	}
	for _, name := range []string{FastConsumer, LagConsumer} {
		res, err := l.Pull(ctx, name, 1)
		if err != nil {
			return fmt.Errorf("create consumer %s: %w", name, err)
		}
		if !res.Exists {
			return fmt.Errorf("create consumer %s: the store reads as empty after the seed append", name)
		}
	}
	var shipped uint64
	if s := l.ShippedThrough(); s > 0 {
		shipped = s
		c.rep.printf("T %d", s)
	}
	c.rep.printf("R")

	if c.cfg.Red {
		return c.red(ctx)
	}
	for w := 1; w <= c.cfg.Writers; w++ {
		go c.writer(ctx, w)
	}
	go c.consume(ctx, FastConsumer, 256, 0, 1)
	go c.consume(ctx, LagConsumer, 64, 15*time.Millisecond, 3)
	if c.cfg.BucketURL != "" {
		go c.pollShipped(shipped)
	} else if c.cfg.GC && c.cfg.GCInterval > 0 {
		// The engine runs its periodic GC only with a bucket (it lives in
		// the shipper); a local store is reclaimed by explicit passes, as
		// an operator's `gc` would.
		go c.collect(ctx)
	}
	return nil
}

// collect runs an explicit GC pass every GCInterval.
func (c *child) collect(ctx context.Context) {
	for {
		time.Sleep(c.cfg.GCInterval)
		if _, err := c.l.GC(ctx, bucketlog.GCRequest{MaxRetainedSegments: c.cfg.MaxRetained}); err != nil {
			c.rep.printf("F gc: %v", err)
			return
		}
	}
}

// append appends one event and reports it once the engine acknowledged it.
func (c *child) append(ctx context.Context, id Ident) error {
	res, err := c.l.Append(ctx, localseg.Event{ExecutionID: id.ExecutionID(), TransactionID: id.TransactionID(), Payload: Payload(id)})
	switch {
	case err == nil:
		c.rep.write(appendLine(nil, 'A', res.Seq, id))
	case errors.Is(err, bucketlog.ErrNotInBucket):
		c.rep.write(appendLine(nil, 'N', res.Seq, id))
	default:
		return err
	}
	return nil
}

// appendBatch appends ids as one batch; every event of an acknowledged
// batch is reported, in one write.
func (c *child) appendBatch(ctx context.Context, ids []Ident) error {
	evs := make([]localseg.Event, len(ids))
	for i, id := range ids {
		evs[i] = localseg.Event{ExecutionID: id.ExecutionID(), TransactionID: id.TransactionID(), Payload: Payload(id)}
	}
	res, err := c.l.AppendBatch(ctx, evs)
	kind := byte('A')
	switch {
	case err == nil:
	case errors.Is(err, bucketlog.ErrNotInBucket):
		kind = 'N'
	default:
		return err
	}
	if res.Appended != len(ids) || res.LastSequence-res.FirstSequence+1 != uint64(len(ids)) {
		return fmt.Errorf("batch of %d events answered %+v: not one contiguous run", len(ids), res)
	}
	var buf []byte
	for i, id := range ids {
		buf = appendLine(buf, kind, res.FirstSequence+uint64(i), id)
	}
	c.rep.write(buf)
	return nil
}

func (c *child) writer(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(c.cfg.Seed, uint64(c.cfg.Run)<<20|uint64(w)))
	n := 1
	for {
		var err error
		if c.cfg.BatchEvery > 0 && rng.IntN(c.cfg.BatchEvery) == 0 {
			k := 2 + rng.IntN(7)
			ids := make([]Ident, k)
			for i := range ids {
				ids[i] = Ident{Run: c.cfg.Run, Writer: w, N: n + i}
			}
			err = c.appendBatch(ctx, ids)
			n += k
		} else {
			err = c.append(ctx, Ident{Run: c.cfg.Run, Writer: w, N: n})
			n++
		}
		if err != nil {
			// Under process kills alone nothing may fail: report it and
			// stop this writer (retrying would only repeat the report).
			c.rep.printf("F writer %d: %v", w, err)
			return
		}
		if p := c.cfg.WriterPause; p > 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(p))))
		}
	}
}

// consume pulls and acks. It reports the ack it is about to issue ("c",
// an upper bound for any cursor the parent may later find) and the cursor
// the ack returned ("C"). Pulled records are checked against the
// deterministic payloads, so the read path is checked too.
func (c *child) consume(ctx context.Context, name string, limit int, pause time.Duration, ackEvery int) {
	pulls := 0
	for {
		res, err := c.l.Pull(ctx, name, limit)
		if err != nil {
			c.rep.printf("F pull %s: %v", name, err)
			return
		}
		for _, r := range res.Records {
			if msg := recordProblem(r); msg != "" {
				c.rep.printf("F pull %s: %s", name, msg)
				return
			}
		}
		pulls++
		if len(res.Records) > 0 && pulls%ackEvery == 0 {
			seq := res.Records[len(res.Records)-1].Seq
			c.rep.printf("c %s %d", name, seq)
			cur, err := c.l.Ack(ctx, name, seq)
			if err != nil {
				c.rep.printf("F ack %s %d: %v", name, seq, err)
				return
			}
			c.rep.printf("C %s %d", name, cur)
		}
		switch {
		case pause > 0:
			time.Sleep(pause)
		case len(res.Records) == 0:
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// pollShipped reports ShippedThrough each time it rose: the bucket then
// holds every event through it.
func (c *child) pollShipped(last uint64) {
	for {
		if s := c.l.ShippedThrough(); s > last {
			last = s
			c.rep.printf("T %d", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// red is the red-control workload: a first burst, made durable in the
// bucket by an explicit shipment (with a bucket), then a second burst
// that nothing ships (the tick is far away), then "B".
func (c *child) red(ctx context.Context) error {
	burst := func(round int) error {
		var wg sync.WaitGroup
		errs := make(chan error, c.cfg.Writers)
		for w := 1; w <= c.cfg.Writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range c.cfg.RedBurst {
					if err := c.append(ctx, Ident{Run: c.cfg.Run, Writer: w, N: round*c.cfg.RedBurst + i + 1}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	if err := burst(0); err != nil {
		return fmt.Errorf("red burst 1: %w", err)
	}
	if c.cfg.BucketURL != "" {
		rep, err := c.l.Ship(ctx, false)
		if err != nil {
			return fmt.Errorf("red shipment: %w", err)
		}
		if rep.ShippedThrough != rep.Tip {
			return fmt.Errorf("red shipment reached %d of tip %d", rep.ShippedThrough, rep.Tip)
		}
		c.rep.printf("T %d", c.l.ShippedThrough())
	}
	if err := burst(1); err != nil {
		return fmt.Errorf("red burst 2: %w", err)
	}
	c.rep.printf("B")
	return nil
}

// recordProblem describes how a stored record differs from the workload's
// deterministic event, or returns "".
func recordProblem(r localseg.Record) string {
	id, ok := ParseTransactionID(r.TransactionID)
	if !ok {
		return fmt.Sprintf("sequence %d: transaction id %q is not the workload's", r.Seq, r.TransactionID)
	}
	if r.ExecutionID != id.ExecutionID() {
		return fmt.Sprintf("sequence %d (%s): execution id %q, want %q", r.Seq, r.TransactionID, r.ExecutionID, id.ExecutionID())
	}
	if want := Payload(id); r.Payload != want {
		return fmt.Sprintf("sequence %d (%s): payload of %d bytes differs from the expected %d bytes", r.Seq, r.TransactionID, len(r.Payload), len(want))
	}
	return ""
}
