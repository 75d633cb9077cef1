package coldload

import (
	"errors"
	"io/fs"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
)

// Transient reports whether an error at start may pass on retry: a bucket
// request that failed (unreachable, failing, timed out), as opposed to a
// verdict about the target directory, the local store or the bucket's data,
// or an error of the local filesystem. It is the one start-up classifier:
// Hydrate's and the takeover's (the root's Open) and the shipper's
// reconcile check (shipper.RetryStartup). A gap or a short history is
// transient (a lagging listing can show one for a while). A verdict is
// never transient, whatever bucket error its chain also holds: a fenced
// writer (fencing.ErrFenced: a newer claim exists, and waiting cannot
// unclaim it), a stale owner's disk or a stale or diverged one (their
// errors are localseg.ErrInvalidState), local corruption, a poisoned
// store, bad configuration. Hydrate stages into a temporary directory, so a
// failed attempt leaves nothing a retry trips on.
func Transient(err error) bool {
	var req *blobtier.ObjectError
	if !errors.As(err, &req) {
		return false
	}
	for _, verdict := range []error{ErrNotEmpty, ErrWrongShard, ErrEmpty, ErrConflict, ErrCorrupt, ErrWatermarkAhead,
		fencing.ErrFenced, localseg.ErrInvalidState, localseg.ErrCorrupt, localseg.ErrPoisoned, affinity.ErrUsage,
		blobtier.ErrCorrupt, blobtier.ErrConflict, blobtier.ErrUnsupported, fs.ErrPermission} {
		if errors.Is(err, verdict) {
			return false
		}
	}
	return true
}
