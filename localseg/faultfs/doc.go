// Package faultfs is the test filesystem of localseg: an in-memory
// filesystem that models what a power cut leaves on Linux (MemFS), and a
// wrapper that asks an Injector before every operation whether it fails
// (Wrap). Both implement localseg.FS, so a store under test runs its real
// code paths on them. It is a test helper; nothing in production imports it.
//
// # Durability model (MemFS)
//
// Every file has two images: its current contents, which reads return (the
// page cache), and its durable contents, which survive a crash. The model
// states the crash assumptions the store is tested against:
//
//   - File.Sync and File.Datasync make the file's current contents and size
//     durable. Nothing else does: a write, truncate or allocate that was not
//     followed by a successful sync of the same file is lost in a crash
//     (CrashClone without Torn).
//   - Directory entries (a file's creation, a rename, a removal, a new
//     directory) are durable only after FS.SyncDir of the parent directory.
//     A file whose data was synced but whose entry was not is gone after a
//     crash.
//   - Sector writes are not atomic across sectors: a crash may persist any
//     subset of the 512-byte sectors an unsynced write touched, and an
//     unsynced size change may or may not persist (the new range then reads
//     as zeros where its data did not reach the disk). Directory operations
//     are journaled: a crash may persist any prefix, in order, of the
//     directory operations that were not made durable by SyncDir. CrashClone
//     with Torn draws one such outcome from its seed; the same seed on the
//     same history gives the same outcome.
//   - A failed fsync (one an Injector failed on a MemFS file) does not make
//     the dirty data durable but marks it clean, as Linux does: a later
//     successful fsync returns success without persisting it, while reads
//     still return it. This is the trap behind the store's poison rule.
//   - Lock is exclusive per name within one MemFS and is released by Close.
//     A crash clone holds no locks (the process that held them is dead).
//
// # Fault injection (Wrap)
//
// Wrap(fs, inj) consults inj.MaybeError before each operation with an Op
// naming its kind, path, offset and length. A non-nil error fails the
// operation with that error inside an *os.PathError, so the store sees what
// Linux would give it (errors.Is(err, syscall.ENOSPC) holds for ENOSPC). An
// injected write error is a short write: the first half of the buffer is
// written and the error returned, as write(2) does when the disk fills in the
// middle of a request. An injected fsync error on a MemFS file drops the
// dirty data as described above. Errors from the crash injector (CrashAt)
// change nothing: the process is dead, and the test takes a CrashClone of the
// MemFS underneath.
//
// Write-class operations (the crash points of a sweep) are OpCreate (an open
// with O_CREATE), OpWrite, OpSync, OpSyncDir, OpRename, OpRemove, OpTruncate,
// OpAllocate and OpMkdir.
//
// # Concurrency
//
// MemFS, its files, the wrapped FS and every Injector in this package are
// safe for concurrent use. MemFS serialises every operation on one mutex, so
// concurrent operations take effect in some total order.
package faultfs
