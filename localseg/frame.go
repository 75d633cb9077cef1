package localseg

// The frame codec is package frame (docs/FORMAT.md §2). These names keep
// the store's surface whole for its callers: the types are frame's, the
// functions call it.

import (
	"iter"

	"github.com/bucketlog/bucketlog/frame"
)

// Wire format constants (frame.Magic, frame.HeaderSize, frame.MaxBodyLen).
const (
	FrameMagic = frame.Magic
	HeaderSize = frame.HeaderSize
	MaxBodyLen = frame.MaxBodyLen
)

// FrameKind is frame.Kind.
type FrameKind = frame.Kind

// The variants.
const (
	KindEvent          = frame.KindEvent
	KindConsumerCreate = frame.KindConsumerCreate
	KindAck            = frame.KindAck
	KindConsumerDelete = frame.KindConsumerDelete
)

// Frame is frame.Frame.
type Frame = frame.Frame

// CorruptionError is frame.CorruptionError: the store reports a corrupt
// frame with the codec's error.
type CorruptionError = frame.CorruptionError

// SegmentSummary is frame.SegmentSummary.
type SegmentSummary = frame.SegmentSummary

// EncodeFrame is frame.Encode.
func EncodeFrame(dst []byte, f *Frame) ([]byte, error) { return frame.Encode(dst, f) }

// DecodeFrame is frame.Decode.
func DecodeFrame(b []byte) (Frame, int, error) { return frame.Decode(b) }

// Frames is frame.Frames.
func Frames(b []byte) iter.Seq2[Frame, error] { return frame.Frames(b) }

// VerifySegment is frame.VerifySegment.
func VerifySegment(segmentID uint64, b []byte, firstSeq uint64) (SegmentSummary, error) {
	return frame.VerifySegment(segmentID, b, firstSeq)
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
