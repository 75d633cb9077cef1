package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

// TestOrdersOnS3 is the shape of an integration test of a service built on
// bucketlog: the service's handlers over a log that ships to an in-process
// S3 emulator, both cleaned up by the test.
func TestOrdersOnS3(t *testing.T) {
	l := bucketlogtest.OpenLog(t, bucketlogtest.NewS3(t), bucketlog.Options{})
	srv := httptest.NewServer((&service{log: l}).routes())
	defer srv.Close()

	for _, body := range []string{`{"type":"created","data":{"items":1}}`, `{"type":"paid","data":null}`} {
		resp, err := http.Post(srv.URL+"/orders/7/events", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %s", body, resp.Status)
		}
	}
	resp, err := http.Get(srv.URL + "/orders/7/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []storedEvent
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Type != "created" || got[1].Type != "paid" || got[1].Sequence != 2 {
		t.Fatalf("GET: %+v", got)
	}
	// What the service acknowledged reaches the bucket.
	if _, err := l.Ship(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if l.ShippedThrough() != 2 {
		t.Fatalf("shipped through %d, want 2", l.ShippedThrough())
	}
}
