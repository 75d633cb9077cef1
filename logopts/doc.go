// Package logopts resolves the options of bucketlog.Open: the defaults a
// zero field means and the refusals of values no default can repair
// (ErrUsage, before Open touches the disk). Options mirrors
// bucketlog.Options field for field (the root converts one into the other;
// a field added to one and not the other does not compile); the meaning of
// each field is documented on bucketlog.Options.
//
// It holds no state and does no I/O: safe for concurrent use, nothing to
// crash.
package logopts
