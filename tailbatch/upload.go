package tailbatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// Epoch is the ownership epoch of an unfenced writer (a bucket without
// compare-and-swap, or written before writer fencing): Batch.Epoch carries
// the writer's own.
const Epoch = 0

// UploadError reports a failed tail object upload. It unwraps to the cause:
// errors.Is(err, blobtier.ErrConflict) means a different object already sits
// under Key (a second writer on the shard); errors.Is(err,
// localseg.ErrCorrupt) means the local bytes failed verification and were
// not put.
type UploadError struct {
	Key string
	Err error
}

func (e *UploadError) Error() string { return fmt.Sprintf("tailbatch: upload %s: %v", e.Key, e.Err) }
func (e *UploadError) Unwrap() error { return e.Err }

// Upload reads batch's byte range from src and creates its tail object in
// the bucket. It is a free function: it borrows nothing from a Replicator
// and holds no lock, so a slow or failing bucket can only slow the caller,
// never an append. The bytes are checked before the put (every frame's CRC,
// consecutive sequences from batch.FirstSeq through batch.LastSeq), so local
// bit-rot never reaches the bucket under a fresh, valid digest.
//
// The object is then read back: a put counts only when the bucket returns
// exactly these bytes. An object of our own that reads back damaged (or
// that an earlier put left damaged under the key) is deleted and the
// upload fails with an *UploadError matching ErrDamaged, never
// blobtier.ErrConflict, so the next pass ships the same events again.
//
// An identical object already under the key (a retry after a lost
// acknowledgement) is success. A different one is an *UploadError that
// matches blobtier.ErrConflict.
func Upload(ctx context.Context, b Putter, src RangeReader, batch Batch) error {
	return upload(ctx, b, src, batch, nil, nil)
}

// errKept is UploadKeeping's refusal to delete.
var errKept = errors.New("left in place: the caller holds no other copy of its events")

// UploadKeeping is Upload without the delete: an object of ours that
// reads back damaged stays where it is and the upload fails (ErrDamaged).
// A caller that puts events in tail objects because the only other object
// that holds them is itself damaged (the uploader's bridge of a damaged
// segment object) uses it: an existing tail object under the key may be
// the last intact-enough witness of those events, and a failed put after
// its delete would leave none.
func UploadKeeping(ctx context.Context, b Putter, src RangeReader, batch Batch) error {
	return upload(ctx, b, src, batch, nil, func() error { return errKept })
}

// upload is Upload; afterPut, when set, runs after every put that the
// bucket accepted, concurrently with that put's read-back (writer fencing:
// the HEAD that must follow the put need not wait for the read-back). Its
// error fails the upload; a read-back error wins over it, and a round that
// puts again runs it again, so a nil result means afterPut succeeded after
// the put of the bytes that read back intact. keep, when set, runs before
// a damaged object of ours is deleted: its error keeps the object and
// fails the upload (UploadKeeping).
func upload(ctx context.Context, b Putter, src RangeReader, batch Batch, afterPut, keep func() error) error {
	if err := checkBatch(batch); err != nil {
		return &UploadError{Key: batch.Key, Err: err}
	}
	data, err := src.ReadRange(batch.Segment, batch.Start, batch.Len())
	if err != nil {
		return &UploadError{Key: batch.Key, Err: fmt.Errorf("read segment %d bytes [%d,%d): %w", batch.Segment, batch.Start, batch.End, err)}
	}
	if int64(len(data)) != batch.Len() {
		return &UploadError{Key: batch.Key, Err: fmt.Errorf("%w: read %d bytes of segment %d, want %d", ErrBadBatch, len(data), batch.Segment, batch.Len())}
	}
	sum, err := localseg.VerifySegment(batch.Segment, data, batch.FirstSeq)
	if err != nil {
		return &UploadError{Key: batch.Key, Err: fmt.Errorf("verify local bytes: %w", err)}
	}
	if sum.Events == 0 || sum.FirstSeq != batch.FirstSeq || sum.LastSeq != batch.LastSeq {
		return &UploadError{Key: batch.Key, Err: fmt.Errorf("%w: bytes hold events %d..%d (%d events), key names %d..%d",
			ErrBadBatch, sum.FirstSeq, sum.LastSeq, sum.Events, batch.FirstSeq, batch.LastSeq)}
	}
	// Two rounds: a damaged object of ours found under the key (by its
	// size at the put, or by the read-back) is deleted and put once more.
	for round := 0; round < 2; round++ {
		if err = putReadBack(ctx, b, batch.Key, data, batch.Epoch, afterPut); err == nil || errors.Is(err, blobtier.ErrConflict) || !errors.Is(err, blobtier.ErrCorrupt) {
			break
		}
		// Our own object (its metadata names these bytes) holds damaged
		// ones: delete it so the next put lands them again. Not a second
		// writer; if it stays damaged the batch fails and its events ship
		// on the next pass.
		err = fmt.Errorf("%w: the object reads back damaged (%v)", ErrDamaged, err)
		if keep != nil {
			if berr := keep(); berr != nil {
				err = fmt.Errorf("%w; not deleted: %v", err, berr)
				break
			}
		}
		if derr := b.Delete(ctx, batch.Key); derr != nil {
			err = fmt.Errorf("%w; deleting it failed, the next pass deletes it: %v", err, derr)
			break
		}
	}
	if err != nil {
		return &UploadError{Key: batch.Key, Err: err}
	}
	return nil
}

// putReadBack creates key and reads it back: success only when the bucket
// returns exactly data. A read-back damaged on the way looks like a damaged
// object, so a damaged read is read once more. afterPut (optional) runs
// once the put succeeded, beside the read-back; both must succeed.
func putReadBack(ctx context.Context, b Putter, key string, data []byte, epoch uint64, afterPut func() error) error {
	if err := b.PutIfAbsent(ctx, key, data, epoch); err != nil {
		return err
	}
	var after chan error
	if afterPut != nil {
		after = make(chan error, 1)
		go func() { after <- afterPut() }()
	}
	err := readBack(ctx, b, key, data)
	if after != nil {
		if aerr := <-after; err == nil {
			err = aerr
		}
	}
	return err
}

func readBack(ctx context.Context, b Putter, key string, data []byte) error {
	var err error
	for try := 0; try < 2; try++ {
		var got []byte
		if got, _, err = b.Get(ctx, key); err == nil && !bytes.Equal(got, data) {
			err = fmt.Errorf("%w: read back other bytes than were put", blobtier.ErrCorrupt)
		}
		if !errors.Is(err, blobtier.ErrCorrupt) {
			break
		}
	}
	return err
}

func checkBatch(b Batch) error {
	switch {
	case b.LastSeq < b.FirstSeq || b.FirstSeq == 0:
		return fmt.Errorf("%w: sequences %d..%d", ErrBadBatch, b.FirstSeq, b.LastSeq)
	case b.Start < 0 || b.End <= b.Start:
		return fmt.Errorf("%w: byte range [%d,%d)", ErrBadBatch, b.Start, b.End)
	case b.Len() > blobtier.MaxObjectBytes:
		return fmt.Errorf("%w: %d bytes, above the %d-byte object limit", ErrBadBatch, b.Len(), blobtier.MaxObjectBytes)
	case b.Key != blobtier.TailKey(b.Shard, b.FirstSeq, b.LastSeq):
		return fmt.Errorf("%w: key %q does not name shard %d sequences %d..%d", ErrBadBatch, b.Key, b.Shard, b.FirstSeq, b.LastSeq)
	}
	return nil
}
