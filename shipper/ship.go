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
	return s.ship(ctx, sealActive, passExplicit)
}

// Tick is the pass the engine's periodic tick runs, run now: Ship without
// sealing the active segment, with the tick's rule for the cursor object
// (a move of shipped_through alone is written at most once per cursor
// interval). For a log opened without background work that a caller
// drives on its own clock.
func (s *Shipper) Tick(ctx context.Context) (ShipReport, error) {
	return s.ship(ctx, false, passTick)
}

func (s *Shipper) ship(ctx context.Context, sealActive bool, kind passKind) (ShipReport, error) {
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
	if terr := s.shipTailPass(ctx, kind); terr != nil || err != nil {
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
