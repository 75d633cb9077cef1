package metrics

import "github.com/bucketlog/bucketlog/localseg"

// WatchStore makes consumer_lag report the live consumers of store, read
// at scrape time (WatchLag); a snapshot that fails reports none.
func (m *Shard) WatchStore(store interface {
	Snapshot() (localseg.Snapshot, error)
}) {
	m.WatchLag(func() (uint64, map[string]uint64) {
		snap, err := store.Snapshot()
		if err != nil {
			return 0, nil
		}
		return snap.Tip, snap.Consumers
	})
}
