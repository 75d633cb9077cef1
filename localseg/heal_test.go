package localseg_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// copies is a Healer over saved segment bytes (the bucket's copies).
type copies struct {
	data  map[uint64][]byte
	calls atomic.Int64
}

func (c *copies) HealCopy(_ context.Context, id uint64) ([]byte, error) {
	c.calls.Add(1)
	b, ok := c.data[id]
	if !ok {
		return nil, errors.New("not durable in the bucket")
	}
	return slices.Clone(b), nil
}

// healFixture writes a store of several sealed segments and returns its
// records and the bytes of its second segment file.
func healFixture(t *testing.T, dir string) ([]localseg.Record, string, []byte) {
	t.Helper()
	s := openT(t, dir, small)
	appendMany(t, s, 60, 3)
	want := scanAll(t, s)
	closeT(t, s)
	seg := segFiles(t, dir)[1]
	good, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	return want, seg, good
}

func flip(t *testing.T, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sameRecs(t *testing.T, what string, got, want []localseg.Record) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %d records differ from the %d written", what, len(got), len(want))
	}
}

// A flipped byte in a sealed segment whose bucket copy verifies against
// its index file: the first read heals it (the file becomes the sealed
// bytes again) and every read answers byte for byte — after a reopen (the
// index built at the first read) and while the store runs (the index built
// before the damage).
func TestHealDamagedSegmentFromVerifiedCopy(t *testing.T) {
	for _, when := range []string{"at the first read", "after the index was built"} {
		t.Run(when, func(t *testing.T) {
			dir := t.TempDir()
			want, seg, good := healFixture(t, dir)
			s := openT(t, dir, small)
			defer s.Close()
			src := &copies{data: map[uint64][]byte{2: good}}
			s.SetHealer(src)
			if when == "after the index was built" {
				sameRecs(t, "before the damage", scanAll(t, s), want)
			}
			flip(t, seg, len(good)/2)
			sameRecs(t, "scan", scanAll(t, s), want)
			for _, x := range []string{"e0", "e1", "e2"} {
				p, err := s.ReadExecution(x, 0, 1000)
				if err != nil {
					t.Fatalf("read execution %s: %v", x, err)
				}
				var w []localseg.Record
				for _, r := range want {
					if r.ExecutionID == x {
						w = append(w, r)
					}
				}
				sameRecs(t, "execution "+x, p.Records, w)
			}
			var pulled []localseg.Record
			for {
				p, err := s.Pull("c", 9)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Records) == 0 {
					break
				}
				pulled = append(pulled, p.Records...)
				if _, err := s.Ack("c", p.Records[len(p.Records)-1].Seq); err != nil {
					t.Fatal(err)
				}
			}
			sameRecs(t, "pulls", pulled, want)
			if st := s.HealStats(); st.Healed != 1 || st.Damaged != 0 {
				t.Fatalf("heal stats %+v, want one segment healed", st)
			}
			if got, _ := os.ReadFile(seg); !bytes.Equal(got, good) {
				t.Fatal("the segment file is not the sealed bytes after healing")
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "*.heal.tmp")); len(m) != 0 {
				t.Fatalf("temporaries left: %v", m)
			}
		})
	}
}

// The bucket's copy is damaged too (or the segment is not durable there):
// nothing is replaced, the segment is reported damaged, reads away from its
// damaged frame answer, a read through it fails as corruption naming it,
// and no read fetches the copy again. RED control: healing from a copy
// without checking it replaces the file with the damaged copy.
func TestHealRefusesACopyThatDoesNotVerify(t *testing.T) {
	for _, tc := range []string{"copy damaged", "foreign copy", "not durable", "RED: unverified copy"} {
		t.Run(tc, func(t *testing.T) {
			dir := t.TempDir()
			want, seg, good := healFixture(t, dir)
			flip(t, seg, len(good)/2)
			damaged, _ := os.ReadFile(seg)
			bad := slices.Clone(good)
			bad[len(bad)-3] ^= 0x01
			src := &copies{data: map[uint64][]byte{2: bad}}
			if tc == "foreign copy" {
				// Every frame valid, the same length and sequences: another
				// history's segment, which only the recorded xxh64 tells.
				src.data[2] = foreignCopy(t, good)
			}
			if tc == "not durable" {
				src.data = nil
			}
			if tc == "RED: unverified copy" {
				defer localseg.SetUnsafeHealUnverified()()
			}
			s := openT(t, dir, small)
			defer s.Close()
			s.SetHealer(src)
			_, err := s.Scan(0, 1000)
			got, _ := os.ReadFile(seg)
			if tc == "RED: unverified copy" {
				if !bytes.Equal(got, bad) {
					t.Fatal("RED control: the unverified copy was not installed; the check is not what refuses it")
				}
				return
			}
			var ce *localseg.CorruptionError
			if !errors.As(err, &ce) || ce.Segment != 2 {
				t.Fatalf("a scan through the damaged segment: %v, want corruption in segment 2", err)
			}
			if !bytes.Equal(got, damaged) {
				t.Fatal("the damaged segment file was replaced by a copy that does not verify")
			}
			if d := s.Damaged(); len(d) != 1 || d[0].ID != 2 {
				t.Fatalf("damaged %v, want segment 2", d)
			}
			if st := s.HealStats(); st.Healed != 0 || st.Damaged != 1 || st.Failures != 1 {
				t.Fatalf("heal stats %+v", st)
			}
			// Reads that need no damaged frame answer: the last
			// segments, and an execution's events after the damage.
			last := want[len(want)-10:]
			p, err := s.Scan(last[0].Seq-1, 100)
			if err != nil {
				t.Fatalf("a scan past the damaged segment: %v", err)
			}
			sameRecs(t, "scan past", p.Records, last)
			first := want[:3]
			if p, err = s.Scan(0, 3); err != nil {
				t.Fatalf("a scan before the damaged segment: %v", err)
			}
			sameRecs(t, "scan before", p.Records, first)
			x := last[0].ExecutionID
			var w []localseg.Record
			for _, r := range last {
				if r.ExecutionID == x {
					w = append(w, r)
				}
			}
			if p, err = s.ReadExecution(x, last[0].Seq-1, 100); err != nil {
				t.Fatalf("an execution read past the damaged segment: %v", err)
			}
			sameRecs(t, "execution past", p.Records, w)
			calls := src.calls.Load()
			for range 3 {
				s.Scan(0, 1000)
			}
			if src.calls.Load() != calls {
				t.Fatal("reads fetch the copy of a segment known damaged again")
			}
			// The maintenance pass tries again; with a good copy it heals.
			src.data = map[uint64][]byte{2: good}
			if n := s.HealDamaged(); n != 1 {
				t.Fatalf("HealDamaged healed %d", n)
			}
			sameRecs(t, "after healing", scanAll(t, s), want)
		})
	}
}

// foreignCopy re-encodes every frame of seg with one payload byte changed:
// valid frames, the same length and sequences, other bytes.
func foreignCopy(t *testing.T, seg []byte) []byte {
	t.Helper()
	var out []byte
	changed := false
	for o := 0; o < len(seg); {
		f, n, err := localseg.DecodeFrame(seg[o:])
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind == localseg.KindEvent && !changed && len(f.Payload) > 0 {
			p := []byte(f.Payload)
			p[0] ^= 0x01
			f.Payload, changed = string(p), true
		}
		if out, err = localseg.EncodeFrame(out, &f); err != nil {
			t.Fatal(err)
		}
		o += n
	}
	if !changed || len(out) != len(seg) {
		t.Fatalf("foreign copy: changed=%v, %d bytes for %d", changed, len(out), len(seg))
	}
	return out
}

// Healing is crash-safe and checks before it acts: the copy goes to a
// temporary that is fsynced before the rename over the damaged file. A
// failure of any step leaves the file damaged or healed — never anything
// else — and no temporary behind; once the disk answers, a read heals it.
func TestHealFailingStepsReplaceNothingHalfway(t *testing.T) {
	for _, op := range []string{"create", "write", "sync", "rename", "syncdir", "none"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			want, seg, good := healFixture(t, dir)
			flip(t, seg, len(good)/2)
			damaged, _ := os.ReadFile(seg)
			h := newHookFS()
			o := small
			o.FS = h
			s := openT(t, dir, o)
			defer s.Close()
			s.SetHealer(&copies{data: map[uint64][]byte{2: good}})
			healing := func(o, name string) bool {
				return o == op && (strings.HasSuffix(name, ".heal.tmp") || o == "rename" || o == "syncdir")
			}
			h.mu.Lock()
			h.log = nil
			h.fail = func(o, name string) error {
				if healing(o, name) {
					return errors.New("injected")
				}
				return nil
			}
			h.mu.Unlock()
			_, err := s.Scan(0, 1000)
			got, _ := os.ReadFile(seg)
			if !bytes.Equal(got, damaged) && !bytes.Equal(got, good) {
				t.Fatal("the segment file is neither the damaged nor the sealed bytes")
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "*.heal.tmp")); len(m) != 0 {
				t.Fatalf("temporaries left: %v", m)
			}
			if op == "none" || op == "syncdir" {
				if err != nil || !bytes.Equal(got, good) {
					t.Fatalf("with %s failing: read %v, healed %v", op, err, bytes.Equal(got, good))
				}
				h.mu.Lock()
				synced, renamed := -1, -1
				for i, l := range h.log {
					if l == "sync "+filepath.Base(seg)+".heal.tmp" {
						synced = i
					}
					if l == "rename "+filepath.Base(seg) {
						renamed = i
					}
				}
				h.mu.Unlock()
				if synced < 0 || renamed < synced {
					t.Fatalf("the temporary was not fsynced before the rename: %v", h.log)
				}
			} else if err == nil || bytes.Equal(got, good) {
				t.Fatalf("with %s failing the heal succeeded (%v)", op, err)
			}
			h.mu.Lock()
			h.fail = nil
			h.mu.Unlock()
			sameRecs(t, "once the disk answers", scanAll(t, s), want)
			if got, _ := os.ReadFile(seg); !bytes.Equal(got, good) {
				t.Fatal("not healed once the disk answers")
			}
		})
	}
}
