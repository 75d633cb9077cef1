package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/client"
	"github.com/bucketlog/bucketlog/localseg"
)

// The benchmarks of issue 15 (BENCHMARKS.md, Live reads):
//
//	go test ./cmd/bucketlog -run '^$' -bench 'BenchmarkLive' -benchtime 200x
//
// BenchmarkLiveDelivery measures the latency from Append returning to a
// subscriber holding the record (p50, p99; 0 when it was delivered before
// Append returned), for a long-poll and a stream, in process and over
// loopback HTTP. BenchmarkLiveAppendSubscribers measures append
// throughput with 0 and 100 stream subscribers attached over loopback.

// deliveryTimes collects, per sequence, when the subscriber held it.
type deliveryTimes struct {
	mu   sync.Mutex
	got  map[uint64]time.Time
	cond *sync.Cond
}

func newDeliveryTimes() *deliveryTimes {
	d := &deliveryTimes{got: map[uint64]time.Time{}}
	d.cond = sync.NewCond(&d.mu)
	return d
}

func (d *deliveryTimes) note(seq uint64) {
	now := time.Now()
	d.mu.Lock()
	if _, ok := d.got[seq]; !ok {
		d.got[seq] = now
	}
	d.cond.Broadcast()
	d.mu.Unlock()
}

func (d *deliveryTimes) await(seq uint64) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if t, ok := d.got[seq]; ok {
			return t
		}
		d.cond.Wait()
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op")
}

func BenchmarkLiveDelivery(b *testing.B) {
	subscribe := map[string]func(ctx context.Context, l *bucketlog.Log, base string, d *deliveryTimes){
		"path=longpoll/in-process": func(ctx context.Context, l *bucketlog.Log, _ string, d *deliveryTimes) {
			var after uint64
			for ctx.Err() == nil {
				tip, err := l.Wait(ctx, after)
				if err != nil {
					return
				}
				for s := after + 1; s <= tip; s++ {
					d.note(s)
				}
				after = tip
			}
		},
		"path=stream/in-process": func(ctx context.Context, l *bucketlog.Log, _ string, d *deliveryTimes) {
			for r, err := range l.Follow(ctx, 0) {
				if err != nil {
					return
				}
				d.note(r.Seq)
			}
		},
		"path=longpoll/http": func(ctx context.Context, _ *bucketlog.Log, base string, d *deliveryTimes) {
			var after uint64
			for ctx.Err() == nil {
				a := request(ctx, "GET", fmt.Sprintf("%s/v1/events?after=%d&wait=1m", base, after))
				recs, _ := a.body["records"].([]any)
				for _, r := range recs {
					after = uint64(r.(map[string]any)["global_sequence"].(float64))
					d.note(after)
				}
			}
		},
		"path=stream/http": func(ctx context.Context, _ *bucketlog.Log, base string, d *deliveryTimes) {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events/stream", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				e, err := readEvent(br)
				if err != nil {
					return
				}
				if seq, err := strconv.ParseUint(e.id, 10, 64); err == nil {
					d.note(seq)
				}
			}
		},
	}
	for _, name := range []string{"path=longpoll/in-process", "path=stream/in-process", "path=longpoll/http", "path=stream/http"} {
		b.Run(name, func(b *testing.B) {
			base, l, _, _ := liveServer(b, nil)
			d := newDeliveryTimes()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { subscribe[name](ctx, l, base, d) })
			var lat []time.Duration
			for b.Loop() {
				time.Sleep(3 * time.Millisecond) // the subscriber parks again, past the stream's linger
				res, err := l.Append(context.Background(), localseg.Event{ExecutionID: "42", TransactionID: "t", Payload: "p"})
				if err != nil {
					b.Fatal(err)
				}
				returned := time.Now()
				lat = append(lat, max(0, d.await(res.Seq).Sub(returned)))
			}
			cancel()
			wg.Wait()
			reportLatency(b, lat)
		})
	}
}

// BenchmarkLiveAppendSubscribers: appends/s of 8 concurrent appenders
// with 100 stream subscribers attached over loopback HTTP, as a ratio to
// none, measured side by side in one process: each b.Loop round appends
// 2,000 events without subscribers and 2,000 with 100 freshly attached
// ones (which it then detaches), the two in alternating order, and
// "ratio" is the median of the rounds' ratios (the machine is shared:
// a round's two halves see the same load; "ratio-sum" is total over
// total). mode=idle: the subscribers read their start event and then
// nothing (their sockets fill); mode=quiet: they follow an execution
// nobody appends to (attached, sent nothing); mode=reading: each reads
// every byte and counts the events (bytes.Count of blank lines, no
// parsing: a reader as cheap as can be, since it shares the process and
// the 2 cores with the server under test); mode=parsing: each parses
// every event into its fields (readEvent), as the old mode=reading did;
// mode=client: each follows with the Go client (client.Stream: every
// event's fields and its JSON record decoded into a client.Record).
func BenchmarkLiveAppendSubscribers(b *testing.B) {
	for _, mode := range []string{"quiet", "idle", "reading", "parsing", "client"} {
		b.Run("mode="+mode+"/subscribers=100", func(b *testing.B) {
			base, l, _, _ := liveServer(b, func(a *api) { a.live.buffer = 1 << 30 })
			var n atomic.Int64
			appendRound := func() time.Duration {
				const perRound, appenders = 2000, 8
				start := time.Now()
				var wg sync.WaitGroup
				for range appenders {
					wg.Go(func() {
						for range perRound / appenders {
							i := n.Add(1)
							if _, err := l.Append(context.Background(), localseg.Event{ExecutionID: "42", TransactionID: fmt.Sprint("t", i), Payload: "p"}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				return time.Since(start)
			}
			var without, with time.Duration
			var cpuWithout, cpuWith time.Duration
			var ratios []float64
			round := 0
			for b.Loop() {
				round++
				var w0 time.Duration
				if round%2 == 1 {
					c := cpuTime()
					w0 = appendRound()
					cpuWithout += cpuTime() - c
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				var got atomic.Int64 // records the subscribers hold, all told
				subscribers := 100
				if mode == "client" {
					clientSubscribers(b, ctx, &wg, base, l, &n, &got)
					subscribers = 0 // attached
				}
				for range subscribers {
					url := fmt.Sprintf("%s/v1/events/stream?after=%d", base, l.Store().Tip())
					if mode == "quiet" {
						url = fmt.Sprintf("%s/v1/executions/other/events/stream?after=%d", base, l.Store().Tip())
					}
					req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					br := bufio.NewReader(resp.Body)
					if _, err := readEvent(br); err != nil {
						b.Fatal(err)
					}
					wg.Go(func() {
						defer resp.Body.Close()
						switch mode {
						case "reading":
							buf := make([]byte, 64<<10)
							for {
								n, err := br.Read(buf)
								got.Add(int64(bytes.Count(buf[:n], []byte("\n\n"))))
								if err != nil {
									return
								}
							}
						case "parsing":
						default:
							<-ctx.Done()
							return
						}
						for {
							e, err := readEvent(br)
							if err != nil {
								return
							}
							if e.id != "" {
								got.Add(1)
							}
						}
					})
				}
				held, c := got.Load(), cpuTime()
				w1 := appendRound()
				if mode == "reading" || mode == "parsing" || mode == "client" {
					// The CPU of the delivery counts until every
					// subscriber holds the round's records.
					for deadline := time.Now().Add(time.Minute); got.Load()-held < 100*2000 && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
				}
				cpuWith += cpuTime() - c
				cancel()
				wg.Wait()
				if round%2 == 0 {
					c := cpuTime()
					w0 = appendRound()
					cpuWithout += cpuTime() - c
				}
				without += w0
				with += w1
				ratios = append(ratios, w0.Seconds()/w1.Seconds())
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "ratio")
			b.ReportMetric(without.Seconds()/with.Seconds(), "ratio-sum")
			b.ReportMetric(float64(b.N*2000)/without.Seconds(), "appends/s-none")
			b.ReportMetric(float64(b.N*2000)/with.Seconds(), "appends/s-100")
			// The process's CPU (all its goroutines: appenders, server,
			// subscribers) per append, and the difference: what 100
			// subscribers cost per append, whatever the machine's load.
			b.ReportMetric(float64(cpuWithout.Microseconds())/float64(b.N*2000), "cpu-µs/append-none")
			b.ReportMetric(float64(cpuWith.Microseconds())/float64(b.N*2000), "cpu-µs/append-100")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// clientSubscribers attaches 100 client.Stream subscribers from the tip
// and returns once each holds a marker record appended after it (so each
// has joined, or is joining, the live hub).
func clientSubscribers(b *testing.B, ctx context.Context, wg *sync.WaitGroup, base string, l *bucketlog.Log, n, got *atomic.Int64) {
	c, err := client.New(base, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	after := l.Store().Tip()
	var joined sync.WaitGroup
	joined.Add(100)
	for range 100 {
		wg.Go(func() {
			first, bytes := true, 0
			for rec, err := range c.Stream(ctx, client.StreamRequest{After: after}) {
				if err != nil {
					break
				}
				bytes += len(rec.Payload) + len(rec.ExecutionID) + len(rec.TransactionID) + rec.ByteLen
				got.Add(1)
				if first {
					first = false
					joined.Done()
				}
			}
			if first {
				joined.Done()
			}
			_ = bytes
		})
	}
	if _, err := l.Append(context.Background(), localseg.Event{ExecutionID: "42", TransactionID: fmt.Sprint("t", n.Add(1)), Payload: "marker"}); err != nil {
		b.Fatal(err)
	}
	joined.Wait()
}

// cpuTime is the CPU the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
