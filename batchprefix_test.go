package bucketlog

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// TestAppendBatchReportsItsDurablePrefix (found by the simulation, seeds 16
// 35 130 169): a batch whose rollover fails after the seal's fsync covered
// its first events answers the error with that durable prefix, so the
// caller does not send it again.
func TestAppendBatchReportsItsDurablePrefix(t *testing.T) {
	ctx := ctxT(t)
	inj := faultfs.NewToggle(faultfs.Fail(faultfs.Errno(syscall.EIO),
		faultfs.PathContains(localseg.SegmentFileName(2))), false)
	root := t.TempDir()
	l := mustOpen(t, Options{Dir: root, SegmentMaxBytes: 8192, FS: faultfs.Wrap(localseg.OSFS{}, inj), Logger: quiet()})
	ev := func(tag string) localseg.Event {
		return localseg.Event{ExecutionID: "e", TransactionID: "txn-" + tag, Payload: strings.Repeat("p", 1000)}
	}
	for i := range 6 { // 6 of the 7 frames segment 1 holds
		if _, err := l.Append(ctx, ev(fmt.Sprint("fill-", i))); err != nil {
			t.Fatal(err)
		}
	}
	inj.On()
	res, err := l.AppendBatch(ctx, []localseg.Event{ev("b0"), ev("b1"), ev("b2")})
	inj.Off()
	if err == nil {
		t.Fatal("the batch succeeded although its rollover failed")
	}
	l.Close()
	l2 := mustOpen(t, Options{Dir: root, SegmentMaxBytes: 8192, ReadOnly: true, Logger: quiet()})
	defer l2.Close()
	durable := l2.Store().Tip() - 6
	if durable == 0 || durable >= 3 {
		t.Fatalf("%d events of the batch are durable, want a proper prefix (the test's premise)", durable)
	}
	if res.Appended != int(durable) || res.FirstSequence != 7 || res.LastSequence != 6+durable {
		t.Fatalf("AppendBatch answered %+v with %v; events 7..%d of it are durable", res, err, 6+durable)
	}
}
