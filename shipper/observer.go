package shipper

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/localseg"
)

// Observer is the store's observer for a shipping shard: fsync timings go
// to fsync (the metrics), seals to the seal hook (the uploader's wake-up),
// two separate concerns.
func (c SealSignal) Observer(fsync prometheus.Observer) localseg.Observer {
	return storeObserver{fsync: fsync, sealed: c.Sealed}
}

type storeObserver struct {
	fsync  prometheus.Observer
	sealed func(localseg.SegmentInfo)
}

func (o storeObserver) Fsync(d time.Duration)            { o.fsync.Observe(d.Seconds()) }
func (o storeObserver) Sealed(info localseg.SegmentInfo) { o.sealed(info) }
