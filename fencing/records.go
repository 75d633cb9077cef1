package fencing

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// SegmentStride is the distance between a cut's fence segment and the new
// epoch's first segment id: a stale writer would need this many seals to
// reach the new owner's ids, so their segment keys never collide.
const SegmentStride = 1 << 20

// Errors.
var (
	// ErrBadRecord: a claim or start record that does not decode, or whose
	// numbers contradict each other.
	ErrBadRecord = errors.New("fencing: malformed claim or start record")
	// ErrBrokenChain: a start record names a predecessor epoch whose start
	// record is missing (records are never deleted, so the bucket was
	// edited by hand or lost objects).
	ErrBrokenChain = errors.New("fencing: the chain of start records is broken")
)

// Claim is the body of `ep.<shard>.<epoch>`: who claimed the epoch. The
// nonce tells the claimant its own claim from another's when the answer to
// its create-if-absent was lost.
type Claim struct {
	Epoch uint64 `json:"epoch"`
	Shard uint32 `json:"shard"`
	Owner string `json:"owner"`
	Nonce string `json:"nonce"`
}

// StartRecord is the body of `eps.<shard>.<epoch>`, the cut: epoch Epoch
// starts at StartSeq and closes PrevEpoch at PrevEndSeq.
type StartRecord struct {
	Epoch        uint64 `json:"epoch"`
	PrevEpoch    uint64 `json:"prev_epoch"`
	PrevEndSeq   uint64 `json:"prev_end_seq"`
	StartSeq     uint64 `json:"start_seq"`
	FenceSegment uint64 `json:"fence_segment"`
	StartSegment uint64 `json:"start_segment"`
	WatermarkSeq uint64 `json:"watermark_seq"`
}

// NewNonce returns 32 random hex characters.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Encode returns the claim's JSON body.
func (c Claim) Encode() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return json.Marshal(c)
}

func (c Claim) check() error {
	switch {
	case c.Epoch == 0:
		return fmt.Errorf("%w: claim of epoch 0", ErrBadRecord)
	case len(c.Nonce) != 32:
		return fmt.Errorf("%w: claim nonce %q is not 32 hex characters", ErrBadRecord, c.Nonce)
	}
	if _, err := hex.DecodeString(c.Nonce); err != nil {
		return fmt.Errorf("%w: claim nonce %q is not hex", ErrBadRecord, c.Nonce)
	}
	return nil
}

// DecodeClaim decodes and checks a claim body.
func DecodeClaim(data []byte) (Claim, error) {
	var c Claim
	if err := decode(data, &c, "epoch", "shard", "nonce"); err != nil {
		return Claim{}, err
	}
	return c, c.check()
}

// NewStartRecord builds the cut of epoch for a predecessor that ended at
// prevEnd, with the fence above every segment id seen (highestSegment,
// and the start segment of every start record seen, which the caller folds
// into highestSegment).
func NewStartRecord(epoch, prevEpoch, prevEnd, highestSegment, watermarkSeq uint64) StartRecord {
	fence := highestSegment + 1
	return StartRecord{
		Epoch: epoch, PrevEpoch: prevEpoch, PrevEndSeq: prevEnd, StartSeq: prevEnd + 1,
		FenceSegment: fence, StartSegment: fence + SegmentStride, WatermarkSeq: watermarkSeq,
	}
}

// Encode returns the start record's JSON body.
func (r StartRecord) Encode() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

func (r StartRecord) check() error {
	bad := func(why string) error {
		return fmt.Errorf("%w: start record of epoch %d: %s", ErrBadRecord, r.Epoch, why)
	}
	switch {
	case r.Epoch == 0:
		return bad("epoch 0 has no start record")
	case r.PrevEpoch >= r.Epoch:
		return bad(fmt.Sprintf("prev_epoch %d is not below the epoch", r.PrevEpoch))
	case r.StartSeq != r.PrevEndSeq+1:
		return bad(fmt.Sprintf("start_seq %d is not prev_end_seq %d + 1", r.StartSeq, r.PrevEndSeq))
	case r.FenceSegment == 0:
		return bad("fence_segment 0")
	case r.StartSegment != r.FenceSegment+SegmentStride:
		return bad(fmt.Sprintf("start_segment %d is not fence_segment %d + %d", r.StartSegment, r.FenceSegment, SegmentStride))
	case r.WatermarkSeq > r.PrevEndSeq:
		return bad(fmt.Sprintf("watermark_seq %d above prev_end_seq %d", r.WatermarkSeq, r.PrevEndSeq))
	}
	return nil
}

// DecodeStartRecord decodes and checks a start record body.
func DecodeStartRecord(data []byte) (StartRecord, error) {
	var r StartRecord
	if err := decode(data, &r, "epoch", "prev_epoch", "prev_end_seq", "start_seq", "fence_segment", "start_segment"); err != nil {
		return StartRecord{}, err
	}
	return r, r.check()
}

// decode unmarshals one JSON object into v and requires the named fields
// to be present (a missing number must not read as 0). Unknown fields are
// allowed: a newer writer may add some.
func decode(data []byte, v any, required ...string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	for _, f := range required {
		if _, ok := fields[f]; !ok {
			return fmt.Errorf("%w: field %q missing", ErrBadRecord, f)
		}
	}
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	return nil
}
