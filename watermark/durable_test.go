package watermark_test

import (
	"context"
	"testing"

	"github.com/bucketlog/bucketlog/watermark"
)

// TestDurableSeqLegacyBody: a body without durable_seq (every rw written
// before it) reads as its seq; one with it round-trips; one below seq
// reads as seq.
func TestDurableSeqLegacyBody(t *testing.T) {
	for _, c := range []struct {
		body string
		want uint64
	}{
		{`{"seq":5,"segment":2,"v":3}`, 5},
		{`{"seq":5,"segment":2,"v":3,"epoch":4}`, 5},
		{`{"seq":5,"segment":2,"v":3,"durable_seq":9}`, 9},
		{`{"seq":5,"segment":2,"v":3,"durable_seq":1}`, 5},
		{`{"seq":0,"segment":0,"v":1,"durable_seq":7}`, 7},
	} {
		m, err := watermark.Decode([]byte(c.body))
		if err != nil || m.Durable() != c.want {
			t.Fatalf("Decode(%s) = %+v (durable %d), %v; want durable %d", c.body, m, m.Durable(), err, c.want)
		}
		back, err := watermark.Decode(m.Encode())
		if err != nil || back != m {
			t.Fatalf("%s: Encode/Decode = %+v, %v; want %+v", c.body, back, err, m)
		}
	}
	if got := string(watermark.Mark{Seq: 5, Segment: 2, V: 3, DurableSeq: 9}.Encode()); got != `{"seq":5,"segment":2,"v":3,"durable_seq":9}` {
		t.Fatalf("Encode = %s", got)
	}
}

// TestDurableSeqNeverBackward: AdvanceDurable writes only upward; GC's
// Advance and the owner's Repair keep it (Repair with the durable end the
// owner knows committed).
func TestDurableSeqNeverBackward(t *testing.T) {
	ctx := context.Background()
	b := &fakeCAS{cas: true}
	m, err := watermark.AdvanceDurable(ctx, b, 3, 10)
	if err != nil || m.Durable() != 10 || b.writes != 1 {
		t.Fatalf("AdvanceDurable(10) on an absent rw = %+v, %v (writes %d)", m, err, b.writes)
	}
	if m, err = watermark.AdvanceDurable(ctx, b, 3, 6); err != nil || m.Durable() != 10 || b.writes != 1 {
		t.Fatalf("AdvanceDurable(6) over 10 = %+v, %v (writes %d): moved backward or wrote", m, err, b.writes)
	}
	if m, err = watermark.Advance(ctx, b, 3, 4, 1); err != nil || m.Seq != 4 || m.Durable() != 10 {
		t.Fatalf("Advance(4) over durable 10 = %+v, %v", m, err)
	}
	if m, _, err = watermark.Read(ctx, b, 3); err != nil || m.Durable() != 10 || m.Seq != 4 {
		t.Fatalf("stored after GC's advance: %+v, %v", m, err)
	}
	if m, err = watermark.Advance(ctx, b, 3, 12, 3); err != nil || m.Durable() != 12 {
		t.Fatalf("Advance(12) = %+v, %v: durable_seq below seq", m, err)
	}
	if m, err = watermark.AdvanceDurable(ctx, b, 3, 20); err != nil || m.Seq != 12 || m.Segment != 3 || m.Durable() != 20 {
		t.Fatalf("AdvanceDurable(20) = %+v, %v: seq or segment not kept", m, err)
	}
	b.data = []byte(`{"seq":`) // damaged at rest
	b.gen++
	if m, err = watermark.Repair(ctx, b, 3, 12, 3, 20); err != nil || m.Durable() != 20 {
		t.Fatalf("Repair with durable 20 = %+v, %v", m, err)
	}
	if m, _, err = watermark.Read(ctx, b, 3); err != nil || m.Durable() != 20 {
		t.Fatalf("stored after the repair: %+v, %v", m, err)
	}
}
