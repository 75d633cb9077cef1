package targets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// Every target appends durably from several writers and its read-back count
// matches what Drive counted; this is what makes each append row honest.
func TestTargetsDriveAndCount(t *testing.T) {
	p := MakePayload(256)
	for _, tg := range Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			writers := 4
			if tg.Limit {
				writers = 1
			}
			a, err := tg.Open(t.TempDir(), &p)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer a.Close()
			res, err := Drive(context.Background(), a, writers, 50*time.Millisecond, &p)
			if err != nil {
				t.Fatalf("drive: %v", err)
			}
			if res.Ops == 0 || res.Elapsed <= 0 {
				t.Fatalf("nothing measured: %+v", res)
			}
		})
	}
}

// lossy acknowledges every append but keeps only some: Drive must refuse
// the measurement (the RED control of the read-back check).
type lossy struct {
	n    atomic.Uint64
	drop uint64
}

func (l *lossy) Append(*Payload) error { l.n.Add(1); return nil }
func (l *lossy) Count() (uint64, error) {
	return l.n.Load() - min(l.drop, l.n.Load()), nil
}
func (l *lossy) Close() error { return nil }

func TestDriveRefusesLostAppends(t *testing.T) {
	p := MakePayload(16)
	_, err := Drive(context.Background(), &lossy{drop: 1}, 2, 10*time.Millisecond, &p)
	if err == nil || !strings.Contains(err.Error(), "acknowledged") {
		t.Fatalf("a log that lost an acknowledged append was measured: err=%v", err)
	}
	if _, err := Drive(context.Background(), &lossy{}, 2, 10*time.Millisecond, &p); err != nil {
		t.Fatalf("a faithful log was refused: %v", err)
	}
}

// failing returns an error from the third append on.
type failing struct{ n atomic.Int64 }

var errBroken = errors.New("broken disk")

func (f *failing) Append(*Payload) error {
	if f.n.Add(1) > Warmup+2 {
		return errBroken
	}
	return nil
}
func (f *failing) Count() (uint64, error) { return uint64(f.n.Load()), nil }
func (f *failing) Close() error           { return nil }

func TestDriveReportsAppendErrors(t *testing.T) {
	p := MakePayload(16)
	if _, err := Drive(context.Background(), &failing{}, 3, time.Second, &p); !errors.Is(err, errBroken) {
		t.Fatalf("got %v, want the append error", err)
	}
}

// The limit loops write the record bucketlog writes for the same payload:
// a valid docs/FORMAT.md §2 frame of the same length as localseg's own encoding.
func TestLimitRecordIsABucketlogFrame(t *testing.T) {
	for _, size := range []int{256, 4096} {
		p := MakePayload(size)
		rec := LimitRecord(p)
		f, n, err := localseg.DecodeFrame(rec)
		if err != nil {
			t.Fatalf("size %d: limit record does not decode: %v", size, err)
		}
		if n != len(rec) || f.Kind != localseg.KindEvent || f.Payload != p.S {
			t.Fatalf("size %d: decoded %d of %d bytes, frame %+v", size, n, len(rec), f)
		}
		enc, err := localseg.EncodeFrame(nil, &localseg.Frame{Kind: localseg.KindEvent, Seq: 1000000,
			ExecutionID: "exec-00042", TransactionID: TxnID(1000000), Payload: p.S})
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != len(rec) {
			t.Fatalf("size %d: localseg writes %d bytes, the limit loop %d", size, len(enc), len(rec))
		}
	}
}

// A preallocated limit file that runs out stops the loop with ErrFull and
// Drive reports it (timed until then) instead of wrapping around.
func TestLimitStopsWhenFull(t *testing.T) {
	p := MakePayload(16)
	rec := LimitRecord(p)
	f, err := os.Create(filepath.Join(t.TempDir(), "limit.dat"))
	if err != nil {
		t.Fatal(err)
	}
	a := &limitAppender{f: f, rec: rec, size: int64(Warmup+4) * int64(len(rec))}
	defer a.Close()
	res, err := Drive(context.Background(), a, 1, time.Minute, &p)
	if err != nil {
		t.Fatalf("drive: %v", err)
	}
	if !res.Full || res.Ops != 4 {
		t.Fatalf("got %+v, want full after 4 timed appends", res)
	}
}

func TestSystemsBuildOpenReplay(t *testing.T) {
	p := MakePayload(storePayloadForTest)
	for _, sys := range Systems() {
		t.Run(sys.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := sys.Build(dir, 2500, &p, 7); err != nil {
				t.Fatalf("build: %v", err)
			}
			if _, _, err := sys.OpenForAppend(dir); err != nil {
				t.Fatalf("open: %v", err)
			}
			n, err := sys.Replay(dir, len(p.B))
			if err != nil || n != 2500 {
				t.Fatalf("replay read %d, err %v", n, err)
			}
			if _, err := sys.Replay(dir, len(p.B)+1); err == nil {
				t.Fatal("replay did not check payload lengths")
			}
		})
	}
}

const storePayloadForTest = 100
