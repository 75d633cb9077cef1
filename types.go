package bucketlog

import (
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/shipper"
)

// The public types. The root owns them as type aliases of the packages
// that define them, so a user imports only this package and a value passes
// to and from the lower packages (tools, tests) without conversion.
type (
	// Event is one event to append: its execution, its transaction and an
	// opaque payload, stored byte for byte.
	Event = localseg.Event
	// Record is a stored event with its sequence.
	Record = localseg.Record
	// Page is a page of records, with the shard's base and tip.
	Page = localseg.Page
	// AppendResult is the outcome of Append.
	AppendResult = localseg.AppendResult
	// PullResult is a consumer's page: its cursor and the records after it.
	PullResult = localseg.PullResult
	// StoreReport says what opening the local store found (replay, torn
	// tail repair).
	StoreReport = localseg.OpenReport
	// FS is the filesystem the store writes through (Options.FS).
	FS = localseg.FS
	// Bucket is an object-store bucket (Options.Bucket).
	Bucket = blobtier.Bucket
	// Ownership is a shard pair: the shard owned and the pool's size.
	Ownership = affinity.Ownership
	// RestoreReport says what Restore (and the hydration of Open) loaded.
	RestoreReport = coldload.Report
	// Status is a shard's operator view (Log.Status).
	Status = shipper.Status
	// RestoreProgress is one progress report of Restore.
	RestoreProgress = coldload.Progress
	// VerifyOptions and VerifyReport are Verify's.
	VerifyOptions = coldload.VerifyOptions
	VerifyReport  = coldload.VerifyReport
)

// ReadResult.ServedBy values.
const (
	ServedByOwnerResident    = affinity.ServedByOwnerResident
	ServedByNonOwnerColdLoad = affinity.ServedByNonOwnerColdLoad
)

// ShardDir is the directory of shard under the root directory dir (the
// Dir of Options and RestoreOptions).
func ShardDir(dir string, shard int) string { return localseg.ShardDir(dir, shard) }
