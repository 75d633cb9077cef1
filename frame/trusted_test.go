package frame

import (
	"strings"
	"testing"
)

// TestParseBodyTrustedAgrees: on every canonical body (escaped or not, in
// any field) the trusted parse locates exactly what the validating parse
// finds, including the payload it takes to run to the closing literal.
func TestParseBodyTrustedAgrees(t *testing.T) {
	payloads := []string{"", "x", strings.Repeat("p", 300), `a"b`, `back\slash`, "tab\there", "\x01\x1f", "é ☃ 😀", `ends with quote"`, `"`, `\`, `","payload":"`}
	ids := []string{"e", "exec-00001", `q"uote`, `b\s`}
	for _, exec := range ids {
		for _, txn := range ids {
			for _, pl := range payloads {
				frame := AppendEvent(nil, 1234567, exec, txn, pl)
				body := frame[HeaderSize:]
				want, ok := ParseFast(body)
				if !ok {
					t.Fatalf("canonical body refused: %q", body)
				}
				got, ok := ParseTrusted(body)
				if !ok || got != want {
					t.Fatalf("body %q: trusted %+v %v, validating %+v", body, got, ok, want)
				}
				if f := got.Frame(body); f.ExecutionID != exec || f.TransactionID != txn || f.Payload != pl || f.Seq != 1234567 {
					t.Fatalf("body %q decodes to %+v", body, f)
				}
			}
		}
	}
}

// TestParseBodyTrustedRefusesTruncated: a body that lost its closing
// literal, or part of it, is not located by the shortcut (it goes to the
// validating path, which refuses it).
func TestParseBodyTrustedRefusesTruncated(t *testing.T) {
	body := AppendEvent(nil, 7, "e", "t", "payload")[HeaderSize:]
	for n := len(body) - 1; n > len(body)-8; n-- {
		if v, ok := ParseTrusted(body[:n]); ok {
			t.Fatalf("truncated body %q located as %+v", body[:n], v)
		}
	}
}
