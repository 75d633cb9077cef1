//go:build localseg_unsafe_knob

package localseg_test

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// TestPoisonRedControl is the RED control of the poison rule (CHECKLIST
// §1.20): with the store's unsafe knob set, a failed fsync is retried and the
// append acknowledged; Linux dropped the dirty pages, the retry reports
// success, and after a crash the acknowledged event is gone. With the
// default (poison) the append fails and nothing acknowledged is lost.
func TestPoisonRedControl(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsafe-retry=%v", unsafe), func(t *testing.T) {
			mem := newMachine(t)
			fail := faultfs.NewToggle(faultfs.OnIndex(0, faultfs.EIO, faultfs.And(
				faultfs.Kinds(faultfs.OpSync), faultfs.PathContains("seg-"))), false)
			w := workload{opts: localseg.Options{SegmentMaxBytes: 1 << 20}}
			s, err := localseg.Open(crashDir, w.options(faultfs.Wrap(mem, fail)))
			if err != nil {
				t.Fatal(err)
			}
			if unsafe {
				localseg.SetUnsafeRetryFsyncForTest(s)
			}
			h := newHistory()
			for i := range 5 {
				if err := h.appendEvents(s, 0, i, []localseg.Event{probeEvent(fmt.Sprint("before-", i))}); err != nil {
					t.Fatal(err)
				}
			}
			fail.On()
			victim := probeEvent("victim " + strings.Repeat("x", 2*faultfs.SectorSize))
			err = h.appendEvents(s, 0, 5, []localseg.Event{victim})
			switch {
			case unsafe && err != nil:
				t.Fatalf("with the unsafe retry the append failed: %v (the knob does nothing)", err)
			case !unsafe && !errors.Is(err, syscall.EIO) && !errors.Is(err, localseg.ErrPoisoned):
				t.Fatalf("append whose fsync failed: %v, want the EIO or ErrPoisoned", err)
			}
			next := h.appendEvents(s, 0, 6, []localseg.Event{probeEvent("after")})
			if !unsafe && !errors.Is(next, localseg.ErrPoisoned) {
				t.Fatalf("append after a failed fsync: %v, want ErrPoisoned", next)
			}
			s.Close()

			clone := mem.CrashClone(faultfs.CrashOptions{})
			s2, err := localseg.Open(crashDir, w.options(clone))
			if err != nil {
				t.Fatalf("reopen after the crash: %v", err)
			}
			defer s2.Close()
			st, err := readState(s2)
			if err != nil {
				t.Fatal(err)
			}
			lossErr := checkAgainst(s2, st, h)
			if unsafe {
				// RED: the acknowledged victim is gone.
				if lossErr == nil || !strings.Contains(lossErr.Error(), "LOSS") {
					t.Fatalf("with the unsafe retry no acknowledged event was lost (%v): the control shows nothing", lossErr)
				}
				for _, r := range st.records {
					if r.Payload == victim.Payload {
						t.Fatal("the victim survived the crash although its pages were dropped")
					}
				}
				t.Logf("RED as expected: %v", lossErr)
				return
			}
			if lossErr != nil {
				t.Fatalf("with poisoning: %v", lossErr)
			}
		})
	}
}
