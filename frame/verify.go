package frame

import "fmt"

// VerifySegment checks every frame of a segment image (magic, length, CRC,
// JSON) and that Event sequences run consecutively from firstSeq (0: from
// whatever the first event has). Errors are *CorruptionError with
// Segment = segmentID. When the image holds no event, FirstSeq is firstSeq
// and LastSeq is firstSeq-1 (both 0 when firstSeq is 0).
func VerifySegment(segmentID uint64, b []byte, firstSeq uint64) (SegmentSummary, error) {
	c := segCheck{segment: segmentID, next: firstSeq}
	for o := 0; o < len(b); {
		n, body, err := At(b, o)
		if err != nil {
			return c.sum, &CorruptionError{Segment: segmentID, Offset: int64(o), Err: err}
		}
		if err := c.frame(o, body); err != nil {
			return c.sum, err
		}
		o += n
	}
	return c.summary(firstSeq), nil
}

// segCheck is what VerifySegment and Verifier know of the frames checked
// so far: the summary and the sequence the next event must have (0: any).
type segCheck struct {
	segment uint64
	next    uint64
	sum     SegmentSummary
}

// frame checks the body of the frame at offset o, whose header, length and
// CRC At accepted: valid JSON of a known variant, and an Event's sequence
// the next one.
func (c *segCheck) frame(o int, body []byte) error {
	v, ok := ParseFast(body)
	if !ok {
		f, err := DecodeBodySlow(body)
		if err != nil {
			return &CorruptionError{Segment: c.segment, Offset: int64(o), Err: err}
		}
		v = View{Kind: f.Kind, Seq: f.Seq}
	}
	if v.Kind == KindEvent {
		if c.next != 0 && v.Seq != c.next {
			return &CorruptionError{Segment: c.segment, Offset: int64(o),
				Err: fmt.Errorf("%w: expected %d, found %d", ErrSeqGap, c.next, v.Seq)}
		}
		if c.sum.Events == 0 {
			c.sum.FirstSeq = v.Seq
		}
		c.sum.LastSeq = v.Seq
		c.sum.Events++
		c.next = v.Seq + 1
		if c.next == 0 { // sequence space exhausted
			return &CorruptionError{Segment: c.segment, Offset: int64(o), Err: fmt.Errorf("%w: sequence overflow", ErrCorrupt)}
		}
	}
	c.sum.Frames++
	return nil
}

// summary is the summary of a whole image that verified.
func (c *segCheck) summary(firstSeq uint64) SegmentSummary {
	sum := c.sum
	if sum.Events == 0 && firstSeq != 0 {
		sum.FirstSeq, sum.LastSeq = firstSeq, firstSeq-1
	}
	return sum
}

// Verifier is VerifySegment over an image that arrives a piece at a time
// (a segment object as its GET's bytes come in): Advance, called with the
// bytes read so far, checks every frame they hold whole as soon as they do,
// so the checks overlap the download and see the bytes while they are
// still in the core's cache; Finish, with the whole image, checks the rest
// and returns what VerifySegment returns for that image: the same summary,
// or the same error (the same *CorruptionError: segment, offset and cause),
// whatever the pieces were. Every check is VerifySegment's: magic, length,
// CRC and body of every frame, consecutive Event sequences from firstSeq.
//
// A frame is judged only once the bytes that decide it are present: a
// header as soon as its 12 bytes are (a bad magic, a zero or oversized
// length fails at once), the rest once its body is whole; a frame cut by
// the end of the image fails only in Finish. After the first error
// Advance does nothing more and Finish returns that error.
//
// Verifier implements blobtier's Watcher (Reset, Advance) by shape only:
// package frame imports nothing of the module.
type Verifier struct {
	first uint64 // firstSeq
	c     segCheck
	off   int // offset of the first frame not yet checked
	err   error
}

// NewVerifier returns a Verifier of segment segmentID's image whose events
// start at firstSeq (0: whatever the first has), as VerifySegment takes.
func NewVerifier(segmentID, firstSeq uint64) *Verifier {
	return &Verifier{first: firstSeq, c: segCheck{segment: segmentID, next: firstSeq}}
}

// Reset forgets every byte seen: the image starts again (a read of the
// object begins again).
func (v *Verifier) Reset() {
	v.c = segCheck{segment: v.c.segment, next: v.first}
	v.off, v.err = 0, nil
}

// Advance checks the frames prefix holds whole beyond those checked
// already. prefix is the image's first bytes: each call's prefix holds the
// previous call's (the same bytes, unchanged) and perhaps more, until
// Reset. The frames it checked are not checked again by Finish, so those
// bytes must be the image's when Finish is called.
func (v *Verifier) Advance(prefix []byte) {
	if v.err == nil {
		v.run(prefix, false)
	}
}

// Finish checks the image's frames that Advance did not (all of them when
// image is shorter than what Advance saw) and returns VerifySegment's
// result for image.
func (v *Verifier) Finish(image []byte) (SegmentSummary, error) {
	if len(image) < v.off {
		v.Reset()
	}
	if v.err == nil {
		v.run(image, true)
	}
	if v.err != nil {
		return v.c.sum, v.err
	}
	return v.c.summary(v.first), nil
}

// run checks the frames of b from v.off. Unless final, it stops without
// an error at a frame b does not hold whole: fewer than 12 bytes of its
// header, or a valid header whose body runs past b's end. Any other
// verdict of At on such a prefix is the verdict on every longer image: At
// looks at the header alone for the magic and the length cap, and a body
// whole in b is the same body in a longer image.
func (v *Verifier) run(b []byte, final bool) {
	for v.off < len(b) {
		o := v.off
		if !final {
			rest := len(b) - o
			if rest < HeaderSize {
				return
			}
			if n := le32(b[o+4:]); le32(b[o:]) == Magic && n <= MaxBodyLen && int64(n) > int64(rest-HeaderSize) {
				return
			}
		}
		n, body, err := At(b, o)
		if err != nil {
			v.err = &CorruptionError{Segment: v.c.segment, Offset: int64(o), Err: err}
			return
		}
		if err := v.c.frame(o, body); err != nil {
			v.err = err
			return
		}
		v.off = o + n
	}
}
