package service

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LoopResult is one timed closed-loop run.
type LoopResult struct {
	// Events acknowledged (a batch counts its events) and requests made.
	Events, Ops uint64
	Elapsed     time.Duration
	// Lat is every acknowledged request's latency, sorted.
	Lat []time.Duration
}

// PerSecond is the acknowledged events per second.
func (r LoopResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Events) / r.Elapsed.Seconds()
}

// Quantile is the q-quantile of the latencies (0 without any).
func (r LoopResult) Quantile(q float64) time.Duration {
	if len(r.Lat) == 0 {
		return 0
	}
	i := min(int(q*float64(len(r.Lat))), len(r.Lat)-1)
	return r.Lat[i]
}

// Op is one request of closed-loop client i (its n-th); it returns the
// events the server acknowledged.
type Op func(ctx context.Context, i int, n uint64) (int, error)

// Loop runs clients closed-loop clients calling op for d. Timing ends when
// the last client's last request has returned, so every counted event was
// acknowledged inside Elapsed. The first error stops every client.
func Loop(ctx context.Context, clients int, d time.Duration, op Op) (LoopResult, error) {
	var (
		stop    atomic.Bool
		mu      sync.Mutex
		res     LoopResult
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for i := range clients {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			var events, n uint64
			for !stop.Load() && ctx.Err() == nil {
				t0 := time.Now()
				k, err := op(ctx, i, n)
				if err != nil {
					errOnce.Do(func() { first = err })
					stop.Store(true)
					break
				}
				lat = append(lat, time.Since(t0))
				events += uint64(k)
				n++
			}
			mu.Lock()
			res.Events += events
			res.Ops += n
			res.Lat = append(res.Lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Lat)
	if first == nil {
		first = ctx.Err()
	}
	return res, first
}

// LoopAsync runs clients closed-loop NATS publishers for d, each with at
// most window PublishAsync calls awaiting their PubAck; a message counts
// once its PubAck arrived, and its latency is from the publish call to the
// ack. Timing ends when every outstanding ack has arrived.
func LoopAsync(ctx context.Context, p *NatsPublisher, clients, window int, d time.Duration, payload []byte) (LoopResult, error) {
	type pending struct {
		f  jetstream.PubAckFuture
		t0 time.Time
	}
	var (
		stop    atomic.Bool
		mu      sync.Mutex
		res     LoopResult
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	fail := func(err error) { errOnce.Do(func() { first = err }); stop.Store(true) }
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for i := range clients {
		q := make(chan pending, window)
		wg.Go(func() { // publisher: blocks while window acks are outstanding
			defer close(q)
			for !stop.Load() && ctx.Err() == nil {
				t0 := time.Now()
				f, err := p.Async(i, payload)
				if err != nil {
					fail(err)
					return
				}
				q <- pending{f, t0}
			}
		})
		wg.Go(func() { // collector: acks arrive in publish order
			lat := make([]time.Duration, 0, 4096)
			var n uint64
			for pd := range q {
				select {
				case <-pd.f.Ok():
					lat = append(lat, time.Since(pd.t0))
					n++
				case err := <-pd.f.Err():
					fail(err)
				case <-time.After(30 * time.Second):
					fail(context.DeadlineExceeded)
				}
			}
			mu.Lock()
			res.Events += n
			res.Ops += n
			res.Lat = append(res.Lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Lat)
	if first == nil {
		first = ctx.Err()
	}
	return res, first
}
