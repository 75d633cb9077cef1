package kill9

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// fakeS3 is one gofakes3 backend, in memory in the parent process, served
// on several 127.0.0.1 listeners: one for the parent's own reads (restore)
// and one per child incarnation. A child's listener is shut down after the
// child died, which waits for every request it had in flight, so what the
// parent then reads from the bucket no longer changes under it.
//
// internal/emulator.StartS3 serves the same backend type on one listener;
// the harness needs a listener per child to know when a dead child's last
// request has landed, so it builds its own here.
type fakeS3 struct {
	backend *s3mem.Backend
	handler http.Handler
	parent  *endpoint
}

type endpoint struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

func startFakeS3() (*fakeS3, error) {
	backend := s3mem.New()
	f := &fakeS3{backend: backend, handler: gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()}
	p, err := f.serve(0)
	if err != nil {
		return nil, err
	}
	f.parent = p
	return f, nil
}

var quiet = log.New(io.Discard, "", 0)

func slowPuts(next http.Handler, maxDelay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// The client went away mid-body: nothing is stored.
			http.Error(w, "incomplete body", http.StatusBadRequest)
			return
		}
		time.Sleep(rand.N(maxDelay))
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// serve starts a new listener on the shared backend. With putDelay > 0
// every PUT is held, once its body has arrived, for a random time up to
// putDelay before it is stored: a slow bucket, so synchronous appends
// sometimes time out (ErrNotInBucket) and more kills land while an upload
// is in flight (the object still lands after the client died, as on a real
// server that received the whole request).
func (f *fakeS3) serve(putDelay time.Duration) (*endpoint, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kill9: listen on 127.0.0.1: %w", err)
	}
	h := f.handler
	if putDelay > 0 {
		h = slowPuts(h, putDelay)
	}
	e := &endpoint{ln: ln, done: make(chan struct{}), srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: quiet}}
	go func() {
		defer close(e.done)
		_ = e.srv.Serve(ln)
	}()
	return e, nil
}

func (f *fakeS3) createBucket(name string) error {
	if err := f.backend.CreateBucket(name); err != nil {
		return fmt.Errorf("kill9: create bucket %s: %w", name, err)
	}
	return nil
}

// URL is an anonymous s3:// URL of bucket name through this endpoint
// (gofakes3 checks no signature, so a child needs no credentials).
func (e *endpoint) URL(name string) string {
	return fmt.Sprintf("s3://%s?endpoint=http://%s&use_path_style=true&region=us-east-1&anonymous=true", name, e.ln.Addr())
}

// drain closes the listener, waits for the requests in flight to finish
// and closes every connection. Connections still queued in the listen
// backlog are dropped with the listener.
func (e *endpoint) drain(ctx context.Context) error {
	err := e.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, e.srv.Close())
	}
	<-e.done
	if err != nil {
		return fmt.Errorf("kill9: drain the child's bucket endpoint: %w", err)
	}
	return nil
}

func (f *fakeS3) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.parent.drain(ctx)
}
