package localseg

import (
	"github.com/bucketlog/bucketlog/frame"

	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidation(t *testing.T) {
	long := strings.Repeat("a", MaxIDLen+1)
	cases := []struct {
		name string
		ev   Event
		ok   bool
	}{
		{"ok", Event{ExecutionID: " e-1_X ", TransactionID: " t ", Payload: "p"}, true},
		{"max id", Event{ExecutionID: long[:MaxIDLen], TransactionID: "t"}, true},
		{"empty exec", Event{ExecutionID: "  ", TransactionID: "t"}, false},
		{"long exec", Event{ExecutionID: long, TransactionID: "t"}, false},
		{"exec charset", Event{ExecutionID: "a b", TransactionID: "t"}, false},
		{"exec unicode", Event{ExecutionID: "é", TransactionID: "t"}, false},
		{"exec slash", Event{ExecutionID: "a/b", TransactionID: "t"}, false},
		{"blank txn", Event{ExecutionID: "e", TransactionID: " \t"}, false},
		{"txn utf8", Event{ExecutionID: "e", TransactionID: "\xff"}, false},
		{"txn long", Event{ExecutionID: "e", TransactionID: strings.Repeat("t", MaxTransactionIDLen+1)}, false},
		{"payload utf8", Event{ExecutionID: "e", TransactionID: "t", Payload: "a\xc3("}, false},
	}
	for _, c := range cases {
		v, err := validateEvent(&c.ev)
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err != nil && !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: %v is not ErrInvalidInput", c.name, err)
		}
		if c.ok {
			if v.exec != strings.TrimSpace(c.ev.ExecutionID) || v.txn != c.ev.TransactionID {
				t.Errorf("%s: stored %q/%q", c.name, v.exec, v.txn)
			}
			b := frame.AppendEvent(nil, 12345, v.exec, v.txn, v.payload)
			if int64(len(b)) != v.frameLen(12345) {
				t.Errorf("%s: frame %d bytes, frameLen %d", c.name, len(b), v.frameLen(12345))
			}
		}
	}
	if !utf8.ValidString(quoteShort(strings.Repeat("é", 100))) {
		t.Error("quoteShort cut a rune")
	}
}

// TestStoreEncodingMatchesEncodeFrame: the store's encoder (which copies a
// string that needs no escaping without scanning it again) writes exactly
// the bytes of EncodeFrame, escapes or not, at sequences of every length.
func TestStoreEncodingMatchesEncodeFrame(t *testing.T) {
	strs := []string{"t", "plain payload", `quote " and \ backslash`, "ctl \x00\x1f\t\n", "<a>&amp; é — 日本 \u2028\u2029", strings.Repeat("x", 5000), strings.Repeat("\"", 100)}
	for _, txn := range strs {
		if len(txn) > MaxTransactionIDLen {
			continue
		}
		for _, payload := range strs {
			for _, seq := range []uint64{1, 9, 10, 123456789, 18446744073709551615} {
				v, err := validateEvent(&Event{ExecutionID: " e-1_Z ", TransactionID: txn, Payload: payload})
				if err != nil {
					t.Fatal(err)
				}
				got := v.appendFrame([]byte("prefix"), seq)
				want, err := EncodeFrame([]byte("prefix"), &Frame{Kind: KindEvent, Seq: seq, ExecutionID: "e-1_Z", TransactionID: txn, Payload: payload})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) || int64(len(got)-len("prefix")) != v.frameLen(seq) {
					t.Fatalf("txn %q payload %q seq %d: the store's frame differs from EncodeFrame's (or from its announced length)", quoteShort(txn), quoteShort(payload), seq)
				}
			}
		}
	}
}
