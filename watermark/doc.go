// Package watermark holds a shard's reclaim watermark in the bucket and the
// contiguous durable watermark of its local segments.
//
// # The reclaim watermark object
//
// Each shard has one object, blobtier.WatermarkKey(shard)
// (noetl.ehdb.rw.<shard:08x>), whose body is exactly
//
//	{"seq":N,"segment":M,"v":K}
//
// Every event at or below N and every segment at or below M is reclaimed,
// or about to be: cold loads and non-owner reads skip them, so a reclaim that
// crashes after committing the mark leaves only orphans that no reader
// looks at. An optional "durable_seq":D (written only when D > N; absent or
// below N it reads as N, see Mark.Durable) is the committed durable end:
// every event at or below D is in a durable segment of the shard's
// lineage, and tail cleanup deletes only tail objects at or below it.
// AdvanceDurable moves it up by compare-and-swap; Advance keeps it; Repair
// writes the durable end its caller passes. K grows by one with every write so that no two writes are
// byte-identical (an S3 ETag is the MD5 of the content). Decode is strict
// about the three fields (present, non-negative integers, one object and
// nothing after it) and ignores unknown ones. An absent object is the zero
// mark: nothing reclaimed.
//
// # Monotonic
//
// Advance never moves the mark backward, also under concurrent writers (nor
// does AdvanceDurable move durable_seq backward): it
// reads the mark and its version token, returns the stored mark when it
// already covers the target, and otherwise writes the target by
// compare-and-swap on that token, re-reading and retrying (bounded, with
// jitter) when another writer won. A target that is above the stored mark on
// one coordinate and below it on the other is refused (ErrInconsistent). A
// bucket without compare-and-swap (gocloud's mem:// and file://) is refused
// with blobtier.ErrUnsupported before any request: there a plain put could
// move the mark backward, so shared GC is not offered on them.
//
// # The contiguous durable watermark
//
// Contiguous walks a shard's sealed segments in id order and advances only
// while each one is durable in the bucket, stopping at the first that is not.
// Tail cleanup deletes tail objects at or below it. It is deliberately not a
// maximum over the durable segments: with segments durable / not yet
// uploaded / durable, the maximum would authorise deleting the tail objects
// that hold the only off-box copy of the middle segment's events.
//
// # Crash assumptions and concurrency
//
// The watermark is a single object replaced atomically by the bucket, so a
// crash leaves either the old or the new mark. On S3 and GCS a read takes
// two requests (metadata, then bytes), so a read racing a replacement can
// fail verification; Read tries again a few times (ReadAttempts) before it
// reports corruption. Nothing here is cached:
// every Advance starts from a fresh read, so a restarted process needs no
// state. The functions hold no locks and are safe for concurrent use; the
// bucket must be too.
package watermark
