package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// TestCheckSurrogates: lone surrogate escapes are refused; pairs, escaped
// backslashes and ordinary escapes pass.
func TestCheckSurrogates(t *testing.T) {
	cases := []struct {
		in   string
		fail bool
	}{
		{`{"p":"\ud83d\ude80"}`, false},              // a pair: U+1F680
		{`{"p":"\uD83D\uDE80"}`, false},              // upper-case hex
		{`{"p":"\u00e9 \u2028 \n \" \\ \/"}`, false}, // ordinary escapes
		{`{"p":"\\ud800"}`, false},                   // an escaped backslash, then text
		{`{"p":"\\\ud83d\ude80"}`, false},            // a backslash, then a pair
		{`{"p":"\ud800"}`, true},                     // high alone
		{`{"p":"\ud800x"}`, true},                    // high, then text
		{`{"p":"\ud800\u0041"}`, true},               // high, then not a low
		{`{"p":"\ud800\ud800"}`, true},               // two highs
		{`{"p":"\udc00"}`, true},                     // low alone
		{`{"p":"\ude80\ud83d"}`, true},               // a pair in the wrong order
		{`{"p":"\\\ud800"}`, true},                   // a backslash, then a lone high
		{`{"p":"x\ud83d`, true},                      // cut short
		{`{"p":"\uZZZZ"}`, false},                    // not hex: the decoder refuses it
	}
	for _, tc := range cases {
		err := checkSurrogates([]byte(tc.in))
		if (err != nil) != tc.fail {
			t.Errorf("%s: err = %v, want failure %v", tc.in, err, tc.fail)
		}
		if err != nil && !errors.Is(err, localseg.ErrInvalidInput) {
			t.Errorf("%s: %v is not invalid input", tc.in, err)
		}
	}
}

// TestSurrogateRedControl is the RED control of checkSurrogates: without
// it, encoding/json accepts a lone surrogate and stores U+FFFD, a payload
// other than the one sent, with no error at all.
func TestSurrogateRedControl(t *testing.T) {
	line := []byte(`{"execution_id":"1","transaction_id":"t","payload":"a\ud800b"}`)
	var fe fileEvent
	if err := json.Unmarshal(line, &fe); err != nil {
		t.Fatalf("encoding/json refused it after all: %v", err)
	}
	if *fe.Payload != "a\uFFFDb" {
		t.Fatalf("encoding/json decoded %q", *fe.Payload)
	}
	if _, err := parseEventLine(line, localseg.DefaultSegmentMaxBytes); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("parseEventLine accepted a lone surrogate: %v", err)
	}
}

// TestReadEvents: line numbers, blank lines, CRLF, and a batch refused
// whole on its first bad line.
func TestReadEvents(t *testing.T) {
	in := "\n" + `{"execution_id":" 7 ","transaction_id":"a","payload":"x"}` + "\r\n\n" + `{"execution_id":"8","transaction_id":"b","payload":""}`
	evs, lines, err := readEvents(strings.NewReader(in), localseg.DefaultSegmentMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].ExecutionID != "7" || evs[1].Payload != "" || lines[0] != 2 || lines[1] != 4 {
		t.Fatalf("%+v %v", evs, lines)
	}
	_, _, err = readEvents(strings.NewReader(in+"\n{}"), localseg.DefaultSegmentMaxBytes)
	if err == nil || !strings.Contains(err.Error(), "line 5") || !errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := readEvents(strings.NewReader(" \n\n"), localseg.DefaultSegmentMaxBytes); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("blank file: %v", err)
	}
}

// TestCheckEventAgreesWithTheStore: for a range of inputs the command's
// pre-check and the store accept and refuse the same events (the store is
// the authority; the pre-check only runs first).
func TestCheckEventAgreesWithTheStore(t *testing.T) {
	const segMax = 600
	evs := []localseg.Event{
		{ExecutionID: "1", TransactionID: "t", Payload: "p"},
		{ExecutionID: " a-B_9 ", TransactionID: "t", Payload: ""},
		{ExecutionID: "", TransactionID: "t", Payload: "p"},
		{ExecutionID: "a.b", TransactionID: "t", Payload: "p"},
		{ExecutionID: strings.Repeat("x", 256), TransactionID: "t", Payload: "p"},
		{ExecutionID: strings.Repeat("x", 257), TransactionID: "t", Payload: "p"},
		{ExecutionID: "1", TransactionID: "\t", Payload: "p"},
		{ExecutionID: "1", TransactionID: "t\xff", Payload: "p"},
		{ExecutionID: "1", TransactionID: strings.Repeat("t", 1025), Payload: "p"},
		{ExecutionID: "1", TransactionID: "t", Payload: "\xed\xa0\x80"}, // an encoded surrogate
		{ExecutionID: "1", TransactionID: "t", Payload: strings.Repeat("é", 200)},
		{ExecutionID: "1", TransactionID: "t", Payload: strings.Repeat("<", 500)},
		{ExecutionID: "1", TransactionID: "t", Payload: strings.Repeat("\u2028", 150)},
	}
	for i, ev := range evs {
		st, err := localseg.Open(t.TempDir(), localseg.Options{SegmentMaxBytes: segMax})
		if err != nil {
			t.Fatal(err)
		}
		_, storeErr := st.Append(ev)
		st.Close()
		_, cmdErr := checkEvent(ev, segMax)
		if (storeErr == nil) != (cmdErr == nil) {
			t.Errorf("event %d: store %v, command %v", i, storeErr, cmdErr)
		}
		if cmdErr != nil && bucketlog.Class(cmdErr) != bucketlog.Class(storeErr) {
			t.Errorf("event %d: classes %s and %s", i, bucketlog.Class(cmdErr), bucketlog.Class(storeErr))
		}
	}
}

// TestFailWith: a report keeps its fields and order, gains error and
// class, and owner_shard appears once.
func TestFailWith(t *testing.T) {
	var out, errb bytes.Buffer
	c := &cli{ctx: context.Background(), stdout: &out, stderr: &errb, name: "x"}
	code := c.failWith(struct {
		A uint64 `json:"a"`
		B string `json:"b"`
	}{1<<63 + 5, "<&>"}, &affinity.NotOwnerError{Owner: 3, Shard: 1, ExecutionID: "9"})
	if code != 6 {
		t.Fatalf("code %d", code)
	}
	want := `{"a":9223372036854775813,"b":"<&>","error":"affinity: execution \"9\" belongs to shard 3, this replica owns shard 1","class":"not_owner","owner_shard":3}` + "\n"
	if out.String() != want {
		t.Fatalf("got  %s\nwant %s", out.String(), want)
	}
	if strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("stderr %q", errb.String())
	}
	out.Reset()
	c.failWith(struct {
		OwnerShard int `json:"owner_shard"`
	}{3}, &affinity.NotOwnerError{Owner: 3})
	if strings.Count(out.String(), "owner_shard") != 1 {
		t.Fatalf("owner_shard twice: %s", out.String())
	}
	out.Reset()
	c.fail(errors.New("multi\nline"))
	if !strings.Contains(out.String(), `"error":"multi; line","class":"storage"`) {
		t.Fatalf("%s", out.String())
	}
}
