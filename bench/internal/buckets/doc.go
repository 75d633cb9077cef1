// Package buckets holds what the bench's bucket sections share: an
// in-process S3 emulator (gofakes3 on 127.0.0.1, via the engine's
// internal/emulator), a request counter built on blobtier.Observe, the
// plain parallel download that is the restore section's limit, and the
// idle-shard measurement.
//
// Nothing here estimates: the counter sees every request the engine makes
// through the bucket it wraps (blobtier.Observe reports each call once, when
// it ends), and the download really reads and fsyncs every byte it reports.
//
// Crash assumptions: none; everything is scratch, removed by the caller.
//
// Concurrency: Counter is safe for concurrent use (the engine's background
// goroutines report into it while the section reads it). Emulator is as safe
// as internal/emulator. Download runs its own bounded set of goroutines and
// returns after all of them ended.
package buckets
