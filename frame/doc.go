// Package frame is the bucket's wire format: the codec of the frames that
// segment files, segment objects and tail objects are made of, laid end to
// end (docs/FORMAT.md §2). A frame is a 12-byte header, all little-endian
// (magic 0xE5DB0001, body length, CRC-32 IEEE of the body), followed by the
// body: the compact JSON of one of four variants (Event, ConsumerCreate,
// Ack, ConsumerDelete), byte-identical to serde_json's compact writer.
// Writers produce exactly that canonical layout; readers accept any valid
// JSON of a known variant and ignore unknown fields (FORMAT.md §2.3, §2.4).
//
// The package is a leaf: it imports nothing of this module, so the store
// (localseg), the cold load, the shipper and the tools share one codec.
//
// # Verifying segment images
//
// VerifySegment checks a whole segment image: every frame's magic, length,
// CRC and body (valid JSON of a known variant), and that Event sequences
// run consecutively. Verifier makes exactly those checks on an image that
// arrives a piece at a time (a GET's bytes as they come in), each frame as
// soon as its bytes are present, and ends with VerifySegment's result for
// the whole image: the same summary or the same error, whatever the pieces
// (verify.go; a differential test and a fuzz target hold it to that).
package frame
