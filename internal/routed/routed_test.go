package routed

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// treeState is every file under a root with its size and content digest,
// so a test can prove that an operation changed nothing on disk.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%d:%x", len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// idsByShard returns k decimal execution ids owned by each of n shards.
func idsByShard(n, k int) [][]string {
	out := make([][]string, n)
	for i := 1; ; i++ {
		id := strconv.Itoa(i)
		s := affinity.ShardFor(id, n)
		if len(out[s]) < k {
			out[s] = append(out[s], id)
		}
		done := true
		for _, ids := range out {
			done = done && len(ids) == k
		}
		if done {
			return out
		}
	}
}

func openPool(t *testing.T, root string, n int) []*Log {
	t.Helper()
	logs := make([]*Log, n)
	for i := range n {
		l, err := Open(root, affinity.Ownership{Index: i, Count: n}, Options{})
		if err != nil {
			t.Fatalf("open replica %d: %v", i, err)
		}
		logs[i] = l
		t.Cleanup(func() { l.Close() })
	}
	return logs
}

func ev(exec, txn, payload string) localseg.Event {
	return localseg.Event{ExecutionID: exec, TransactionID: txn, Payload: payload}
}

// TestOwnerAppendsNonOwnerRefused: the owner appends; a non-owner is refused
// naming the owner shard, and writes no byte and consumes no sequence
// (CHECKLIST §2.5).
func TestOwnerAppendsNonOwnerRefused(t *testing.T) {
	root := t.TempDir()
	logs := openPool(t, root, 2)
	ids := idsByShard(2, 1)
	owned, foreign := ids[0][0], ids[1][0]

	r, err := logs[0].Append(ev(owned, "t1", "first"))
	if err != nil || r.Seq != 1 || !r.Created || r.Tip != 1 {
		t.Fatalf("owner append = %+v, %v; want seq 1, created", r, err)
	}
	before := treeState(t, root)
	tipBefore := logs[0].Store().Tip()

	_, err = logs[0].Append(ev(foreign, "t2", "refused"))
	var noe *affinity.NotOwnerError
	if !errors.As(err, &noe) || !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatalf("non-owner append err = %v, want *affinity.NotOwnerError", err)
	}
	if noe.Owner != 1 || noe.Shard != 0 || noe.ExecutionID != foreign {
		t.Fatalf("NotOwnerError = %+v, want owner 1, shard 0", noe)
	}
	if _, _, err := logs[0].AppendBatch([]localseg.Event{ev(foreign, "t3", "x")}); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatalf("non-owner batch err = %v, want affinity.ErrNotOwner", err)
	}
	if after := treeState(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused append changed the disk:\nbefore %v\nafter  %v", before, after)
	}
	if tip := logs[0].Store().Tip(); tip != tipBefore {
		t.Fatalf("a refused append moved the tip from %d to %d", tipBefore, tip)
	}
	// No sequence consumed: the next owned append is 2, and the owner of
	// the refused execution starts its own shard at 1.
	if r, err := logs[0].Append(ev(owned, "t4", "second")); err != nil || r.Seq != 2 || r.Created {
		t.Fatalf("next owner append = %+v, %v; want seq 2", r, err)
	}
	if r, err := logs[1].Append(ev(foreign, "t2", "re-routed")); err != nil || r.Seq != 1 || !r.Created {
		t.Fatalf("re-routed append = %+v, %v; want seq 1 on shard 1", r, err)
	}
}

// TestRefusalCheckerCatchesSneakedWrite is the RED control of the test
// above: a write that bypasses routing (straight into the replica's own
// store) is seen by the same disk comparison and leaves foreign data in the
// shard. Without the refusal, the single-writer property is lost.
func TestRefusalCheckerCatchesSneakedWrite(t *testing.T) {
	root := t.TempDir()
	logs := openPool(t, root, 2)
	ids := idsByShard(2, 1)
	if _, err := logs[0].Append(ev(ids[0][0], "t1", "first")); err != nil {
		t.Fatal(err)
	}
	before := treeState(t, root)
	if _, err := logs[0].Store().Append(ev(ids[1][0], "t2", "sneaked")); err != nil {
		t.Fatal(err)
	}
	if after := treeState(t, root); reflect.DeepEqual(before, after) {
		t.Fatal("the disk comparison did not see a write that bypassed routing")
	}
	p, err := logs[0].Store().Scan(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	foreign := 0
	for _, rec := range p.Records {
		if affinity.ShardFor(rec.ExecutionID, 2) != 0 {
			foreign++
		}
	}
	if foreign != 1 {
		t.Fatalf("foreign records in shard 0 = %d, want the sneaked one", foreign)
	}
}

// TestBatchRefusedWhole: one non-owned or invalid event refuses the whole
// batch and nothing is written.
func TestBatchRefusedWhole(t *testing.T) {
	root := t.TempDir()
	logs := openPool(t, root, 2)
	ids := idsByShard(2, 2)
	before := treeState(t, root)
	batch := []localseg.Event{ev(ids[0][0], "a", "1"), ev(ids[0][1], "b", "2"), ev(ids[1][0], "c", "3")}
	if _, _, err := logs[0].AppendBatch(batch); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatalf("mixed batch err = %v, want affinity.ErrNotOwner", err)
	}
	bad := []localseg.Event{ev(ids[0][0], "a", "1"), ev("no spaces", "b", "2")}
	if _, _, err := logs[0].AppendBatch(bad); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("invalid batch err = %v, want ErrInvalidInput", err)
	}
	if after := treeState(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused batch changed the disk")
	}
	first, last, err := logs[0].AppendBatch(batch[:2])
	if err != nil || first != 1 || last != 2 {
		t.Fatalf("owned batch = %d..%d, %v; want 1..2", first, last, err)
	}
}

// TestInvalidEventRefusedOnEveryReplica: validation runs before routing, so
// an invalid event is invalid input whoever receives it.
func TestInvalidEventRefusedOnEveryReplica(t *testing.T) {
	root := t.TempDir()
	logs := openPool(t, root, 3)
	for _, e := range []localseg.Event{
		ev("", "t", "p"), ev("a b", "t", "p"), ev("exec/1", "t", "p"),
		ev("1", "  ", "p"), ev("1", "t", "bad \xff utf8"),
	} {
		for i, l := range logs {
			if _, err := l.Append(e); !errors.Is(err, localseg.ErrInvalidInput) || errors.Is(err, affinity.ErrNotOwner) {
				t.Errorf("replica %d append %+v: err = %v, want invalid input", i, e, err)
			}
		}
	}
	for i, l := range logs {
		if _, err := l.Read("a b", 0, 10); !errors.Is(err, localseg.ErrInvalidInput) {
			t.Errorf("replica %d read of a bad id: err = %v", i, err)
		}
	}
}

// TestNonOwnerReadIsColdLoad: a non-owner read is served by a cold load,
// says so, returns what the owner returns, and changes nothing on disk
// (CHECKLIST §2.6).
func TestNonOwnerReadIsColdLoad(t *testing.T) {
	root := t.TempDir()
	logs := openPool(t, root, 2)
	ids := idsByShard(2, 2)
	for i, id := range ids[1] {
		for j := range 3 {
			if _, err := logs[1].Append(ev(id, fmt.Sprintf("t%d-%d", i, j), fmt.Sprintf("<p>%d & \"%d\" é</p>", i, j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := treeState(t, root)
	for _, id := range ids[1] {
		own, err := logs[1].Read(id, 0, 100)
		if err != nil || own.ServedBy != affinity.ServedByOwnerResident || own.Shard != 1 {
			t.Fatalf("owner read = %+v, %v", own, err)
		}
		cold, err := logs[0].Read(id, 0, 100)
		if err != nil || cold.ServedBy != affinity.ServedByNonOwnerColdLoad || cold.Shard != 1 {
			t.Fatalf("non-owner read = %+v, %v", cold, err)
		}
		if !reflect.DeepEqual(own.Page, cold.Page) || len(cold.Page.Records) != 3 {
			t.Fatalf("cold page %+v differs from owner page %+v", cold.Page, own.Page)
		}
		paged, err := logs[0].Read(id, own.Page.Records[0].Seq, 1)
		if err != nil || len(paged.Page.Records) != 1 || paged.Page.Records[0] != own.Page.Records[1] || paged.Page.RecordCount != 2 {
			t.Fatalf("paged cold read = %+v, %v", paged, err)
		}
	}
	scan, err := logs[0].ScanShard(1, 0, 100)
	if err != nil || scan.ServedBy != affinity.ServedByNonOwnerColdLoad || len(scan.Page.Records) != 6 {
		t.Fatalf("non-owner scan = %+v, %v", scan, err)
	}
	if after := treeState(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("a cold load changed the disk")
	}
}

// TestNeverWrittenShardReadsEmpty: a non-owner read of a shard that has no
// directory is empty, not an error, and creates nothing.
func TestNeverWrittenShardReadsEmpty(t *testing.T) {
	root := t.TempDir()
	l, err := Open(root, affinity.Ownership{Index: 0, Count: 4}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	id := idsByShard(4, 1)[3][0]
	res, err := l.Read(id, 0, 10)
	if err != nil || res.Page.Exists || len(res.Page.Records) != 0 || res.ServedBy != affinity.ServedByNonOwnerColdLoad || res.Shard != 3 {
		t.Fatalf("read of a never-written shard = %+v, %v", res, err)
	}
	if _, err := os.Stat(localseg.ShardDir(root, 3)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the cold load created the shard directory: %v", err)
	}
}

// TestPluggableColdReader: a custom ColdReader is asked for the owner shard
// and its pages are returned as cold loads.
func TestPluggableColdReader(t *testing.T) {
	root := t.TempDir()
	var asked []int
	cr := func(shard int) (affinity.Reader, error) {
		asked = append(asked, shard)
		return fakeReader{page: localseg.Page{Exists: true, Base: 1, RecordCount: 1,
			Records: []localseg.Record{{Seq: 7, ExecutionID: "x", TransactionID: "t", Payload: "from the bucket"}}}}, nil
	}
	l, err := Open(root, affinity.Ownership{Index: 0, Count: 2}, Options{ColdReader: cr})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	id := idsByShard(2, 1)[1][0]
	res, err := l.Read(id, 0, 10)
	if err != nil || res.ServedBy != affinity.ServedByNonOwnerColdLoad || res.Page.Records[0].Payload != "from the bucket" {
		t.Fatalf("read = %+v, %v", res, err)
	}
	if !reflect.DeepEqual(asked, []int{1}) {
		t.Fatalf("cold reader asked for %v, want [1]", asked)
	}
	boom := errors.New("bucket down")
	l2, err := Open(t.TempDir(), affinity.Ownership{Index: 0, Count: 2}, Options{ColdReader: func(int) (affinity.Reader, error) { return nil, boom }})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, err := l2.Read(id, 0, 10); !errors.Is(err, boom) {
		t.Fatalf("cold reader error not passed on: %v", err)
	}
}

type fakeReader struct{ page localseg.Page }

func (f fakeReader) Scan(uint64, int) (localseg.Page, error) { return f.page, nil }
func (f fakeReader) ReadExecution(string, uint64, int) (localseg.Page, error) {
	return f.page, nil
}
func (fakeReader) Close() error { return nil }

// TestNonOwnerTailAckRefused: consumer state is the owner's; a non-owner
// pull, ack or delete is refused naming the owner shard (CHECKLIST §2.6).
func TestNonOwnerTailAckRefused(t *testing.T) {
	root := t.TempDir()
	logs := openPool(t, root, 2)
	id := idsByShard(2, 1)[1][0]
	if _, err := logs[1].Append(ev(id, "t", "p")); err != nil {
		t.Fatal(err)
	}
	before := treeState(t, root)
	var noe *affinity.NotOwnerError
	if _, err := logs[0].Pull(1, "c", 10); !errors.As(err, &noe) || noe.Owner != 1 {
		t.Fatalf("non-owner pull err = %v", err)
	}
	if _, err := logs[0].Ack(1, "c", 1); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatalf("non-owner ack err = %v", err)
	}
	if err := logs[0].DeleteConsumer(1, "c"); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatalf("non-owner delete err = %v", err)
	}
	if after := treeState(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused consumer operations changed the disk")
	}
	pr, err := logs[1].Pull(1, "c", 10)
	if err != nil || !pr.Created || len(pr.Records) != 1 {
		t.Fatalf("owner pull = %+v, %v", pr, err)
	}
	if acked, err := logs[1].Ack(1, "c", 1); err != nil || acked != 1 {
		t.Fatalf("owner ack = %d, %v", acked, err)
	}
	if err := logs[1].DeleteConsumer(1, "c"); err != nil {
		t.Fatalf("owner delete: %v", err)
	}
}

// TestSecondWriterOfShardFails: two replicas configured with the same index
// cannot both open the shard.
func TestSecondWriterOfShardFails(t *testing.T) {
	root := t.TempDir()
	l, err := Open(root, affinity.Ownership{Index: 1, Count: 2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l2, err := Open(root, affinity.Ownership{Index: 1, Count: 2}, Options{}); !errors.Is(err, localseg.ErrLocked) {
		if l2 != nil {
			l2.Close()
		}
		t.Fatalf("second writer of shard 1: err = %v, want ErrLocked", err)
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	for _, o := range []affinity.Ownership{{Index: 2, Count: 2}, {Index: 0, Count: 0}, {Index: -1, Count: 3}} {
		if _, err := Open(t.TempDir(), o, Options{}); !errors.Is(err, affinity.ErrConfig) {
			t.Errorf("Open(%v) err = %v, want ErrConfig", o, err)
		}
	}
	if _, err := Open("", affinity.SingleOwner, Options{}); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Errorf("Open with an empty root: %v", err)
	}
}

func TestClosedLog(t *testing.T) {
	l, err := Open(t.TempDir(), affinity.Ownership{Index: 0, Count: 2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ids := idsByShard(2, 1)
	if _, err := l.Append(ev(ids[0][0], "t", "p")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := l.Read(ids[1][0], 0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("cold read after close: %v", err)
	}
}

// TestConcurrentRoutedAppends: many goroutines appending through two
// replicas keep each shard gapless, and every refusal names the right owner.
// Run with -race.
func TestConcurrentRoutedAppends(t *testing.T) {
	root := t.TempDir()
	logs := openPool(t, root, 2)
	ids := idsByShard(2, 4)
	var all []string
	for _, s := range ids {
		all = append(all, s...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				id := all[(g+i)%len(all)]
				for r, l := range logs {
					_, err := l.Append(ev(id, fmt.Sprintf("g%d-%d", g, i), "x"))
					owner := affinity.ShardFor(id, 2)
					var noe *affinity.NotOwnerError
					switch {
					case r == owner && err != nil:
						errs <- err
					case r != owner && (!errors.As(err, &noe) || noe.Owner != owner):
						errs <- fmt.Errorf("replica %d, id %s: %v", r, id, err)
					}
				}
				if _, err := logs[g%2].Read(id, 0, 5); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := uint64(0)
	for s, l := range logs {
		p, err := l.ScanShard(s, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range p.Page.Records {
			if rec.Seq != uint64(i+1) || affinity.ShardFor(rec.ExecutionID, 2) != s {
				t.Fatalf("shard %d record %d = %+v", s, i, rec)
			}
		}
		total += uint64(len(p.Page.Records))
	}
	if total != 8*20 {
		t.Fatalf("appended %d events in all, want 160", total)
	}
}
