package coldload

import "io/fs"

// Permanent lists the Hydrate errors a retry cannot change: verdicts about
// the target directory or the bucket's data, and a directory the process
// may not write. Every other error (the bucket unreachable or failing, and
// a gap or short history, which a lagging listing can show for a while) may
// pass on retry: Hydrate stages into a temporary directory, so a failed
// attempt leaves nothing a retry trips on.
var Permanent = []error{ErrNotEmpty, ErrWrongShard, ErrEmpty, ErrConflict, ErrCorrupt, ErrWatermarkAhead, fs.ErrPermission}
