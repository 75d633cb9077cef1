package shipper

import (
	"maps"
	"slices"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// The store's record of recent consumer deletes (localseg
// Snapshot.Deleted), the source of the cursor object's tombstones
// (docs/FORMAT.md §6.6), lives in memory: a process that deleted a
// consumer and stopped before a cursor object write carried the tombstone
// leaves the next start without it. When the object still lists the
// consumer, the next write tombstones it anyway (tailbatch's tombstones
// function); when it does not (the consumer was created and deleted between
// two writes, or the object is damaged and rebuilt), nothing would, and a
// restore replays a ConsumerCreate that reached the bucket in a sealed
// segment while its ConsumerDelete did not: the consumer comes back. So at
// start the owner reads its own consumer frames positioned at or after the
// object's shipped_through event (the rebuilt position when the object is
// damaged or absent) and recalls every consumer deleted there, not created
// again and not already named by the object.

// deleteRecaller is the optional part of a Store that takes recalled
// deletes (*localseg.Store has it).
type deleteRecaller interface {
	RecallDeleted(name string, at uint64)
}

// recallDeletes recalls into the store the consumers deleted in the local
// frames positioned at or after event from that cur neither lists nor
// tombstones.
func (s *Shipper) recallDeletes(from uint64, cur tailbatch.Cursor, snap localseg.Snapshot) error {
	rc, ok := s.store.(deleteRecaller)
	if !ok {
		return nil
	}
	runs, err := s.consumerRunsFrom(from, snap.Segments)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(runs)) {
		r := runs[name]
		_, live := snap.Consumers[name]
		_, listed := cur.Consumers[name]
		_, tomb := cur.Deleted[name]
		if !r.reset || r.created || live || listed || tomb {
			continue
		}
		rc.RecallDeleted(name, r.at)
	}
	return nil
}
