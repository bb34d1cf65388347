// Package recordtest builds and reads Wire v2 record sets (the
// [u32 big-endian length][record] runs that appends carry and fetches
// return, package record) for partitiond's tests: encode records into a
// set, find each record's offset field in it (what a seglog.Batch
// carries), and parse a fetched set back into records. Every helper fails
// the test on bytes that do not encode or parse, so tests state only what
// they check.
package recordtest
