package sim

import (
	"bytes"
	"context"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// opDamagedPut is issue 12 finding 2's ground, directed: a segment put
// that lands damaged bytes (under our metadata), a read-back that fails
// (so the uploader cannot see the damage and delete the object), then the
// process is killed (no last shipment) and restarts with the disk kept.
// At start, durable means read back intact: the owner must find the
// object damaged, delete it and put it again, so that after the next
// successful ship pass a restore holds everything (with the finding
// reverted the segment counts as durable on its metadata alone, tail
// cleanup deletes its good tail copies and the restore fails).
//
// The bucket is calm otherwise (heal), so that the restore must succeed:
// the damaged object is not at rest damage the run may excuse.
func (r *run) opDamagedPut(ctx context.Context) *violation {
	if r.known[2] || r.w.log == nil {
		return nil
	}
	r.heal()
	put := r.w.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Corrupt, Key: "noetl.ehdb.seg.*", Times: 1})
	get := r.w.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: "noetl.ehdb.seg.*", Times: 1})
	r.stats.Faults["damaged-put"]++
	r.logf("fault damaged segment put, failed read-back")
	for range 2 {
		if v := r.opBatch(ctx); v != nil {
			return v
		}
		if r.w.log == nil {
			return nil
		}
	}
	if v := r.opShip(ctx, true); v != nil {
		return v
	}
	fired := r.w.fb.Fired(put) > 0 && r.w.fb.Fired(get) > 0
	r.w.fb.Remove(put)
	r.w.fb.Remove(get)
	r.logf("  (damaged put and failed read-back fired: %v)", fired)
	r.w.crash(false, 0) // killed: no last shipment
	r.stats.Restarts["crash-after-damaged-put"]++
	r.logf("kill")
	if v, err := r.reopen(ctx, "after a damaged put"); v != nil || err != nil {
		return v
	}
	for range 2 {
		if v := r.opShip(ctx, false); v != nil || r.w.log == nil {
			return v
		}
	}
	return r.opRestore(ctx, false)
}

// refusedKeepsWatermark checks, after an Open refused as a stale or
// diverged disk, that the watermark object is as it was before the Open
// (before holds its bytes then): a damaged watermark is repaired only once
// the start-up checks passed (issue 12 finding 7), so a stale disk's lower
// base never rewrites it.
func (r *run) refusedKeepsWatermark(before []byte, had, damaged bool, err error) *violation {
	if r.known[7] {
		return nil
	}
	switch errClass(err) {
	case "err=stale_disk", "err=diverged":
	default:
		return nil
	}
	after, ok := r.w.raw.Raw(blobtier.WatermarkKey(0))
	if ok != had || !bytes.Equal(after, before) {
		return fail("refused-open-changed-watermark", "an Open refused (%v) rewrote the watermark object (damaged before: %v)", err, damaged)
	}
	return nil
}
