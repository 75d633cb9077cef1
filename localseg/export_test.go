package localseg

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
