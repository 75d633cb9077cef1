// Package emulator_test is bucketlog's end-to-end suite: every scenario runs
// through the public API (bucketlog.Open, Restore, Verify and the Log's
// methods) against both in-process emulators, gofakes3 (S3) and
// fake-gcs-server (GCS), on 127.0.0.1 only. It holds tests and nothing else,
// so its documentation lives here, in a test file (a non-test file named
// package emulator_test would make the directory a package "emulator").
//
// What each scenario shows, with exact counts:
//
//   - TestBucketTier (issue 3): thousands of events over ~125 segments of
//     4 KiB and two consumers; the bucket alone restores every record byte
//     for byte and both cursors; each sealed byte is put once; the restored
//     store continues the sequence above every segment id the bucket has
//     seen; a non-owner reads the owner's executions by a cold load; a flipped
//     byte or a cut tail in one segment object at rest fails Restore naming
//     the key and shows in Verify.
//   - TestTailReplication, TestSyncAppendIsInTheBucket,
//     TestSyncAppendRefusingBucket (issue 4): the RED control loses exactly
//     the unsealed events; replication loses none; a synchronous append is
//     in the bucket when it returns; a refusing bucket gives ErrNotInBucket
//     after SyncWait, and the event ships once the bucket recovers.
//   - TestReclaimBounded (issue 5): a long run with keep-last-3 retention and
//     a lagging consumer, by explicit passes and by the periodic task; local
//     segments, bucket segments and tail objects stay bounded every round; the
//     bucket alone restores every retained event with the base offset kept.
//   - TestSafetyDurableHoleDurable: segments durable / refused / durable; GC
//     stops at the refused one, the tail objects covering it stay, and a
//     restore recovers every event (with AllowPartial; without it, it stops
//     at the hole and says tail objects cover it), with a RED control.
//   - TestOpenAgainstTheBucket: stale and diverged disks are refused and left
//     unchanged; an empty disk hydrates.
//   - TestBackgroundShipping: eight concurrent writers with the background
//     tasks only, opened by bucket URL; everything ships and restores.
//   - TestBug_*: defects in other packages, isolated; they fail until fixed.
//
// Crash assumptions: "the disk is destroyed" is modelled by deleting the
// store's directory after Close, or by restoring from the bucket while the
// writer is still open (the bucket as it was when the appends returned); no
// test kills the process. Tests do not assert durations except as hang
// guards. TestMain runs goleak: every Log and emulator is closed.
package emulator_test
