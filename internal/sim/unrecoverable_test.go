package sim

import "testing"

// TestLostUnrecoverably: the excuse for a short hydrate after an
// unrecoverable disk loss covers only a missing sequence, only once the
// run is unrecoverable, and never a hydrate short of what an intact cursor
// object at rest vouches for (it must have refused) or with a cursor past
// the data.
func TestLostUnrecoverably(t *testing.T) {
	missing := &violation{check: "restore-missing"}
	empty := restored{base: 1, tip: 0, consumers: map[string]uint64{}}
	for _, tc := range []struct {
		name          string
		unrecoverable bool
		v             *violation
		got           restored
		vouched       uint64
		want          bool
	}{
		{"seed 311754: nothing vouched for", true, missing, empty, 0, true},
		{"recoverable", false, missing, empty, 0, false},
		{"another check", true, &violation{check: "restore-serve"}, empty, 0, false},
		{"short of the cursor object", true, missing, restored{base: 1, tip: 4}, 5, false},
		{"at the cursor object", true, missing, restored{base: 1, tip: 5}, 5, true},
		{"a cursor past the data", true, missing, restored{base: 1, tip: 5, consumers: map[string]uint64{"c": 6}}, 0, false},
	} {
		r := &run{m: newModel(), unrecoverable: tc.unrecoverable}
		if got := r.lostUnrecoverably(tc.v, tc.got, tc.vouched); got != tc.want {
			t.Errorf("%s: excused %v, want %v", tc.name, got, tc.want)
		}
	}
}
