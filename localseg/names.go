package localseg

import (
	"path/filepath"
	"strings"
)

// Predicates on a shard directory's file names, so that no package outside
// localseg spells them (docs/FORMAT.md §3.1). Each takes a base name.

// IsStoreFile reports whether base makes its directory a store (IsStore): a
// segment file (or a file named like one), the reclaim manifest, the
// checkpoint or a segment index file.
func IsStoreFile(base string) bool {
	return strings.HasPrefix(base, segPrefix) || base == manifestName || base == checkpointName || base == jumpsName || IsIndexFile(base)
}

// IsCheckpointFile reports whether base is the checkpoint (a cache the
// store rewrites at open).
func IsCheckpointFile(base string) bool { return base == checkpointName }

// IsIndexFile reports whether base is a segment index file (derived from
// its segment, rebuilt when missing).
func IsIndexFile(base string) bool { return strings.HasSuffix(base, segIdxSuffix) }

// IsTempFile reports whether base is a temporary of a durable replace.
func IsTempFile(base string) bool { return strings.HasSuffix(base, tmpSuffix) }

// IsBucketRecordFile reports whether base is the bucket record.
func IsBucketRecordFile(base string) bool { return base == bucketRecordName }

// OwnerPath is the path of dir's fencing record (owner.json's place), for
// tools and tests that read a directory's files as bytes.
func OwnerPath(dir string) string { return filepath.Join(dir, ownerName) }
