package blobtier

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
)

// CHECKLIST §3.1: segment keys are always 40 characters, fixed width,
// lowercase hex.
func TestSegmentKeyFixedWidthLowercaseHex(t *testing.T) {
	shape := regexp.MustCompile(`^noetl\.ehdb\.seg\.[0-9a-f]{8}\.[0-9a-f]{16}$`)
	for _, c := range []struct {
		shard uint32
		id    uint64
	}{{0, 0}, {0, 1}, {1, 2}, {0xabcdef, 0xfedcba}, {math.MaxUint32, math.MaxUint64}, {7, 1 << 40}} {
		k := SegmentKey(c.shard, c.id)
		if len(k) != 40 || SegmentKeyLen != 40 {
			t.Errorf("SegmentKey(%d, %d) = %q: %d characters, want 40", c.shard, c.id, k, len(k))
		}
		if !shape.MatchString(k) {
			t.Errorf("SegmentKey(%d, %d) = %q: not fixed-width lowercase hex", c.shard, c.id, k)
		}
		p, err := ParseKey(k)
		if err != nil || p != (Key{Kind: KindSegment, Shard: c.shard, Segment: c.id}) {
			t.Errorf("ParseKey(%q) = %+v, %v", k, p, err)
		}
	}
	if got, want := SegmentKey(1, 0x1f), "noetl.ehdb.seg.00000001.000000000000001f"; got != want {
		t.Errorf("SegmentKey(1, 0x1f) = %q, want %q", got, want)
	}
}

func TestKeyBuildersAndParseRoundTrip(t *testing.T) {
	for _, c := range []struct {
		key  string
		want Key
	}{
		{TailKey(3, 10, 20), Key{Kind: KindTail, Shard: 3, FirstSeq: 10, LastSeq: 20}},
		{TailKey(3, 5, 5), Key{Kind: KindTail, Shard: 3, FirstSeq: 5, LastSeq: 5}},
		{WatermarkKey(0xff), Key{Kind: KindWatermark, Shard: 0xff}},
		{CursorKey(2), Key{Kind: KindCursor, Shard: 2}},
		{SegmentKey(9, 77), Key{Kind: KindSegment, Shard: 9, Segment: 77}},
		{ClaimKey(3, 7), Key{Kind: KindClaim, Shard: 3, Epoch: 7}},
		{StartKey(3, 7), Key{Kind: KindStart, Shard: 3, Epoch: 7}},
	} {
		got, err := ParseKey(c.key)
		if err != nil || got != c.want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", c.key, got, err, c.want)
		}
		if got.String() != c.key {
			t.Errorf("Key.String() = %q, want %q", got.String(), c.key)
		}
	}
	for _, c := range []struct{ got, want string }{
		{TailKey(1, 2, 3), "noetl.ehdb.tail.00000001.0000000000000002.0000000000000003"},
		{WatermarkKey(1), "noetl.ehdb.rw.00000001"},
		{CursorKey(1), "noetl.ehdb.cur.00000001"},
		{ListPrefix(1, KindSegment), "noetl.ehdb.seg.00000001."},
		{ListPrefix(1, KindTail), "noetl.ehdb.tail.00000001."},
		{ListPrefix(1, KindWatermark), "noetl.ehdb.rw.00000001"},
		{ListPrefix(1, KindCursor), "noetl.ehdb.cur.00000001"},
		{ClaimKey(3, 7), "noetl.ehdb.ep.00000003.0000000000000007"},
		{StartKey(3, 7), "noetl.ehdb.eps.00000003.0000000000000007"},
		{ListPrefix(3, KindClaim), "noetl.ehdb.ep.00000003."},
		{ListPrefix(3, KindStart), "noetl.ehdb.eps.00000003."},
		{ListPrefix(1, Kind(9)), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseKeyIsStrict(t *testing.T) {
	good := SegmentKey(1, 2)
	for name, key := range map[string]string{
		"empty":              "",
		"other root":         strings.Replace(good, "noetl.ehdb.", "noetl.xhdb.", 1),
		"uppercase hex":      "noetl.ehdb.seg.0000000A.0000000000000002",
		"uppercase kind":     "noetl.ehdb.SEG.00000001.0000000000000002",
		"short shard":        "noetl.ehdb.seg.0000001.0000000000000002",
		"long shard":         "noetl.ehdb.seg.000000001.0000000000000002",
		"short id":           "noetl.ehdb.seg.00000001.000000000000002",
		"long id":            "noetl.ehdb.seg.00000001.00000000000000002",
		"extra part":         good + ".x",
		"trailing dot":       good + ".",
		"missing id":         "noetl.ehdb.seg.00000001",
		"not hex":            "noetl.ehdb.seg.00000001.000000000000000g",
		"sign":               "noetl.ehdb.seg.00000001.+000000000000002",
		"space":              "noetl.ehdb.seg.00000001. 000000000000002",
		"unknown kind":       "noetl.ehdb.snap.00000001.0000000000000002",
		"tail first > last":  TailKey(1, 6, 5),
		"tail missing last":  "noetl.ehdb.tail.00000001.0000000000000005",
		"tail extra":         TailKey(1, 1, 2) + ".0000000000000003",
		"watermark extra":    WatermarkKey(1) + ".0000000000000001",
		"watermark short":    "noetl.ehdb.rw.1",
		"cursor uppercase":   "noetl.ehdb.cur.0000000F",
		"prefix only":        "noetl.ehdb.",
		"claim epoch 0":      "noetl.ehdb.ep.00000001.0000000000000000",
		"claim short epoch":  "noetl.ehdb.ep.00000001.01",
		"start missing":      "noetl.ehdb.eps.00000001",
		"start extra":        StartKey(1, 2) + ".0000000000000003",
		"prefixed by folder": "logs/" + good,
	} {
		if k, err := ParseKey(key); !errors.Is(err, ErrBadKey) {
			t.Errorf("%s: ParseKey(%q) = %+v, %v; want ErrBadKey", name, key, k, err)
		}
	}
}

// FuzzParseKey: whatever a bucket lists, ParseKey never panics, and a key it
// accepts is exactly the key its builder makes (one spelling per key).
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{SegmentKey(1, 2), TailKey(3, 4, 5), WatermarkKey(6), CursorKey(7), ClaimKey(8, 9), StartKey(8, 9), "noetl.ehdb.seg.", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("ParseKey(%q) error %v does not wrap ErrBadKey", s, err)
			}
			return
		}
		if k.String() != s {
			t.Fatalf("ParseKey(%q) = %+v, which rebuilds as %q", s, k, k.String())
		}
	})
}

func TestDigestIsXXH64Seed0(t *testing.T) {
	// Reference values of XXH64 with seed 0.
	if got := Digest(nil); got != 0xef46db3751d8e999 {
		t.Errorf("Digest(empty) = %016x", got)
	}
	if got := Digest([]byte("a")); got != 0xd24ec4f1a98c6e5b {
		t.Errorf("Digest(a) = %016x", got)
	}
}

func TestMetaEncodeDecode(t *testing.T) {
	m := MetaOf([]byte("hello"), 0)
	md := m.Encode()
	if md["length"] != "5" || md["xxh64"] != "26c7827d889f6da3" || md["epoch"] != "0000000000000000" {
		t.Fatalf("Encode() = %v", md)
	}
	if got, err := DecodeMeta(md); err != nil || got != m {
		t.Fatalf("DecodeMeta(Encode()) = %+v, %v", got, err)
	}
	delete(md, "epoch")
	if got, err := DecodeMeta(md); err != nil || got.Epoch != 0 {
		t.Fatalf("absent epoch: %+v, %v; want epoch 0", got, err)
	}
	for name, md := range map[string]map[string]string{
		"no length":         {"xxh64": "26c7827d889f6da3"},
		"no xxh64":          {"length": "5"},
		"nothing":           nil,
		"negative length":   {"length": "-5", "xxh64": "26c7827d889f6da3"},
		"signed length":     {"length": "+5", "xxh64": "26c7827d889f6da3"},
		"hex length":        {"length": "0x5", "xxh64": "26c7827d889f6da3"},
		"uppercase xxh64":   {"length": "5", "xxh64": "26C7827D889F6DA3"},
		"short xxh64":       {"length": "5", "xxh64": "26c7827d889f6da"},
		"malformed epoch":   {"length": "5", "xxh64": "26c7827d889f6da3", "epoch": "1"},
		"huge length":       {"length": "99999999999999999999", "xxh64": "26c7827d889f6da3"},
		"capitalised keys":  {"Length": "5", "XXH64": "26c7827d889f6da3"},
		"empty length":      {"length": "", "xxh64": "26c7827d889f6da3"},
		"spaces in length":  {"length": " 5", "xxh64": "26c7827d889f6da3"},
		"xxh64 with prefix": {"length": "5", "xxh64": "0x26c7827d889f6d"},
		"leading zero":      {"length": "05", "xxh64": "26c7827d889f6da3"},
	} {
		if got, err := DecodeMeta(md); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeMeta = %+v, %v; want ErrCorrupt", name, got, err)
		}
	}
}

func TestVerify(t *testing.T) {
	data := []byte("0123456789")
	m := MetaOf(data, 0)
	if err := verify(data, m); err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), data...)
	flipped[4] ^= 0x01
	for name, got := range map[string][]byte{
		"short":   data[:9],
		"long":    append(append([]byte(nil), data...), 'x'),
		"flipped": flipped,
		"empty":   nil,
	} {
		if err := verify(got, m); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: verify = %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecodeMeta: metadata comes from the bucket; DecodeMeta never panics,
// and metadata it accepts has exactly one spelling (Encode gives it back).
func FuzzDecodeMeta(f *testing.F) {
	f.Add("5", "26c7827d889f6da3", "0000000000000000", true)
	f.Add("0", "ef46db3751d8e999", "", false)
	f.Add("-1", "x", "1", true)
	f.Fuzz(func(t *testing.T, length, xxh, epoch string, withEpoch bool) {
		md := map[string]string{"length": length, "xxh64": xxh}
		if withEpoch {
			md["epoch"] = epoch
		}
		m, err := DecodeMeta(md)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeMeta(%v) error %v does not wrap ErrCorrupt", md, err)
			}
			return
		}
		enc := m.Encode()
		if !withEpoch {
			delete(enc, "epoch")
		}
		for k, v := range md {
			if enc[k] != v {
				t.Fatalf("DecodeMeta(%v) = %+v, which encodes %s as %q", md, m, k, enc[k])
			}
		}
	})
}
