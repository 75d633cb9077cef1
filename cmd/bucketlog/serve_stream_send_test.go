package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSSESendKeepsOrderAndFlushes: a stream writes a long run of frames
// as it lies (not copied into its buffer) and short ones through its
// buffer; the client gets every byte in order, the buffered bytes before
// the run, and all of it once flush returns — while the handler is
// still running, so nothing waits in the server's buffers for a later
// write. Runs of several sizes around the server's buffers (2 KiB and
// 4 KiB) follow short ones.
func TestSSESendKeepsOrderAndFlushes(t *testing.T) {
	var parts [][]byte
	for i, n := range []int{10, directWrite, 100, directWrite + 50, 5, 3000, 3 * directWrite, 1, directWrite + 2100} {
		parts = append(parts, bytes.Repeat([]byte{byte('a' + i)}, n))
	}
	want := bytes.Join(parts, nil)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "identity")
		w.WriteHeader(http.StatusOK)
		s := &sse{w: w, rc: http.NewResponseController(w), stall: time.Minute}
		for _, p := range parts {
			if err := s.send(p); err != nil {
				t.Error(err)
				return
			}
		}
		if err := s.flush(); err != nil {
			t.Error(err)
		}
		<-release // the client must have it all before the handler ends
	}))
	defer srv.Close()
	defer close(release)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, len(want))
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(resp.Body, got)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the client did not get every byte sent and flushed")
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("bytes differ from %d: got %q…, want %q…", i, strings.ToValidUTF8(string(got[i:min(i+20, len(got))]), ""), want[i:min(i+20, len(want))])
	}
}
