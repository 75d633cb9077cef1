package bucketlog_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"

	"github.com/bucketlog/bucketlog"
)

// quiet keeps the examples' output to what they print themselves.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// ExampleOpen opens a durable local log (no bucket), appends two events of
// one execution and reads them back. Each Append returns only once its event
// is fsync'd on the local disk.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "bucketlog-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	for i, payload := range []string{`{"step":"start"}`, `{"step":"done"}`} {
		res, err := l.Append(ctx, bucketlog.Event{
			ExecutionID:   "order-42",
			TransactionID: fmt.Sprintf("txn-%d", i+1),
			Payload:       payload,
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("appended sequence %d (first event of the shard: %v)\n", res.Seq, res.Created)
	}

	res, err := l.ReadExecution(ctx, "order-42", 0, 100)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Page.Records {
		fmt.Println(r.Seq, r.ExecutionID, r.Payload)
	}
	// Output:
	// appended sequence 1 (first event of the shard: true)
	// appended sequence 2 (first event of the shard: false)
	// 1 order-42 {"step":"start"}
	// 2 order-42 {"step":"done"}
}

// ExampleOpen_bucket opens a log that ships to a bucket. mem:// is an
// in-memory bucket for tests and examples; production uses s3:// or gs://.
// Ship(ctx, true) seals the active segment and uploads it now; a running
// log does the same on its own (segments when they seal, the unsealed tail
// every TailInterval — the tick is the loss window of a lost disk).
func ExampleOpen_bucket() {
	dir, err := os.MkdirTemp("", "bucketlog-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{
		Dir:       dir,
		BucketURL: "mem://example-open-bucket",
		Logger:    quiet,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, bucketlog.Event{ExecutionID: "7", TransactionID: fmt.Sprint("t", i), Payload: fmt.Sprint("event ", i)}); err != nil {
			log.Fatal(err)
		}
	}
	rep, err := l.Ship(ctx, true)
	if err != nil {
		log.Fatal(err)
	}
	// The background uploader may have shipped the sealed segment first;
	// either way the bucket now holds every event.
	fmt.Printf("the bucket holds sequences 1..%d\n", rep.ShippedThrough)
	ready, _ := l.Health()
	fmt.Println("ready:", ready)
	// Output:
	// the bucket holds sequences 1..3
	// ready: true
}

// ExampleRestore rebuilds a shard on a "new machine" from the bucket alone:
// a log ships to a bucket and closes (Close ships the tail one last time),
// its disk is lost, and Restore recovers every event into an empty
// directory, which then opens as the shard and continues the sequence.
func ExampleRestore() {
	const bucket = "mem://example-restore"
	ctx := context.Background()

	oldDisk, err := os.MkdirTemp("", "bucketlog-example-")
	if err != nil {
		log.Fatal(err)
	}
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: oldDisk, BucketURL: bucket, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := l.Append(ctx, bucketlog.Event{ExecutionID: "run-1", TransactionID: fmt.Sprint("t", i), Payload: fmt.Sprint("step ", i)}); err != nil {
			log.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}
	os.RemoveAll(oldDisk) // the disk is gone

	newDisk, err := os.MkdirTemp("", "bucketlog-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(newDisk)
	rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{BucketURL: bucket, Shard: 0, Dir: newDisk})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("restored sequences %d..%d\n", rep.FirstSeq, rep.LastSeq)

	l, err = bucketlog.Open(ctx, bucketlog.Options{Dir: newDisk, BucketURL: bucket, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	res, err := l.Append(ctx, bucketlog.Event{ExecutionID: "run-1", TransactionID: "t6", Payload: "step 6"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the next append gets sequence", res.Seq)
	page, err := l.Scan(ctx, 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range page.Records {
		fmt.Print(r.Payload, "; ")
	}
	fmt.Println()
	// Output:
	// restored sequences 1..5
	// the next append gets sequence 6
	// step 1; step 2; step 3; step 4; step 5; step 6;
}
