package localseg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// Fuzz targets for every parser of bytes that come from disk or a bucket.
// Seed corpora are under testdata/fuzz/<target>/.

func FuzzReplaySegment(f *testing.F) {
	var img []byte
	img, _ = EncodeFrame(img, &Frame{Kind: KindConsumerCreate, Consumer: "c"})
	for seq := uint64(1); seq <= 3; seq++ {
		img, _ = EncodeFrame(img, &Frame{Kind: KindEvent, Seq: seq, ExecutionID: "e", TransactionID: "t", Payload: "p"})
	}
	img, _ = EncodeFrame(img, &Frame{Kind: KindAck, Consumer: "c", Seq: 2})
	f.Add(img, uint64(1))
	f.Add(append(img, make([]byte, 600)...), uint64(0))
	f.Add(img[:len(img)-7], uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, firstSeq uint64) {
		sum, err := VerifySegment(7, data, firstSeq)
		var ce *CorruptionError
		if err != nil && (!errors.As(err, &ce) || ce.Segment != 7 || !errors.Is(err, ErrCorrupt)) {
			t.Fatalf("error %v is not a CorruptionError of segment 7", err)
		}
		frames := 0
		for _, err := range Frames(data) {
			if err != nil {
				break
			}
			frames++
		}
		if err == nil && frames != sum.Frames {
			t.Fatalf("Frames saw %d frames, VerifySegment %d", frames, sum.Frames)
		}
		// Recovery over the same bytes as the highest segment: never a
		// panic; a valid image replays to its end; a torn tail ends at a
		// frame boundary the strict walk accepts.
		start := uint64(0)
		if firstSeq > 0 {
			start = firstSeq - 1
		}
		r := &replay{tip: start, cons: map[string]uint64{}, idx: newIndex()}
		end, terr := r.walkTail(7, data, 0, -1)
		if err == nil && sum.Events > 0 && firstSeq > 0 && (terr != nil || end != int64(len(data))) {
			t.Fatalf("a valid image: walkTail ended at %d of %d: %v", end, len(data), terr)
		}
		if terr == nil {
			r2 := &replay{tip: start, cons: map[string]uint64{}}
			if err := r2.walkStrict(7, data[:end], 0); err != nil || r2.tip != r.tip || !maps.Equal(r2.cons, r.cons) {
				t.Fatalf("the kept prefix [0,%d) does not replay strictly: %v", end, err)
			}
		}
	})
}

func FuzzCheckpoint(f *testing.F) {
	c := checkpoint{EventCount: 42, ActiveSegmentID: 3, ActiveLen: 1234, Consumers: map[string]uint64{"a": 40, "b": 0}}
	f.Add(c.encode())
	f.Add([]byte(`{"event_count":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseCheckpoint(data)
		if err != nil {
			return
		}
		c2, err := parseCheckpoint(c.encode())
		if err != nil || c2.EventCount != c.EventCount || c2.ActiveSegmentID != c.ActiveSegmentID || c2.ActiveLen != c.ActiveLen || !maps.Equal(c2.Consumers, c.Consumers) {
			t.Fatalf("round trip of %+v: %+v %v", c, c2, err)
		}
	})
}

func FuzzReclaimManifest(f *testing.F) {
	f.Add(ReclaimManifest{ReclaimedThroughSeq: 10, ReclaimedThroughSegment: 2}.encode())
	f.Add([]byte(`{"reclaimed_through_seq":1e3,"reclaimed_through_segment":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseReclaimManifest(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if m2, err := parseReclaimManifest(m.encode()); err != nil || m2 != m {
			t.Fatalf("round trip of %+v: %+v %v", m, m2, err)
		}
	})
}

// FuzzSegmentIndexFile: an index file is read from disk, so any bytes must
// decode to an error or to a piece that encodes back to the same bytes (it
// says nothing the encoder could not have said), and never panic.
func FuzzSegmentIndexFile(f *testing.F) {
	b := newSegIdxBuilder(7)
	buf := make([]byte, 0, 1024)
	var items []item
	add := func(kind FrameKind, seq uint64, name string, fr Frame) {
		start := len(buf)
		buf, _ = EncodeFrame(buf, &fr)
		items = append(items, item{start: start, end: len(buf), kind: kind, seq: seq, name: name, off: int64(start)})
	}
	add(KindEvent, 41, "exec-1", Frame{Kind: KindEvent, Seq: 41, ExecutionID: "exec-1", TransactionID: "t", Payload: "p"})
	add(KindAck, 41, "c", Frame{Kind: KindAck, Consumer: "c", Seq: 41})
	add(KindEvent, 42, "exec-2", Frame{Kind: KindEvent, Seq: 42, ExecutionID: "exec-2", TransactionID: "t", Payload: `q"`})
	add(KindConsumerDelete, 0, "c", Frame{Kind: KindConsumerDelete, Consumer: "c"})
	if !b.add(buf, items) {
		f.Fatal("builder refused its own frames")
	}
	size := int64(len(buf))
	f.Add(b.finish(size), size)
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		// The trailer is made to match, so mutations reach the
		// structural checks instead of stopping at the checksum (which
		// is the only check a random file would ever meet).
		if len(data) >= 8 {
			data = bytes.Clone(data)
			binary.LittleEndian.PutUint64(data[len(data)-8:], xxhash.Sum64(data[:len(data)-8]))
		}
		p, digest, err := decodeSegIndex(data, 7, size)
		if err != nil {
			return
		}
		if again := encodeSegIndex(p, size, digest); !bytes.Equal(again, data) {
			t.Fatalf("decoded and re-encoded differently:\n%x\n%x", data, again)
		}
	})
}
