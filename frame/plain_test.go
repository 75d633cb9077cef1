package frame

import (
	"strings"
	"testing"
)

// TestParseEventPlainAgrees: on every canonical event body without escapes
// the layout-only parse locates exactly what the validating parse finds.
func TestParseEventPlainAgrees(t *testing.T) {
	for _, pl := range []string{"", "x", strings.Repeat("p", 300), "é ☃ 😀", "<>&'"} {
		for _, seq := range []uint64{1, 9, 10, 1 << 40} {
			body := AppendEvent(nil, seq, "exec-1", "txn_2", pl)[HeaderSize:]
			want, ok := ParseFast(body)
			if !ok {
				t.Fatalf("canonical body refused: %q", body)
			}
			var got View
			ok = ParseEventPlain(body, &got)
			if !ok || got != want {
				t.Fatalf("body %q: plain %+v %v, validating %+v", body, got, ok, want)
			}
		}
	}
	body := AppendConsumer(nil, KindAck, "c", 3)[HeaderSize:]
	if ParseEventPlain(body, new(View)) {
		t.Fatalf("an Ack body parsed as a plain event")
	}
}
