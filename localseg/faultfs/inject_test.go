package faultfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

func TestOnIndexFailsExactlyTheNthMatchingOp(t *testing.T) {
	m := faultfs.NewMemFS()
	inj := faultfs.OnIndex(2, faultfs.ENOSPC, faultfs.And(faultfs.Kinds(faultfs.OpWrite), faultfs.PathContains("seg-")))
	fsys := faultfs.Wrap(m, inj)
	seg := mustCreate(t, fsys, "/d", "seg-1")
	other := mustCreate(t, fsys, "/d", "checkpoint")
	var failed []int
	for i := range 6 {
		mustWrite(t, other, []byte("c"), int64(i)) // never matches
		if _, err := seg.WriteAt([]byte("ab"), int64(2*i)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, faultfs.ErrInjected) {
				t.Fatalf("write %d: %v", i, err)
			}
			failed = append(failed, i)
		}
	}
	if fmt.Sprint(failed) != "[2]" {
		t.Fatalf("failed writes %v, want [2]", failed)
	}
	op, fired := inj.Fired()
	if !fired || op.Kind != faultfs.OpWrite || op.Path != "/d/seg-1" || op.Offset != 4 || op.Len != 2 {
		t.Fatalf("Fired() = %v, %v", op, fired)
	}
	if inj.Matched() != 6 {
		t.Fatalf("matched %d", inj.Matched())
	}
	// The failed write was short: its first half landed.
	got, _ := m.ReadFile("/d/seg-1")
	if string(got) != "ababa\x00ababab" {
		t.Fatalf("contents %q", got)
	}
}

func TestInjectedWriteIsShortLikeAFullDisk(t *testing.T) {
	m := faultfs.NewMemFS()
	fsys := faultfs.Wrap(m, faultfs.Fail(faultfs.ENOSPC, faultfs.Kinds(faultfs.OpWrite)))
	f := mustCreate(t, fsys, "/d", "f")
	n, err := f.WriteAt([]byte("12345678"), 0)
	var pe *os.PathError
	if n != 4 || !errors.As(err, &pe) || pe.Path != "/d/f" || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt = %d, %v; want a short write of 4 and ENOSPC in a PathError", n, err)
	}
	if got, _ := m.ReadFile("/d/f"); string(got) != "1234" {
		t.Fatalf("contents %q", got)
	}
}

func TestCounterToggleChainRecorder(t *testing.T) {
	m := faultfs.NewMemFS()
	writes := faultfs.NewCounter(faultfs.WriteOps)
	all := faultfs.NewCounter(faultfs.AnyOp)
	rec := faultfs.NewRecorder(faultfs.Kinds(faultfs.OpSync, faultfs.OpSyncDir))
	tog := faultfs.NewToggle(faultfs.Fail(faultfs.EIO, faultfs.Kinds(faultfs.OpSync)), false)
	fsys := faultfs.Wrap(m, faultfs.Chain(tog, writes, all, rec))

	f := mustCreate(t, fsys, "/d", "f") // mkdir, create, syncdir, syncdir
	mustWrite(t, f, []byte("a"), 0)
	mustSync(t, f)
	tog.On()
	if !tog.Enabled() {
		t.Fatal("toggle not on")
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync with the toggle on: %v", err)
	}
	if _, err := fsys.Stat("/d/f"); err != nil {
		t.Fatalf("stat is not a sync: %v", err)
	}
	tog.Off()
	mustSync(t, f)
	// The failed sync was still seen by every injector in the chain.
	if got := writes.Count(); got != 8 {
		t.Fatalf("write-class ops %d, want 8 (mkdir, create, 2 syncdir, write, 3 syncs)", got)
	}
	if got := all.Count(); got != 9 {
		t.Fatalf("all ops %d, want 9", got)
	}
	var kinds []string
	for _, op := range rec.Ops() {
		kinds = append(kinds, op.Kind.String())
	}
	if fmt.Sprint(kinds) != "[syncdir syncdir sync sync sync]" {
		t.Fatalf("recorded %v", kinds)
	}
}

func TestCrashAtStopsTheWorldAtTheKthWrite(t *testing.T) {
	for k := range int64(6) {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			m := faultfs.NewMemFS()
			if err := m.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := m.SyncDir("/"); err != nil {
				t.Fatal(err)
			}
			crash := faultfs.CrashAt(k)
			fsys := faultfs.Wrap(m, crash)
			// Write-class ops: 0 create, 1 write, 2 sync, 3 syncdir, 4 write, ...
			steps := []func() error{}
			var f interface {
				WriteAt([]byte, int64) (int, error)
				Datasync() error
			}
			steps = append(steps,
				func() error {
					g, err := fsys.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
					f = g
					return err
				},
				func() error { _, err := f.WriteAt([]byte("first"), 0); return err },
				func() error { return f.Datasync() },
				func() error { return fsys.SyncDir("/d") },
				func() error { _, err := f.WriteAt([]byte("second"), 5); return err },
			)
			var failedAt = -1
			for i, step := range steps {
				if err := step(); err != nil {
					if !errors.Is(err, faultfs.ErrCrashed) {
						t.Fatalf("step %d: %v", i, err)
					}
					failedAt = i
					break
				}
			}
			if want := int(k); k < int64(len(steps)) && failedAt != want {
				t.Fatalf("crashed at step %d, want %d", failedAt, want)
			}
			if k >= int64(len(steps)) {
				if failedAt != -1 {
					t.Fatalf("crashed at %d with k beyond the workload", failedAt)
				}
				if _, crashed := crash.Crashed(); crashed {
					t.Fatal("Crashed() true without reaching k")
				}
				return
			}
			op, crashed := crash.Crashed()
			if !crashed || !op.Kind.IsWrite() {
				t.Fatalf("Crashed() = %v, %v", op, crashed)
			}
			if crash.Writes() != k || len(crash.Before()) != int(k) {
				t.Fatalf("admitted %d writes (%v), want %d", crash.Writes(), crash.Before(), k)
			}
			// Every later op fails, reads included: the process is dead.
			if _, err := fsys.ReadDir("/d"); !errors.Is(err, faultfs.ErrCrashed) {
				t.Fatalf("readdir after crash: %v", err)
			}
			// The crash changed nothing underneath: "second" never landed.
			if got, _ := m.ReadFile("/d/f"); bytes.Contains(got, []byte("second")) {
				t.Fatalf("a write after the crash point landed: %q", got)
			}
			c := m.CrashClone(faultfs.CrashOptions{})
			got, ok := fileOf(t, c, "/d/f")
			switch {
			case k <= 3 && ok:
				t.Fatalf("file survived without its SyncDir: %q", got)
			case k == 4 && string(got) != "first":
				t.Fatalf("after crash: %q, %v", got, ok)
			}
		})
	}
}

func TestInjectedErrorsMatch(t *testing.T) {
	err := faultfs.Errno(syscall.ENOSPC)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, faultfs.ErrInjected) || errors.Is(err, faultfs.ErrCrashed) {
		t.Fatalf("%v does not match as documented", err)
	}
	crash := faultfs.CrashAt(0)
	cerr := crash.MaybeError(faultfs.Op{Kind: faultfs.OpWrite, Path: "x"})
	if !errors.Is(cerr, faultfs.ErrCrashed) || !errors.Is(cerr, faultfs.ErrInjected) || !errors.Is(cerr, syscall.EIO) {
		t.Fatalf("crash error %v does not match", cerr)
	}
	if faultfs.OpSyncDir.String() != "syncdir" || faultfs.OpRead.IsWrite() || !faultfs.OpAllocate.IsWrite() {
		t.Fatal("op kind names or classes changed")
	}
}
