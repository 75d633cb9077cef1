// Package emulator starts in-process S3 and GCS emulators on real
// 127.0.0.1 listeners. It is the implementation behind the public
// bucketlogtest package, whose S3 and GCS are these types (aliases; the
// contract is in bucketlogtest's documentation). It is a leaf below the
// engine, so the engine's own in-package tests (the root's, reclaim's) can
// use it where bucketlogtest, which imports the engine, would be an import
// cycle. Only tests and test support import it: a program that does links
// gofakes3, fake-gcs-server and gorilla/mux, and the bucketlog command
// must not.
//
// StartS3 serves gofakes3 over its in-memory backend; StartGCS serves
// fake-gcs-server's in-memory backend. Both listen on 127.0.0.1 only (never
// another interface), speak plain HTTP, log nothing, and hold everything in
// memory until Close. Each offers:
//
//   - URL(name): a bucket URL that blobtier.Open and blob.OpenBucket accept,
//     and Env, the environment it needs;
//   - CreateBucket(name), and NewBucket, a bucket with a fresh name;
//   - OpenBucket(ctx, name): a *blob.Bucket built without touching the
//     process environment, and Bucket(ctx, name), the same as a
//     blobtier.Bucket;
//   - PutRaw(bucket, key, data, meta): an object written straight into the
//     emulator's backend, bypassing every client-side check, to plant
//     corrupt or foreign objects at rest;
//   - Close.
//
// The S3 URL carries anonymous=true, so opening it needs no credentials and
// no environment (gofakes3 does not check signatures). URLSigned gives the
// production-shaped URL that signs requests; it needs the variables of
// S3Env. A gs:// URL can only reach an emulator through
// STORAGE_EMULATOR_HOST, a process-wide variable that gcsblob reads at
// every open: set GCS.Env with t.Setenv.
//
// StartBlackhole starts a listener that accepts connections and never
// answers, to test deadlines against a hung server; OpenS3Bucket and
// OpenGCSBucket open a bucket on any endpoint.
//
// Every type here is safe for concurrent use.
package emulator

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// server is an HTTP server on a fresh 127.0.0.1 port.
type server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

func listen(h http.Handler) (*server, error) {
	s, err := bind()
	if err != nil {
		return nil, err
	}
	s.serve(h)
	return s, nil
}

// bind reserves the address; serve starts answering on it. They are apart
// so a handler can be configured with its own address.
func bind() (*server, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("emulator: listen on 127.0.0.1: %w", err)
	}
	return &server{ln: ln, done: make(chan struct{})}, nil
}

func (s *server) serve(h http.Handler) {
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: quietLog}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(s.ln)
	}()
}

// hostPort is "127.0.0.1:PORT".
func (s *server) hostPort() string { return s.ln.Addr().String() }

// close drops every connection at once: an emulator that closes has nothing
// left to finish (and Shutdown would wait 5 s for any connection a client
// dialled speculatively and never used).
func (s *server) close() error {
	if s.srv == nil {
		return s.ln.Close()
	}
	err := s.srv.Close()
	<-s.done
	return err
}

// Blackhole accepts TCP connections on 127.0.0.1 and never answers them.
type Blackhole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

// StartBlackhole starts a Blackhole.
func StartBlackhole() (*Blackhole, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("emulator: listen on 127.0.0.1: %w", err)
	}
	h := &Blackhole{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	return h, nil
}

// Addr is "127.0.0.1:PORT".
func (h *Blackhole) Addr() string { return h.ln.Addr().String() }

// Endpoint is "http://127.0.0.1:PORT".
func (h *Blackhole) Endpoint() string { return "http://" + h.Addr() }

// Close stops accepting and drops every connection.
func (h *Blackhole) Close() error {
	err := h.ln.Close()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
	return err
}

// quietLog swallows net/http's server log (closed connections and the like).
var quietLog = log.New(io.Discard, "", 0)

// newHTTPClient returns a client with a transport of its own, so closing its
// idle connections touches nobody else's.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}
