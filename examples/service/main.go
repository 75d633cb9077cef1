// Command service is a small HTTP service that keeps its event log in
// bucketlog: an "orders" service whose every state change is an event of
// the order (the order id is the execution id), appended durably on the
// local disk and shipped to a bucket.
//
//	go run ./examples/service                 # self-contained: see below
//	go run ./examples/service -bucket s3://my-bucket?region=eu-west-1 -dir /var/lib/orders -serve
//
// The bucket comes from -bucket, else BUCKETLOG_BUCKET_URL, else an S3
// emulator (gofakes3, through bucketlogtest) started inside the process, so
// it runs with no setup.
// Without -serve it starts the service, plays a client against it over
// HTTP (a few orders and their events), prints what it read back and
// stops: SIGTERM-style shutdown, where Close ships the tail to the bucket
// one last time. With -serve it answers until SIGINT or SIGTERM.
//
// Routes:
//
//	POST /orders/{id}/events   body {"type":"…","data":…}  → 201 {"sequence":N}
//	GET  /orders/{id}/events                              → 200 [{"sequence","type","data"}]
//
// The service has no authentication; it is an example.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

// config is what the service runs with.
type config struct {
	bucketURL string // "" starts an in-process S3 emulator
	dir       string // "" uses a temporary directory, removed at the end
	listen    string
	serve     bool // answer until a signal instead of playing the demo client
}

func main() {
	var cfg config
	flag.StringVar(&cfg.bucketURL, "bucket", os.Getenv("BUCKETLOG_BUCKET_URL"), "bucket URL (default BUCKETLOG_BUCKET_URL; empty: an in-process S3 emulator)")
	flag.StringVar(&cfg.dir, "dir", "", "data directory (default: a temporary one, removed at exit)")
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:0", "HTTP address")
	flag.BoolVar(&cfg.serve, "serve", false, "keep serving until SIGINT or SIGTERM")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

// orderEvent is the body of POST /orders/{id}/events.
type orderEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// storedEvent is one event of GET /orders/{id}/events.
type storedEvent struct {
	Sequence uint64          `json:"sequence"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
}

// service is the HTTP front of the log.
type service struct {
	log *bucketlog.Log
	txn atomic.Uint64 // a per-process transaction counter
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}/events", s.append)
	mux.HandleFunc("GET /orders/{id}/events", s.list)
	return mux
}

func (s *service) append(w http.ResponseWriter, r *http.Request) {
	var ev orderEvent
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil || ev.Type == "" {
		http.Error(w, `{"error":"want {\"type\":\"…\",\"data\":…}"}`, http.StatusBadRequest)
		return
	}
	// The payload is stored byte for byte; here it is the event as JSON.
	payload, _ := json.Marshal(ev)
	res, err := s.log.Append(r.Context(), bucketlog.Event{
		ExecutionID:   r.PathValue("id"),
		TransactionID: fmt.Sprintf("orders-%d", s.txn.Add(1)),
		Payload:       string(payload),
	})
	if err != nil {
		// The engine's errors map onto HTTP statuses (400, 409, 421, 503…).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(bucketlog.HTTPStatus(err))
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error(), "class": bucketlog.Class(err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]uint64{"sequence": res.Seq})
}

func (s *service) list(w http.ResponseWriter, r *http.Request) {
	res, err := s.log.ReadExecution(r.Context(), r.PathValue("id"), 0, 1000)
	if err != nil {
		w.WriteHeader(bucketlog.HTTPStatus(err))
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	out := []storedEvent{}
	for _, rec := range res.Page.Records {
		var ev orderEvent
		if err := json.Unmarshal([]byte(rec.Payload), &ev); err != nil {
			continue
		}
		out = append(out, storedEvent{Sequence: rec.Seq, Type: ev.Type, Data: ev.Data})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// run starts the service and, unless cfg.serve, drives it as a client and
// stops. It writes what it does to out.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	if cfg.bucketURL == "" {
		s3, err := bucketlogtest.StartS3()
		if err != nil {
			return err
		}
		defer s3.Close()
		if err := s3.CreateBucket("orders"); err != nil {
			return err
		}
		cfg.bucketURL = s3.URL("orders")
		fmt.Fprintln(out, "bucket: an in-process S3 emulator (set -bucket or BUCKETLOG_BUCKET_URL for a real one)")
	}
	if cfg.dir == "" {
		tmp, err := os.MkdirTemp("", "orders-service-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		cfg.dir = tmp
	}

	l, err := bucketlog.Open(ctx, bucketlog.Options{
		Dir:       cfg.dir,
		BucketURL: cfg.bucketURL,
		// The tail tick is the loss window if the disk is lost: events
		// appended since the last tick exist only locally until then.
		TailInterval: 2 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return fmt.Errorf("open the event log: %w", err)
	}
	defer func() {
		// Close ships the tail to the bucket one last time.
		if cerr := l.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close the event log: %w", cerr)
		}
	}()

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	svc := &service{log: l}
	srv := &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	fmt.Fprintln(out, "listening on", base)

	if cfg.serve {
		select {
		case <-ctx.Done():
		case err := <-served:
			return err
		}
	} else if err := client(ctx, base, out); err != nil {
		srv.Close()
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(out, "stopped; the log's tail ships to the bucket as it closes")
	return nil
}

// client plays a shop against the service: three orders, a few events
// each, then reads one order back.
func client(ctx context.Context, base string, out io.Writer) error {
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	post := func(order, typ, data string) error {
		body := fmt.Sprintf(`{"type":%q,"data":%s}`, typ, data)
		req, err := http.NewRequestWithContext(ctx, "POST", base+"/orders/"+order+"/events", strings.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var res map[string]any
		json.NewDecoder(resp.Body).Decode(&res)
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("append to order %s: %d %v", order, resp.StatusCode, res)
		}
		return nil
	}
	for _, order := range []string{"1001", "1002", "1003"} {
		for _, ev := range [][2]string{
			{"created", `{"items":2,"total":"19.90 €"}`},
			{"paid", `{"method":"card"}`},
			{"shipped", `{"carrier":"post"}`},
		} {
			if err := post(order, ev[0], ev[1]); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(out, "appended 9 events to 3 orders")

	req, err := http.NewRequestWithContext(ctx, "GET", base+"/orders/1002/events", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var evs []storedEvent
	if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil {
		return err
	}
	fmt.Fprintln(out, "order 1002:")
	for _, ev := range evs {
		fmt.Fprintf(out, "  #%d %s %s\n", ev.Sequence, ev.Type, ev.Data)
	}
	return nil
}
