package blobtier

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

type apiErr struct {
	code   string
	status int
}

func (e apiErr) Error() string       { return fmt.Sprintf("api error %s (%d)", e.code, e.status) }
func (e apiErr) ErrorCode() string   { return e.code }
func (e apiErr) HTTPStatusCode() int { return e.status }

type statusOnly int

func (e statusOnly) Error() string       { return fmt.Sprintf("http %d", int(e)) }
func (e statusOnly) HTTPStatusCode() int { return int(e) }

func TestClassify(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	_, notFound := b.Attributes(ctx, "missing")
	if err := b.WriteAll(ctx, "k", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	refused := b.WriteAll(ctx, "k", []byte("y"), writerOptionsIfNotExist())
	for _, c := range []struct {
		name string
		err  error
		want class
	}{
		{"gocloud NotFound", notFound, classNotFound},
		{"gocloud FailedPrecondition", refused, classPrecondition},
		{"S3 409 ConditionalRequestConflict", fmt.Errorf("wrapped: %w", apiErr{"ConditionalRequestConflict", 409}), classPrecondition},
		{"bare HTTP 409", statusOnly(409), classPrecondition},
		{"HTTP 500", apiErr{"InternalError", 500}, classOther},
		{"deadline", context.DeadlineExceeded, classOther},
		{"plain", errors.New("boom"), classOther},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("%s: classify(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}

func writerOptionsIfNotExist() *blob.WriterOptions {
	o := writerOptions(MetaOf([]byte("y"), 0))
	o.IfNotExist = true
	return o
}
