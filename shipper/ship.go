package shipper

import (
	"context"
	"errors"
)

// ShipReport is the outcome of one shipping pass.
type ShipReport struct {
	Shard          int          `json:"shard"`
	Sealed         bool         `json:"sealed"`
	Upload         UploadReport `json:"upload"`
	TailBatches    uint64       `json:"tail_batches"`
	TailRecords    uint64       `json:"tail_records"`
	TailBytes      uint64       `json:"tail_bytes"`
	ShippedThrough uint64       `json:"shipped_through"`
	Tip            uint64       `json:"tip"`
	Segments       int          `json:"segments"`
}

// Ship runs one shipping pass now: seal what is due (everything with
// sealActive), upload sealed segments, ship the tail and the cursor object,
// and clean up superseded tail objects.
func (s *Shipper) Ship(ctx context.Context, sealActive bool) (ShipReport, error) {
	rep := ShipReport{Shard: int(s.shard)}
	var err error
	if sealActive {
		rep.Sealed, err = s.store.Seal()
	} else {
		rep.Sealed, err = s.store.SealIfDue()
	}
	if err != nil {
		s.noteErr(err)
		return rep, err
	}
	before := s.repl.Stats()
	s.maint.Lock()
	rep.Upload, err = s.uploadSealed(ctx)
	s.evictLocked()
	s.maint.Unlock()
	// A segment that cannot upload must not keep the tail from shipping:
	// the tail covers its events meanwhile.
	if terr := s.shipTail(ctx); terr != nil || err != nil {
		return rep, errors.Join(err, terr)
	}
	if !s.o.DisableTailCleanup {
		s.maint.Lock()
		err = s.cleanupLocked(ctx)
		s.maint.Unlock()
		if err != nil {
			return rep, err
		}
	}
	after := s.repl.Stats()
	rep.TailBatches = after.Batches - before.Batches
	rep.TailRecords = after.Records - before.Records
	rep.TailBytes = after.Bytes - before.Bytes
	rep.ShippedThrough = s.repl.ShippedThrough()
	rep.Tip = s.store.Tip()
	if snap, err := s.store.Snapshot(); err == nil {
		rep.Segments = len(snap.Segments)
	}
	return rep, nil
}
