package shipper

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestFencedLogNamesTheUnpublishedRecords: the fenced ERROR line names the
// records acknowledged locally beyond the shipped end (sequence range,
// first and last execution ids), and an append written after the fence
// was found (it passed the refusal check just before) is logged with the
// new last record.
func TestFencedLogNamesTheUnpublishedRecords(t *testing.T) {
	ctx := context.Background()
	b := blobtier.New(memcas.OpenBucket(nil), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	claim := func(e uint64) {
		data, _ := fencing.Claim{Epoch: e, Shard: 0, Owner: "o", Nonce: fencing.NewNonce()}.Encode()
		if err := b.PutIfAbsent(ctx, blobtier.ClaimKey(0, e), data, e); err != nil {
			t.Fatal(err)
		}
	}
	claim(1)
	rec, _ := fencing.NewStartRecord(1, 0, 0, 0, 0).Encode()
	if err := b.PutIfAbsent(ctx, blobtier.StartKey(0, 1), rec, 1); err != nil {
		t.Fatal(err)
	}
	st, err := localseg.Open(t.TempDir(), localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	app := func(i int) {
		if _, err := st.Append(localseg.Event{ExecutionID: fmt.Sprint("e", i), TransactionID: fmt.Sprint("t", i), Payload: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	app(1)
	logs := &syncBuf{}
	o := Options{TailReplication: true, TailInterval: time.Hour, SyncWait: time.Second, StartupTimeout: time.Second,
		UploadRetryMax: time.Second, Fencing: true, Epoch: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s, err := New(ctx, st, b, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)
	if err := s.ShipTail(ctx); err != nil {
		t.Fatal(err)
	}
	claim(2)
	app(2)
	app(3)
	if err := s.ShipTail(ctx); err == nil || s.Fenced() == nil {
		t.Fatalf("the tick after the claim: %v, want fenced", err)
	}
	if want := "unpublished_first_seq=2 unpublished_first_execution_id=e2 unpublished_last_seq=3 unpublished_last_execution_id=e3"; !strings.Contains(logs.String(), want) {
		t.Fatalf("the fenced line does not say %q:\n%s", want, logs)
	}
	app(4) // in flight when the fence was found: written after it
	if err := s.Appended(ctx, 4, false); err != nil {
		t.Fatal(err)
	}
	if want := "sequence=4 unpublished_first_seq=2 unpublished_first_execution_id=e2 unpublished_last_seq=4 unpublished_last_execution_id=e4"; !strings.Contains(logs.String(), want) {
		t.Fatalf("the late append is not logged with %q:\n%s", want, logs)
	}
}
