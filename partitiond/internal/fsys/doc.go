// Package fsys is the narrow file-system interface partitiond's segment log
// writes through, with an adapter onto pebble's vfs.FS.
//
// Production uses vfs.Default (the OS). Tests use vfs.NewCrashableMem (with
// CrashClone to model a power loss that keeps a random part of the unsynced
// data) and vfs/errorfs (fail the k-th operation), so every durability rule
// of the log can be checked without a real crash.
//
// The interface is what the log needs and no more: positional writes
// (pwrite), positional reads (pread), fdatasync, directory fsync after
// create/rename/remove, and a durable truncate for cutting a torn tail.
package fsys
