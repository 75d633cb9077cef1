// Command fakebucket serves an in-process S3 emulator (gofakes3, through
// internal/emulator) on 127.0.0.1 behind a proxy that can be taken down
// and brought back, for scripts/operator-findings.sh. It is test support:
// the bucketlog command never links an emulator.
//
// It prints one JSON line on stdout, {"url","endpoint","control"}: url is
// a bucket URL bucketlog opens with no credentials, endpoint the proxy's
// address, and control the prefix of two endpoints, POST control+"/down"
// (every bucket request answers 503 until up) and POST control+"/up". It
// serves until SIGTERM or SIGINT. --buckets names the buckets it creates
// (comma-separated; the first is url's).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bucketlog/bucketlog/internal/emulator"
)

const controlPath = "/__fakebucket"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fakebucket:", err)
		os.Exit(1)
	}
}

func run() error {
	buckets := flag.String("buckets", "findings", "comma-separated bucket names to create")
	flag.Parse()
	s3, err := emulator.StartS3()
	if err != nil {
		return err
	}
	defer s3.Close()
	names := strings.Split(*buckets, ",")
	for _, n := range names {
		if err := s3.CreateBucket(n); err != nil {
			return err
		}
	}
	target, err := url.Parse(s3.Endpoint())
	if err != nil {
		return err
	}
	var down atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+controlPath+"/down", func(w http.ResponseWriter, _ *http.Request) { down.Store(true) })
	mux.HandleFunc("POST "+controlPath+"/up", func(w http.ResponseWriter, _ *http.Request) { down.Store(false) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	endpoint := "http://" + ln.Addr().String()
	line, err := json.Marshal(map[string]string{
		"url":      strings.Replace(s3.URL(names[0]), s3.Endpoint(), endpoint, 1),
		"endpoint": endpoint,
		"control":  endpoint + controlPath,
	})
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}
