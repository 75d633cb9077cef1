package client

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// sseStream is n record events as serve frames them, between a start and
// an end event and a heartbeat comment.
func sseStream(n int) string {
	var b strings.Builder
	b.WriteString("event: start\ndata: {\"after\":0,\"base\":1,\"clamped\":false,\"tip\":0}\n\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "id: %d\ndata: {\"global_sequence\":%d,\"execution_id\":\"42\",\"transaction_id\":\"t%d\",\"byte_len\":1,\"payload\":\"p\"}\n\n", i, i, i)
		if i%100 == 0 {
			b.WriteString(": heartbeat\n\n")
		}
	}
	b.WriteString("event: end\ndata: {\"reason\":\"shutdown\",\"resume_after\":7}\n\n")
	return b.String()
}

// TestReadSSEAllocatesNothingPerEvent: a subscriber parses every event
// of a busy stream, so the framing costs no allocation per line or per
// event (a reader reused across events; each event's fields are valid
// until fn returns). The Scanner that gave a new string per line and
// joined the data lines allocated several per event.
func TestReadSSEAllocatesNothingPerEvent(t *testing.T) {
	const n = 2000
	in := sseStream(n)
	var r strings.Reader
	events := 0
	allocs := testing.AllocsPerRun(5, func() {
		r.Reset(in)
		events = 0
		if err := readSSE(&r, func(ev sseEvent) error {
			if len(ev.id) > 0 {
				events++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if events != n {
		t.Fatalf("%d record events, want %d", events, n)
	}
	if allocs > 20 {
		t.Fatalf("%.0f allocations for %d events: the framing allocates per event", allocs, n)
	}
}

// TestReadSSEFraming: the event-stream rules the parser keeps (the WHATWG
// format): CRLF or LF line ends, comments, data lines joined by "\n", a
// field without a colon, one space after the colon stripped, a line
// longer than the reader's buffer, an event without a blank line at EOF
// not dispatched.
func TestReadSSEFraming(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := "id: 1\r\nevent: e\r\ndata: a\r\ndata:b\r\ndata\r\n\r\n" +
		": comment\n\n" +
		"id: 2\ndata:  two spaces\n\n" +
		"id: 3\ndata: " + long + "\n\n" +
		"id: 4\ndata: unterminated\n"
	type got struct{ id, name, data string }
	var gots []got
	if err := readSSE(strings.NewReader(in), func(ev sseEvent) error {
		gots = append(gots, got{string(ev.id), string(ev.name), string(ev.data)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []got{{"1", "e", "a\nb\n"}, {"2", "", " two spaces"}, {"3", "", long}}
	if !reflect.DeepEqual(gots, want) {
		t.Fatalf("events %.200q, want %.200q", gots, want)
	}
	stop := io.ErrUnexpectedEOF
	if err := readSSE(strings.NewReader(in), func(sseEvent) error { return stop }); err != stop {
		t.Fatalf("fn's error not returned: %v", err)
	}
}

// TestDecodeRecordMatchesJSON: the streamed record's decoder answers
// exactly what encoding/json does (fields, and whether it is an error)
// for serve's framing and for anything else a server could send
// (escapes, other field orders, unknown fields, non-ASCII, invalid
// UTF-8, bad JSON).
func TestDecodeRecordMatchesJSON(t *testing.T) {
	cases := []string{
		`{"global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"}`,
		`{"global_sequence":18446744073709551615,"execution_id":"","transaction_id":"","byte_len":0,"payload":""}`,
		`{"global_sequence":7,"execution_id":"a\"b","transaction_id":"t\\7","byte_len":2,"payload":"\u00e9\n"}`,
		`{"global_sequence":7,"execution_id":"a\nb\\c\u00e9\/","transaction_id":"t\t","byte_len":1,"payload":"\u2028"}`,
		`{"global_sequence":7,"execution_id":"é漢","transaction_id":"t","byte_len":5,"payload":"ö"}`,
		"{\"global_sequence\":7,\"execution_id\":\"\xff\",\"transaction_id\":\"t\",\"byte_len\":1,\"payload\":\"p\"}",
		`{"payload":"p","global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":1}`,
		`{"global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p","extra":true}`,
		`{ "global_sequence": 7, "execution_id": "42", "transaction_id": "t7", "byte_len": 1, "payload": "p" }`,
		`{"global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"} `,
		`{"global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"}x`,
		`{"global_sequence":-7,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"}`,
		`{"global_sequence":18446744073709551616,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"}`,
		`{"global_sequence":07,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"}`,
		`{"global_sequence":7.5,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"}`,
		`{"global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":-1,"payload":"p"}`,
		`{"global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p`,
		"{\"global_sequence\":7,\"execution_id\":\"4\n2\",\"transaction_id\":\"t7\",\"byte_len\":1,\"payload\":\"p\"}",
		`{"global_sequence":7,"execution_id":42,"transaction_id":"t7","byte_len":1,"payload":"p"}`,
		`{"global_sequence":7,"execution_id":null,"transaction_id":"t7","byte_len":1,"payload":"p"}`,
		`{"global_sequence":7}`,
		`{}`, ``, `null`, `[]`,
	}
	for _, c := range cases {
		var want Record
		werr := json.Unmarshal([]byte(c), &want)
		got, gerr := decodeRecord([]byte(c))
		if (werr == nil) != (gerr == nil) || (werr == nil && got != want) {
			t.Errorf("%q: decoded %+v, %v; encoding/json %+v, %v", c, got, gerr, want, werr)
		}
	}
}

// TestDecodeRecordAllocatesOnce: a streamed record costs one allocation
// (its strings share one), where encoding/json took several.
func TestDecodeRecordAllocatesOnce(t *testing.T) {
	b := []byte(`{"global_sequence":7,"execution_id":"42","transaction_id":"t7","byte_len":1,"payload":"p"}`)
	var rec Record
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if rec, err = decodeRecord(b); err != nil {
			t.Fatal(err)
		}
	})
	if rec.Sequence != 7 || rec.ExecutionID != "42" || rec.TransactionID != "t7" || rec.ByteLen != 1 || rec.Payload != "p" {
		t.Fatalf("decoded %+v", rec)
	}
	if allocs > 1 {
		t.Fatalf("%.0f allocations per record", allocs)
	}
}

// BenchmarkStreamParse: the cost per event of what Stream does with each
// event of serve's stream (framing, id, record decoded).
//
//	go test ./client -run '^$' -bench BenchmarkStreamParse
func BenchmarkStreamParse(b *testing.B) {
	const n = 10000
	in := sseStream(n)
	var r strings.Reader
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r.Reset(in)
		if err := readSSE(&r, func(ev sseEvent) error {
			if len(ev.id) == 0 {
				return nil
			}
			if _, ok := parseSeq(ev.id); !ok {
				return fmt.Errorf("id %q", ev.id)
			}
			_, err := decodeRecord(ev.data)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}
