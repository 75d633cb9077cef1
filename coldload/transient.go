package coldload

import (
	"errors"
	"io/fs"

	"github.com/bucketlog/bucketlog/blobtier"
)

// Transient reports whether a Hydrate error may pass on retry: a bucket
// request that failed (unreachable, failing, timed out), as opposed to a
// verdict about the target directory or the bucket's data, or an error of
// the local filesystem. A gap or a short history is transient too (a
// lagging listing can show one for a while). Hydrate stages into a
// temporary directory, so a failed attempt leaves nothing a retry trips on.
func Transient(err error) bool {
	var req *blobtier.ObjectError
	if !errors.As(err, &req) {
		return false
	}
	for _, verdict := range []error{ErrNotEmpty, ErrWrongShard, ErrEmpty, ErrConflict, ErrCorrupt, ErrWatermarkAhead,
		blobtier.ErrCorrupt, blobtier.ErrConflict, blobtier.ErrUnsupported, fs.ErrPermission} {
		if errors.Is(err, verdict) {
			return false
		}
	}
	return true
}
