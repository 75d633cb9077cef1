package shipper

import (
	"context"

	"github.com/bucketlog/bucketlog/tailbatch"
)

// The hooks below drive one part of the shipper by hand, for tests of the
// packages above it (the root package's tests open a Log and then reach
// one pass directly). Production code runs them through the loops.

// ShipTail runs one tail pass (the tail, then the cursor object).
func (s *Shipper) ShipTail(ctx context.Context) error { return s.shipTail(ctx) }

// Maintain runs one maintenance pass: uploads, cleanup, and GC when runGC.
func (s *Shipper) Maintain(ctx context.Context, runGC bool) error { return s.maintain(ctx, runGC) }

// SetReplicatorForTest replaces the tail replicator (a test that stages a
// replicator behind the bucket).
func (s *Shipper) SetReplicatorForTest(r *tailbatch.Replicator) { s.repl = r }
