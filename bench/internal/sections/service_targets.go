package sections

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/service"
	"github.com/bucketlog/bucketlog/client"
)

func init() {
	harness.RegisterChild(service.NatsChild, func(args []string, _ io.Writer) error { return service.RunNatsd(args) })
}

const (
	// servicePayload is the payload size of every cell.
	servicePayload = 256
	// serviceBatch is the events of one batch POST.
	serviceBatch = 100
	// natsWindow is the PubAcks one PublishAsync client may await at once.
	natsWindow = 64
	// serviceWarmup is the requests before timing (their events count as
	// acknowledged too).
	serviceWarmup = 16
	// serveTick is serve's --tail-interval with a bucket: short, so every
	// cell ships (the default 15 s would ship nothing inside a short cell).
	serveTick = "1s"
)

// serviceTarget is one way of appending over the wire.
type serviceTarget struct {
	name string
	// batch is the events per request (1: single events).
	batch int
	// run starts a fresh server in dir, times clients for d, checks the
	// count, SIGKILLs and restarts the server and checks it again.
	run func(ctx context.Context, sc *serviceCtx, dir string, clients int, d time.Duration) (service.LoopResult, error)
}

// serviceCtx is what the targets share in one run.
type serviceCtx struct {
	env     *harness.Env
	bin     string // the bucketlog binary
	emu     *buckets.Emulator
	payload []byte
}

func serviceTargets() []serviceTarget {
	return []serviceTarget{
		{name: "nats/publish", batch: 1, run: runNats(0, 1)},
		{name: "nats/publish-async", batch: 1, run: runNats(natsWindow, 1)},
		{name: "nats/batch100", batch: serviceBatch, run: runNats(0, serviceBatch)},
		{name: "serve/post", batch: 1, run: runServeTarget(false, 1, false)},
		{name: "serve/batch100", batch: serviceBatch, run: runServeTarget(false, serviceBatch, false)},
		{name: "serve/client", batch: 1, run: runServeTarget(false, 1, true)},
		{name: "serve+s3/post", batch: 1, run: runServeTarget(true, 1, false)},
		{name: "serve+s3/batch100", batch: serviceBatch, run: runServeTarget(true, serviceBatch, false)},
		{name: "serve+s3/client", batch: 1, run: runServeTarget(true, 1, true)},
	}
}

// checkCount compares the stored count with the acknowledged one.
func checkCount(what string, got uint64, err error, want uint64) error {
	if err != nil {
		return fmt.Errorf("count %s: %w", what, err)
	}
	if got != want {
		return fmt.Errorf("%s the server holds %d events, %d were acknowledged", what, got, want)
	}
	return nil
}

// runNats publishes with Publish (window 0, batch 1), PublishAsync with
// a window, or atomic batches of batch messages.
func runNats(window, batch int) func(context.Context, *serviceCtx, string, int, time.Duration) (service.LoopResult, error) {
	return func(ctx context.Context, sc *serviceCtx, dir string, clients int, d time.Duration) (service.LoopResult, error) {
		n, err := service.StartNats(ctx, sc.env.Self, harness.ChildFlag, dir)
		if err != nil {
			return service.LoopResult{}, err
		}
		defer n.Kill()
		if err := n.CreateStream(ctx, batch > 1); err != nil {
			return service.LoopResult{}, fmt.Errorf("create the stream: %w", err)
		}
		p, err := service.NewNatsPublisher(n, clients, window)
		if err != nil {
			return service.LoopResult{}, err
		}
		defer p.Close()
		for range serviceWarmup {
			if err := p.Sync(ctx, 0, sc.payload); err != nil {
				return service.LoopResult{}, fmt.Errorf("warm-up: %w", err)
			}
		}
		var res service.LoopResult
		switch {
		case batch > 1:
			res, err = service.Loop(ctx, clients, d, func(ctx context.Context, i int, n uint64) (int, error) {
				return p.Batch(ctx, i, txnID(i, n), batch, sc.payload)
			})
		case window == 0:
			res, err = service.Loop(ctx, clients, d, func(ctx context.Context, i int, _ uint64) (int, error) {
				return 1, p.Sync(ctx, i, sc.payload)
			})
		default:
			res, err = service.LoopAsync(ctx, p, clients, window, d, sc.payload)
		}
		if err != nil {
			return res, err
		}
		acked := res.Events + serviceWarmup
		got, err := n.Count(ctx)
		if err := checkCount("after the cell:", got, err, acked); err != nil {
			return res, err
		}
		p.Close()
		if err := n.Restart(ctx, harness.ChildFlag); err != nil {
			return res, fmt.Errorf("restart after SIGKILL: %w", err)
		}
		got, err = n.Count(ctx)
		return res, checkCount("after SIGKILL and restart:", got, err, acked)
	}
}

func runServeTarget(bucket bool, batch int, viaClient bool) func(context.Context, *serviceCtx, string, int, time.Duration) (service.LoopResult, error) {
	return func(ctx context.Context, sc *serviceCtx, dir string, clients int, d time.Duration) (service.LoopResult, error) {
		var extra []string
		if bucket {
			name, err := sc.emu.NewBucket("service")
			if err != nil {
				return service.LoopResult{}, err
			}
			extra = []string{"--bucket", sc.emu.URL(name), "--tail-interval", serveTick}
		}
		s, err := service.StartServe(ctx, sc.bin, filepath.Join(dir, "store"), extra, nil)
		if err != nil {
			return service.LoopResult{}, err
		}
		defer s.Kill()
		hc := service.NewHTTPClient(clients)
		defer hc.CloseIdleConnections()
		op := serveOp(s.URL, hc, sc.payload, batch)
		if viaClient {
			c, err := client.New(s.URL, client.Options{HTTPClient: hc, Retry: client.Retry{MaxAttempts: 1}})
			if err != nil {
				return service.LoopResult{}, err
			}
			op = func(ctx context.Context, i int, n uint64) (int, error) {
				_, err := c.Append(ctx, client.Event{ExecutionID: execID(i), TransactionID: txnID(i, n), Payload: string(sc.payload)})
				return 1, err
			}
		}
		var warm uint64
		for n := range uint64(serviceWarmup) {
			k, err := op(ctx, clients, n) // client index clients: ids of its own
			if err != nil {
				return service.LoopResult{}, fmt.Errorf("warm-up: %w", err)
			}
			warm += uint64(k)
		}
		res, err := service.Loop(ctx, clients, d, op)
		if err != nil {
			return res, err
		}
		acked := res.Events + warm
		got, err := s.Count(ctx)
		if err := checkCount("after the cell:", got, err, acked); err != nil {
			return res, err
		}
		hc.CloseIdleConnections()
		if err := s.Restart(ctx); err != nil {
			return res, fmt.Errorf("restart after SIGKILL: %w", err)
		}
		got, err = s.Count(ctx)
		return res, checkCount("after SIGKILL and restart:", got, err, acked)
	}
}

func execID(i int) string { return fmt.Sprintf("exec-%05d", i) }

func txnID(i int, n uint64) string { return fmt.Sprintf("c%d-%d", i, n) }

// serveOp POSTs one event, or a batch of batch events, per request.
func serveOp(url string, h *http.Client, payload []byte, batch int) service.Op {
	return func(ctx context.Context, i int, n uint64) (int, error) {
		var body []byte
		if batch == 1 {
			body = service.EventJSON(make([]byte, 0, 128+len(payload)), execID(i), txnID(i, n), payload)
			return service.Post(ctx, h, url, body, false)
		}
		body = make([]byte, 0, batch*(128+len(payload))+16)
		body = append(body, `{"events":[`...)
		for k := range batch {
			if k > 0 {
				body = append(body, ',')
			}
			body = service.EventJSON(body, execID(i), txnID(i, n*uint64(batch)+uint64(k)), payload)
		}
		body = append(body, "]}"...)
		return service.Post(ctx, h, url, body, true)
	}
}

// removeAll removes a cell's directory (errors are reported, not fatal).
func removeAll(env *harness.Env, dir string) {
	if err := os.RemoveAll(dir); err != nil {
		env.Logf("service: remove %s: %v", dir, err)
	}
}
