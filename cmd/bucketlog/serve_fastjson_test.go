package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
)

func fastAPI() *api {
	return newAPI(apiConfig{own: affinity.Ownership{Index: 0, Count: 1}, segMax: 1 << 20})
}

// TestAppendParseAllocs: parsing a single-event POST body costs its three
// strings and the slice, not three reflective decodings (the general
// path takes 71 allocations here).
func TestAppendParseAllocs(t *testing.T) {
	a := fastAPI()
	body := []byte(`{"execution_id":"exec-00001","transaction_id":"c0-1","payload":"` + strings.Repeat("p", 256) + `"}`)
	var err error
	allocs := testing.AllocsPerRun(200, func() { _, _, err = a.parseEvents(body) })
	if err != nil {
		t.Fatal(err)
	}
	if allocs > 6 {
		t.Errorf("parseEvents of one event: %.0f allocations, want at most 6", allocs)
	}
}

// bodiesForDiff are bodies around the fast path's edges: it must either
// decline them or agree with the strict path exactly.
func bodiesForDiff() []string {
	ev := func(e, t, p string) string {
		return `{"execution_id":"` + e + `","transaction_id":"` + t + `","payload":"` + p + `"}`
	}
	base := ev("x", "t", "p")
	return []string{
		base,
		" \t\r\n" + base + " \n",
		`{ "execution_id" : "x" , "transaction_id" : "t" , "payload" : "p" }`,
		`{"payload":"p","execution_id":"x","transaction_id":"t"}`,
		`{"execution_id":"x","transaction_id":"t","payload":"p","payload":"q"}`,
		`{"execution_id":"x","execution_id":"y","transaction_id":"t","payload":"p"}`,
		`{"Execution_id":"x","transaction_id":"t","payload":"p"}`,
		`{"execution_id":"x","transaction_id":"t","PAYLOAD":"p"}`,
		`{"execution_id":"x","transaction_id":"t","Payload":"p"}`,
		`{"execution_id":"x","Transaction_Id":"t","payload":"p"}`,
		`{"execution_\u0069d":"x","transaction_id":"t","payload":"p"}`,
		`{"execution_id":"x","transaction_id":"t","payload":"a\"b\\c\u00e9\ud83d\ude00\n"}`,
		`{"execution_id":"x","transaction_id":"t","payload":"\udc00"}`,
		`{"execution_id":"x","transaction_id":"t","payload":"` + "\x01" + `"}`,
		`{"execution_id":"x","transaction_id":"t","payload":"é<&>` + "\u2028" + `"}`,
		`{"execution_id":"x","transaction_id":"t","payload":1}`,
		`{"execution_id":"x","transaction_id":"t","payload":null}`,
		`{"execution_id":"x","transaction_id":"t"}`,
		`{"execution_id":"x","transaction_id":"t","payload":"p",}`,
		`{"execution_id":"x","transaction_id":"t","payload":"p","extra":"e"}`,
		`{"execution_id":"x","transaction_id":"t","payload":"p"}{}`,
		`{"execution_id":"x","transaction_id":"t","payload":"p"} x`,
		`{"execution_id":"x","transaction_id":"t","payload":"p"`,
		`{"execution_id":"bad id","transaction_id":"t","payload":"p"}`,
		`{"execution_id":"  x  ","transaction_id":"t","payload":"p"}`,
		`{"execution_id":"x","transaction_id":"  ","payload":"p"}`,
		`{"events":[` + base + `]}`,
		` { "events" : [ ` + base + ` , ` + ev("y", "u", "") + ` ] } `,
		`{"events":[` + base + `],}`,
		`{"events":[` + base + `,]}`,
		`{"events":[]}`,
		`{"events":null}`,
		`{"Events":[` + base + `]}`,
		`{"events":[` + base + `],"events":[` + base + `]}`,
		`{"events":[` + base + `],"payload":"x"}`,
		`{"events":[` + base + `,` + ev("bad id", "t", "p") + `]}`,
		`{"events":[` + base + `,{"execution_id":"x","transaction_id":"t","payload":"\u0041"}]}`,
		`{"events":[` + base + `]}{}`,
		`{"events":[` + base + `]`,
		`{"events":{}}`,
		`[` + base + `]`,
		`{}`, ``, `null`, `"x"`,
		`{"events":[` + strings.Repeat(base+`,`, maxBatchEvents-1) + base + `]}`,
		`{"events":[` + strings.Repeat(base+`,`, maxBatchEvents) + base + `]}`,
	}
}

// checkFastAgrees asserts parseEvents (fast path first) and
// parseEventsStrict return the same events, batch flag and error text for
// body, which has passed readBody's checks.
func checkFastAgrees(t *testing.T, a *api, body string) {
	t.Helper()
	gotEvs, gotBatch, gotErr := a.parseEvents([]byte(body))
	wantEvs, wantBatch, wantErr := a.parseEventsStrict([]byte(body))
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(gotEvs, wantEvs) || (gotErr == nil && gotBatch != wantBatch) {
		t.Errorf("body %q:\n fast   %v %v %v\n strict %v %v %v", body, gotEvs, gotBatch, gotErr, wantEvs, wantBatch, wantErr)
	}
}

// TestAppendFastPathAgrees: on every edge body, and on random mutations of
// valid ones, the fast path is indistinguishable from the strict one.
func TestAppendFastPathAgrees(t *testing.T) {
	a := fastAPI()
	bodies := bodiesForDiff()
	for _, b := range bodies {
		if utf8.ValidString(b) && checkSurrogates([]byte(b)) == nil {
			checkFastAgrees(t, a, b)
		}
	}
	// Random byte edits (insert, delete, replace with a JSON-significant
	// byte) of the valid bodies.
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]":, \\ue0aAxEp_`)
	n := 0
	for n < 20000 {
		b := []byte(bodies[r.IntN(len(bodies))])
		if len(b) == 0 || len(b) > 1000 {
			continue
		}
		for range 1 + r.IntN(2) {
			i := r.IntN(len(b))
			switch r.IntN(3) {
			case 0:
				b = append(b[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
			case 1:
				b = append(b[:i], b[i+1:]...)
			default:
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
			if len(b) == 0 {
				break
			}
		}
		if !utf8.Valid(b) || checkSurrogates(b) != nil {
			continue
		}
		checkFastAgrees(t, a, string(b))
		n++
	}
}

// TestAppendAnswerEncoding: the hand-written answer of a single append is
// byte for byte the reflective encoder's.
func TestAppendAnswerEncoding(t *testing.T) {
	for _, out := range []appendOutput{
		{Action: actionAppend, ExecutionID: "exec-1", GlobalSequence: 7, ByteLen: 256, CreatedStream: true, LogRecordCount: 7},
		{Action: actionAppend, ExecutionID: "e", GlobalSequence: 1<<64 - 1, ByteLen: 0, LogRecordCount: 1<<64 - 1, Duplicate: true},
		{Action: actionAppend, ExecutionID: "é<&>\"\\\u2028", GlobalSequence: 3},
	} {
		var want bytes.Buffer
		if err := writeJSON(&want, emptyLists(out)); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		writeAppend(rec, http.StatusCreated, out)
		if rec.Body.String() != want.String() || rec.Code != http.StatusCreated || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%+v: got %d %q %q, want %q", out, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), want.String())
		}
	}
}

// BenchmarkServeAppendHandler is one single-event POST through serve's
// handler (engine included, fsync and all).
func BenchmarkServeAppendHandler(b *testing.B) {
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: b.TempDir(), ShardCount: 1, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	a := fastAPI()
	a.setLog(l)
	payload := strings.Repeat("p", 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body := `{"execution_id":"exec-1","transaction_id":"t` + fmt.Sprint(i) + `","payload":"` + payload + `"}`
		req := httptest.NewRequest("POST", "/v1/events", strings.NewReader(body))
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}

// BenchmarkParseOne is parseEvents of one 256 B event.
func BenchmarkParseOne(b *testing.B) {
	a := fastAPI()
	body := []byte(`{"execution_id":"exec-00001","transaction_id":"c0-1","payload":"` + strings.Repeat("p", 256) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := a.parseEvents(body); err != nil {
			b.Fatal(err)
		}
	}
}
