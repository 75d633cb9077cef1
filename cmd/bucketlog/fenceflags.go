package main

import "github.com/bucketlog/bucketlog"

// fencingFlags are the writer-fencing flags of the commands that open a
// shard for writing with a bucket (serve, ship, gc).
type fencingFlags struct {
	require, takeover bool
	freshAck          bool
}

// addFencingFlags registers --require-fencing, and --takeover for the
// one-shot writers (oneShot).
func addFencingFlags(f *flagSet, oneShot bool) *fencingFlags {
	ff := &fencingFlags{}
	f.BoolVar(&ff.require, "require-fencing", false, "refuse a bucket that cannot fence writers (no atomic create-if-absent and compare-and-swap: file://, mem://) instead of running unfenced (exit 2)")
	ff.freshAck = true
	if !oneShot {
		f.BoolVar(&ff.freshAck, "fence-fresh-ack", true, "with fencing, an asynchronous append whose last fence check is older than one tick first waits (at most 200 ms) for one HEAD of the next claim, so a resumed stale owner refuses it with nothing written (=false: acknowledge at once)")
	}
	if oneShot {
		f.BoolVar(&ff.takeover, "takeover", false, "when this disk's owner epoch was superseded, move its directory aside (shard-NNNN.fenced-<epoch>) and take the shard over instead of refusing (exit 3)")
	}
	return ff
}

func (ff *fencingFlags) apply(opts *bucketlog.Options) {
	opts.RequireFencing, opts.Takeover, opts.DisableFenceFreshAck = ff.require, ff.takeover, !ff.freshAck
}
