package faultfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// mustCreate creates dir/name durably (entry and, empty, contents) and
// returns it open for writing.
func mustCreate(t *testing.T, fsys localseg.FS, dir, name string) localseg.File {
	t.Helper()
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile(dir+"/"+name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return f
}

func mustWrite(t *testing.T, f localseg.File, b []byte, off int64) {
	t.Helper()
	if n, err := f.WriteAt(b, off); err != nil || n != len(b) {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
}

func mustSync(t *testing.T, f localseg.File) {
	t.Helper()
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
}

// fileOf returns the contents of name in fsys, or nil and false when it is
// missing.
func fileOf(t *testing.T, m *faultfs.MemFS, name string) ([]byte, bool) {
	t.Helper()
	b, err := m.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func TestUnsyncedDataIsLostOnCrash(t *testing.T) {
	m := faultfs.NewMemFS()
	f := mustCreate(t, m, "/d", "f")
	mustWrite(t, f, []byte("abc"), 0)

	if got, ok := fileOf(t, m.CrashClone(faultfs.CrashOptions{}), "/d/f"); !ok || len(got) != 0 {
		t.Fatalf("unsynced write survived the crash: %q, %v", got, ok)
	}
	mustSync(t, f)
	mustWrite(t, f, []byte("defg"), 3)
	clone := m.CrashClone(faultfs.CrashOptions{})
	if got, _ := fileOf(t, clone, "/d/f"); string(got) != "abc" {
		t.Fatalf("after crash: %q, want the synced %q", got, "abc")
	}
	// The page cache still has everything.
	if got, _ := fileOf(t, m, "/d/f"); string(got) != "abcdefg" {
		t.Fatalf("current: %q", got)
	}
	// The clone is independent and wholly durable.
	if got, _ := fileOf(t, clone.CrashClone(faultfs.CrashOptions{}), "/d/f"); string(got) != "abc" {
		t.Fatalf("clone of clone: %q", got)
	}
	g, err := clone.OpenFile("/d/f", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, []byte("X"), 0)
	if got, _ := fileOf(t, m, "/d/f"); string(got) != "abcdefg" {
		t.Fatalf("a write to the clone changed the original: %q", got)
	}
}

func TestDirectoryEntriesNeedSyncDir(t *testing.T) {
	m := faultfs.NewMemFS()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	crash := func() *faultfs.MemFS { return m.CrashClone(faultfs.CrashOptions{}) }
	if _, err := crash().Stat("/d"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a new directory survived without SyncDir of its parent: %v", err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, []byte("data"), 0)
	mustSync(t, f)
	if _, ok := fileOf(t, crash(), "/d/a"); ok {
		t.Fatal("a synced file whose entry was never synced survived the crash")
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if got, ok := fileOf(t, crash(), "/d/a"); !ok || string(got) != "data" {
		t.Fatalf("after SyncDir: %q, %v", got, ok)
	}

	if err := m.Rename("/d/a", "/d/b"); err != nil {
		t.Fatal(err)
	}
	c := crash()
	if _, ok := fileOf(t, c, "/d/b"); ok {
		t.Fatal("an unsynced rename survived")
	}
	if got, ok := fileOf(t, c, "/d/a"); !ok || string(got) != "data" {
		t.Fatalf("the old name was lost by an unsynced rename: %q %v", got, ok)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c = crash()
	if _, ok := fileOf(t, c, "/d/a"); ok {
		t.Fatal("old name still present after a synced rename")
	}
	if got, ok := fileOf(t, c, "/d/b"); !ok || string(got) != "data" {
		t.Fatalf("new name after synced rename: %q %v", got, ok)
	}

	if err := m.Remove("/d/b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := fileOf(t, crash(), "/d/b"); !ok {
		t.Fatal("an unsynced removal took effect in the crash")
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if _, ok := fileOf(t, crash(), "/d/b"); ok {
		t.Fatal("a synced removal did not take effect")
	}
	// The open handle still works on the unlinked file.
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("write to an unlinked open file: %v", err)
	}
}

func TestFailedFsyncDropsDataAndALaterFsyncSucceeds(t *testing.T) {
	m := faultfs.NewMemFS()
	inj := faultfs.OnIndex(0, faultfs.EIO, faultfs.Kinds(faultfs.OpSync))
	fsys := faultfs.Wrap(m, inj)
	f := mustCreate(t, fsys, "/d", "f")
	mustWrite(t, f, []byte("hello"), 0)

	err := f.Datasync()
	var pe *os.PathError
	if !errors.Is(err, syscall.EIO) || !errors.Is(err, faultfs.ErrInjected) || !errors.As(err, &pe) {
		t.Fatalf("fsync: %v, want an injected EIO in an *os.PathError", err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "hello" {
		t.Fatalf("read after failed fsync: %q, %v (the page cache still has it)", buf, err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatalf("the fsync after a failed one: %v, want success (Linux reports it clean)", err)
	}
	got, _ := fileOf(t, m.CrashClone(faultfs.CrashOptions{}), "/d/f")
	if string(got) == "hello" {
		t.Fatal("the data of a failed fsync survived a crash although it was dropped")
	}
	if !bytes.Equal(got, make([]byte, 5)) {
		t.Fatalf("after crash: %q, want the size without the data (zeros)", got)
	}
	// A torn crash cannot bring it back either: it is no longer dirty.
	for seed := range uint64(20) {
		got, _ := fileOf(t, m.CrashClone(faultfs.CrashOptions{Torn: true, Seed: seed}), "/d/f")
		if bytes.Contains(got, []byte("hello")) {
			t.Fatalf("seed %d: dropped data resurfaced: %q", seed, got)
		}
	}
	// Data written after the failure, in another sector, is made durable by
	// the next fsync; the dropped sector stays lost.
	mustWrite(t, f, []byte("world"), faultfs.SectorSize)
	mustSync(t, f)
	got, _ = fileOf(t, m.CrashClone(faultfs.CrashOptions{}), "/d/f")
	want := make([]byte, faultfs.SectorSize+5)
	copy(want[faultfs.SectorSize:], "world")
	if !bytes.Equal(got, want) {
		t.Fatalf("after crash: %q", got)
	}
	// Re-writing the dropped bytes (what a reopening store does with what it
	// keeps) dirties them again, and the next fsync persists them.
	mustWrite(t, f, []byte("hello"), 0)
	mustSync(t, f)
	got, _ = fileOf(t, m.CrashClone(faultfs.CrashOptions{}), "/d/f")
	if string(got[:5]) != "hello" {
		t.Fatalf("after re-write and crash: %q", got[:5])
	}
}

func TestTornCrashIsPerSectorAndDeterministic(t *testing.T) {
	const sectors = 8
	m := faultfs.NewMemFS()
	f := mustCreate(t, m, "/d", "f")
	old := bytes.Repeat([]byte{'o'}, sectors*faultfs.SectorSize)
	mustWrite(t, f, old, 0)
	mustSync(t, f)
	neu := bytes.Repeat([]byte{'n'}, sectors*faultfs.SectorSize)
	mustWrite(t, f, neu, 0)

	outcomes := map[string]bool{}
	mixed := false
	for seed := range uint64(64) {
		a, _ := fileOf(t, m.CrashClone(faultfs.CrashOptions{Torn: true, Seed: seed}), "/d/f")
		b, _ := fileOf(t, m.CrashClone(faultfs.CrashOptions{Torn: true, Seed: seed}), "/d/f")
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: two clones differ", seed)
		}
		if len(a) != len(old) {
			t.Fatalf("seed %d: size %d changed by an overwrite", seed, len(a))
		}
		var newSectors int
		for s := range sectors {
			sec := a[s*faultfs.SectorSize : (s+1)*faultfs.SectorSize]
			switch {
			case bytes.Equal(sec, neu[:faultfs.SectorSize]):
				newSectors++
			case bytes.Equal(sec, old[:faultfs.SectorSize]):
			default:
				t.Fatalf("seed %d: sector %d is torn inside: a sector is atomic", seed, s)
			}
		}
		if newSectors > 0 && newSectors < sectors {
			mixed = true
		}
		outcomes[string(a)] = true
	}
	if !mixed || len(outcomes) < 3 {
		t.Fatalf("64 seeds gave %d outcomes (mixed=%v): the torn crash does not explore", len(outcomes), mixed)
	}
	// Without Torn nothing unsynced persists.
	if got, _ := fileOf(t, m.CrashClone(faultfs.CrashOptions{}), "/d/f"); !bytes.Equal(got, old) {
		t.Fatal("a plain crash kept unsynced sectors")
	}
}

func TestTornCrashExtendsWithZerosOrData(t *testing.T) {
	m := faultfs.NewMemFS()
	f := mustCreate(t, m, "/d", "f")
	mustWrite(t, f, bytes.Repeat([]byte{'a'}, faultfs.SectorSize), 0)
	mustSync(t, f)
	mustWrite(t, f, bytes.Repeat([]byte{'b'}, 4*faultfs.SectorSize), faultfs.SectorSize)
	sizes := map[int]bool{}
	zeros := false
	for seed := range uint64(64) {
		got, _ := fileOf(t, m.CrashClone(faultfs.CrashOptions{Torn: true, Seed: seed}), "/d/f")
		sizes[len(got)] = true
		for s := 1; s*faultfs.SectorSize < len(got); s++ {
			sec := got[s*faultfs.SectorSize : (s+1)*faultfs.SectorSize]
			if bytes.Equal(sec, make([]byte, faultfs.SectorSize)) {
				zeros = true
			} else if !bytes.Equal(sec, bytes.Repeat([]byte{'b'}, faultfs.SectorSize)) {
				t.Fatalf("seed %d: sector %d is neither the write nor zeros", seed, s)
			}
		}
	}
	if !sizes[faultfs.SectorSize] || !sizes[5*faultfs.SectorSize] || !zeros {
		t.Fatalf("sizes %v, zeros %v: want both the old and the new size, and unwritten sectors as zeros", sizes, zeros)
	}
}

func TestTornCrashKeepsAPrefixOfDirectoryOperations(t *testing.T) {
	m := faultfs.NewMemFS()
	mustCreate(t, m, "/d", "base").Close()
	const n = 6
	for i := range n {
		f, err := m.OpenFile(fmt.Sprintf("/d/f%d", i), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	prefixes := map[int]bool{}
	for seed := range uint64(64) {
		c := m.CrashClone(faultfs.CrashOptions{Torn: true, Seed: seed})
		names, err := c.ReadDir("/d")
		if err != nil {
			t.Fatal(err)
		}
		k := len(names) - 1 // "base" is durable
		for i := range n {
			_, ok := fileOf(t, c, fmt.Sprintf("/d/f%d", i))
			if ok != (i < k) {
				t.Fatalf("seed %d: %v is not a prefix of the creations", seed, names)
			}
		}
		prefixes[k] = true
	}
	if len(prefixes) < 3 || !prefixes[n] {
		t.Fatalf("prefixes seen %v: the torn crash does not explore directory operations", prefixes)
	}
}

func TestTruncateThenGrowReadsZerosAfterCrash(t *testing.T) {
	m := faultfs.NewMemFS()
	f := mustCreate(t, m, "/d", "f")
	mustWrite(t, f, bytes.Repeat([]byte{'x'}, 2000), 0)
	mustSync(t, f)
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if err := f.Allocate(0, 2000); err != nil {
		t.Fatal(err)
	}
	mustSync(t, f)
	got, _ := fileOf(t, m.CrashClone(faultfs.CrashOptions{}), "/d/f")
	want := append(bytes.Repeat([]byte{'x'}, 100), make([]byte, 1900)...)
	if !bytes.Equal(got, want) {
		t.Fatal("bytes cut by a truncate came back after the file grew again and was synced")
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != 2000 {
		t.Fatalf("stat: %v, %v", fi, err)
	}
}

func TestLockIsExclusiveUntilClosed(t *testing.T) {
	m := faultfs.NewMemFS()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := m.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock("/d/LOCK"); !errors.Is(err, localseg.ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	if _, err := m.Lock("/d/OTHER"); err != nil {
		t.Fatalf("another name: %v", err)
	}
	// A crashed process holds no locks.
	if l2, err := m.CrashClone(faultfs.CrashOptions{}).Lock("/d/LOCK"); err == nil {
		l2.Close()
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lock in a clone: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	l, err = m.Lock("/d/LOCK")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l.Close()
}

func TestOpenFlagsAndErrors(t *testing.T) {
	m := faultfs.NewMemFS()
	if _, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in a missing directory: %v", err)
	}
	f := mustCreate(t, m, "/d", "f")
	mustWrite(t, f, []byte("0123456789"), 0)
	if _, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
	if _, err := m.OpenFile("/d/missing", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	r, err := m.OpenFile("d/f", os.O_RDONLY, 0) // relative names are under "/"
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("write through a read-only handle succeeded")
	}
	buf := make([]byte, 4)
	if n, err := r.ReadAt(buf, 8); n != 2 || err != io.EOF {
		t.Fatalf("short read: %d, %v", n, err)
	}
	if _, err := r.ReadAt(buf, 10); err != io.EOF {
		t.Fatalf("read at end: %v", err)
	}
	a, err := m.OpenFile("/d/f", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("WriteAt on an O_APPEND file succeeded (os.File refuses it)")
	}
	tr, err := m.OpenFile("/d/f", os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := tr.Stat(); fi.Size() != 0 {
		t.Fatalf("O_TRUNC left %d bytes", fi.Size())
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := m.Remove("/d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("remove a non-empty directory: %v", err)
	}
	if err := m.Remove("/d/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove missing: %v", err)
	}
	if err := m.SyncDir("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory: %v", err)
	}
	for _, name := range []string{"c", "a", "b"} {
		if _, err := m.OpenFile("/d/"+name, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names, err := m.ReadDir("/d")
	if err != nil || !slices.Equal(names, []string{"a", "b", "c", "f"}) {
		t.Fatalf("ReadDir: %v, %v", names, err)
	}
	if fi, err := m.Stat("/d"); err != nil || !fi.IsDir() {
		t.Fatalf("stat dir: %v, %v", fi, err)
	}
}

func TestMutationsCountOnlyChanges(t *testing.T) {
	m := faultfs.NewMemFS()
	f := mustCreate(t, m, "/d", "f")
	mustWrite(t, f, []byte("abc"), 0)
	mustSync(t, f)
	before := m.Mutations()
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadDir("/d"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, f) // nothing dirty
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if got := m.Mutations(); got != before {
		t.Fatalf("reads and no-op syncs counted as %d mutations", got-before)
	}
	mustWrite(t, f, []byte("d"), 3)
	if m.Mutations() == before {
		t.Fatal("a write was not counted")
	}
}
