package tailbatch

import (
	"errors"
	"maps"
	"testing"
)

func TestCursorTombstonesEncodeDecode(t *testing.T) {
	c := Cursor{V: 3, ShippedThrough: 9, Consumers: map[string]uint64{"a": 4}, Deleted: map[string]uint64{"z": 12, "b": 9}}
	data, err := EncodeCursor(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":3,"shipped_through":9,"consumers":{"a":4},"deleted":{"b":9,"z":12}}`; string(data) != want {
		t.Fatalf("encoded %s, want %s", data, want)
	}
	got, err := DecodeCursor(data)
	if err != nil || !maps.Equal(got.Deleted, c.Deleted) || !maps.Equal(got.Consumers, c.Consumers) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	// No tombstones: no field, as before.
	data, _ = EncodeCursor(Cursor{V: 1, ShippedThrough: 2})
	if want := `{"v":1,"shipped_through":2,"consumers":{}}`; string(data) != want {
		t.Fatalf("encoded %s, want %s", data, want)
	}
	for _, bad := range []string{
		`{"v":1,"shipped_through":2,"consumers":{"a":1},"deleted":{"a":2}}`,
		`{"v":1,"shipped_through":2,"deleted":{"a":2},"deleted":{"b":2}}`,
		`{"v":1,"shipped_through":2,"deleted":{"a b":2}}`,
		`{"v":1,"shipped_through":2,"deleted":{"a":-1}}`,
	} {
		if _, err := DecodeCursor([]byte(bad)); !errors.Is(err, ErrBadCursor) {
			t.Errorf("DecodeCursor(%s) = %v, want ErrBadCursor", bad, err)
		}
	}
	if _, err := EncodeCursor(Cursor{Consumers: map[string]uint64{"a": 1}, Deleted: map[string]uint64{"a": 1}}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("encoding a consumer both live and deleted: %v", err)
	}
}

func TestTombstonesKeepUntilShippedPassesTheBound(t *testing.T) {
	old := Cursor{ShippedThrough: 5, Consumers: map[string]uint64{"gone": 2, "kept": 1}, Deleted: map[string]uint64{"early": 6, "back": 7}}
	live := map[string]uint64{"kept": 1, "back": 0}
	seen := map[string]uint64{"brief": 8}
	got := tombstones(old, live, seen, 8, 7)
	// gone: new (bound 8); early: 6 < 7 dropped; back: alive again; brief:
	// created and deleted since, at 8.
	if want := map[string]uint64{"gone": 8, "brief": 8}; !maps.Equal(got, want) {
		t.Fatalf("tombstones %v, want %v", got, want)
	}
	// The bound is the store's tip at most, and the latest delete's.
	got = tombstones(Cursor{Deleted: map[string]uint64{"x": 20}}, nil, map[string]uint64{"x": 9}, 12, 3)
	if want := map[string]uint64{"x": 12}; !maps.Equal(got, want) {
		t.Fatalf("tombstones %v, want %v", got, want)
	}
	// Without a tip only the stored tombstones are carried.
	got = tombstones(old, live, seen, noTip, 6)
	if want := map[string]uint64{"early": 6}; !maps.Equal(got, want) {
		t.Fatalf("tombstones without a tip %v, want %v", got, want)
	}
}
