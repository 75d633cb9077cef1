package quickstart

import (
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

func TestQuickstart(t *testing.T) {
	ctx := t.Context()
	l := bucketlogtest.OpenLog(t, bucketlogtest.NewS3(t), bucketlog.Options{})
	for _, ev := range []bucketlog.Event{
		{ExecutionID: "order-7", TransactionID: "t1", Payload: `{"type":"created"}`},
		{ExecutionID: "order-7", TransactionID: "t2", Payload: `{"type":"paid"}`},
	} {
		if _, err := l.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	page, err := l.Scan(ctx, 0, 100)
	if err != nil || len(page.Records) != 2 {
		t.Fatalf("scan: %+v %v", page, err)
	}
	res, err := l.ReadExecution(ctx, "order-7", 0, 100)
	if err != nil || len(res.Page.Records) != 2 {
		t.Fatalf("read: %+v %v", res, err)
	}
	pulled, err := l.Pull(ctx, "billing", 100)
	if err != nil || len(pulled.Records) != 2 {
		t.Fatalf("pull: %+v %v", pulled, err)
	}
	if _, err := l.Ack(ctx, "billing", pulled.Records[1].Seq); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
