package bucketlogtest_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

// Example is a whole user program: open a log on an S3 emulator, append,
// scan, read one execution, pull, ack and close. It imports only the root
// and this package.
func Example() {
	ctx := context.Background()
	s3, err := bucketlogtest.StartS3()
	if err != nil {
		log.Fatal(err)
	}
	defer s3.Close()
	name, err := s3.NewBucket()
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bucketlog-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, BucketURL: s3.URL(name)})
	if err != nil {
		log.Fatal(err)
	}
	for i, exec := range []string{"order-1", "order-2", "order-1"} {
		ev := bucketlog.Event{ExecutionID: exec, TransactionID: fmt.Sprint("t", i), Payload: fmt.Sprint("event ", i)}
		if _, err := l.Append(ctx, ev); err != nil {
			log.Fatal(err)
		}
	}
	page, err := l.Scan(ctx, 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	one, err := l.ReadExecution(ctx, "order-1", 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	pulled, err := l.Pull(ctx, "billing", 10)
	if err != nil {
		log.Fatal(err)
	}
	acked, err := l.Ack(ctx, "billing", pulled.Records[len(pulled.Records)-1].Seq)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Records), len(one.Page.Records), len(pulled.Records), acked)
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}
	// Output: 3 2 3 3
}
