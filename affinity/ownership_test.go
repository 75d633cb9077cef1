package affinity

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestParseOwnership: both unset is 0 of 1; every partial or invalid pair
// is a configuration error naming the problem (CHECKLIST §2.1, §2.3).
func TestParseOwnership(t *testing.T) {
	ok := []struct {
		index, count string
		want         Ownership
	}{
		{"", "", Ownership{0, 1}},
		{"  ", "\t", Ownership{0, 1}},
		{"0", "1", Ownership{0, 1}},
		{"3", "4", Ownership{3, 4}},
		{" 1 ", " 2 ", Ownership{1, 2}},
		{"0", "10000", Ownership{0, 10000}},
	}
	for _, c := range ok {
		got, err := ParseOwnership(c.index, c.count)
		if err != nil || got != c.want {
			t.Errorf("ParseOwnership(%q, %q) = %v, %v; want %v", c.index, c.count, got, err, c.want)
		}
	}
	bad := []struct {
		name, index, count, reason string
	}{
		{"index only", "1", "", "shard count is not"},
		{"count only", "", "4", "shard index is not"},
		{"index equals count", "2", "2", "below the shard count"},
		{"index above count", "5", "2", "below the shard count"},
		{"count zero", "0", "0", "at least 1"},
		{"negative count", "0", "-2", "at least 1"},
		{"negative index", "-1", "2", "not be negative"},
		{"index not a number", "one", "2", "not a decimal integer"},
		{"count not a number", "0", "2x", "not a decimal integer"},
		{"hex", "0x1", "4", "not a decimal integer"},
		{"plus sign", "+1", "4", "not a decimal integer"},
		{"float", "1.0", "4", "not a decimal integer"},
		{"huge", "0", "99999999999999999999999", "out of range"},
		{"count too large", "0", "10001", "at most 10000"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseOwnership(c.index, c.count)
			if err == nil {
				t.Fatalf("ParseOwnership(%q, %q) = %v, want an error", c.index, c.count, got)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v is not ErrConfig", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Index != c.index || ce.Count != c.count {
				t.Errorf("error %#v does not carry the raw pair", err)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q does not say %q", err, c.reason)
			}
			if got != (Ownership{}) {
				t.Errorf("a refused pair returned %v, want the zero Ownership (no fallback to shard 0 of 1)", got)
			}
		})
	}
}

func TestOwnershipFromEnv(t *testing.T) {
	t.Setenv(EnvShardIndex, "1")
	t.Setenv(EnvShardCount, "3")
	if o, err := OwnershipFromEnv(); err != nil || o != (Ownership{1, 3}) {
		t.Fatalf("OwnershipFromEnv = %v, %v", o, err)
	}
	t.Setenv(EnvShardCount, "")
	if _, err := OwnershipFromEnv(); !errors.Is(err, ErrConfig) {
		t.Fatalf("a partial env pair gave %v, want ErrConfig", err)
	}
}

// TestSingleOwnerOwnsEverything (CHECKLIST §2.1).
func TestSingleOwnerOwnsEverything(t *testing.T) {
	o, err := ParseOwnership("", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		id := strconv.Itoa(i*104729 - 5000)
		if i%2 == 0 {
			id = "exec-" + id
		}
		if !o.Owns(id) || o.OwnerOf(id) != 0 || o.Decide(id) != DecisionOwned {
			t.Fatalf("single owner does not own %q", id)
		}
	}
}

// TestExactlyOneOwner: with n replicas every execution has exactly one
// owner, the one ShardFor names (CHECKLIST §2.3).
func TestExactlyOneOwner(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8} {
		for i := range 300 {
			id := strconv.Itoa(320816801799737344 + i*4099)
			owners := 0
			for idx := range n {
				o := Ownership{Index: idx, Count: n}
				if o.Owns(id) {
					owners++
					if o.Decide(id) != DecisionOwned {
						t.Fatalf("Decide disagrees with Owns")
					}
				} else if o.Decide(id) != DecisionNotOwner {
					t.Fatalf("Decide disagrees with Owns")
				}
				if o.OwnerOf(id) != ShardFor(id, n) {
					t.Fatalf("OwnerOf differs from ShardFor")
				}
			}
			if owners != 1 {
				t.Fatalf("execution %s has %d owners among %d replicas", id, owners, n)
			}
		}
	}
}

func TestOwnershipValidate(t *testing.T) {
	for _, o := range []Ownership{{0, 0}, {-1, 2}, {2, 2}, {0, MaxShardCount + 1}, {}} {
		if err := o.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%v) = %v, want ErrConfig", o, err)
		}
	}
	if err := (Ownership{1, 2}).Validate(); err != nil {
		t.Errorf("Validate(1 of 2) = %v", err)
	}
}

// TestDecisionLabels pins the label strings: they are part of the JSON and
// metrics contract (CHECKLIST §2.8).
func TestDecisionLabels(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{DecisionOwned, "owned"},
		{DecisionNotOwner, "not_owner"},
		{ServedByOwnerResident, "owner_resident"},
		{ServedByNonOwnerColdLoad, "non_owner_cold_load"},
	} {
		if got, want := c.got, c.want; got != want {
			t.Errorf("label %q, want %q", got, want)
		}
	}
}
