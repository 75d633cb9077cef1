package localseg

import "io"

// SetUnsafeRetryFsyncForTest turns on the broken behaviour the poison rule
// forbids (retry a failed fsync once and acknowledge when the retry
// succeeds), for the RED control test in package localseg_test.
func SetUnsafeRetryFsyncForTest(s *Store) { s.unsafeRetryFsync.Store(true) }

// ReplayRunsForTest reports how many replays (at open or building the read
// index) the store ran.
func ReplayRunsForTest(s *Store) int64 { return s.replayRuns.Load() }

// EncodeCheckpointForTest encodes a checkpoint.json (with a valid crc32), so
// a test can forge one that is self-consistent but wrong.
func EncodeCheckpointForTest(eventCount, activeID uint64, activeLen int64, consumers map[string]uint64) []byte {
	c := checkpoint{EventCount: eventCount, ActiveSegmentID: activeID, ActiveLen: activeLen, Consumers: consumers}
	return c.encode()
}

// walkStrict replays data, the bytes [base, base+len(data)) of segment id,
// every one of which must belong to a valid frame, through the scanner the
// store's index build and full replay use (the fuzz test checks it against
// walkTail).
func (r *replay) walkStrict(id uint64, data []byte, base int64) error {
	open := func(uint64) (io.ReaderAt, func(), error) {
		return offsetReaderAt{data, base}, func() {}, nil
	}
	return r.replayRanges(open, nil, []segRange{{id: id, from: base, to: base + int64(len(data))}}, nil)
}

// offsetReaderAt reads b as the bytes of a file from offset base on.
type offsetReaderAt struct {
	b    []byte
	base int64
}

func (o offsetReaderAt) ReadAt(p []byte, off int64) (int, error) {
	off -= o.base
	if off < 0 || off > int64(len(o.b)) {
		return 0, io.EOF
	}
	n := copy(p, o.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// SkipSegmentDigestForTest makes replays trust index files without hashing
// their segments (the RED control of the digest check) until the returned
// function is called.
func SkipSegmentDigestForTest() (restore func()) {
	skipSegmentDigest.Store(true)
	return func() { skipSegmentDigest.Store(false) }
}

// PreallocFailuresForTest reports how many spare preparations and segment
// preallocations failed and were done without.
func PreallocFailuresForTest(s *Store) int64 { return s.preallocFailures.Load() }

// TxWindowLenForTest reports how many transaction ids the store's window
// holds.
func TxWindowLenForTest(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txns.Len()
}
