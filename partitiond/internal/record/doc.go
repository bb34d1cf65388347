// Package record is partitiond's boundary to the Wire v2 record encoding
// (WIRE-V2 section 7.2): the few facts the log needs from one encoded record
// (where its offset and partition fields sit, its key, whether it is a
// tombstone, its timestamp, producer fields and transactional markers), and
// the walk over a record set ([u32 big-endian length][record bytes] repeated).
//
// The log depends on the Inspector interface only. The implementation, Wire,
// is backed by libs/wire's zero-copy RecordView, so there is one record parser
// in the code base. Records are stored exactly as they arrive, with the
// offset (and partition) written in place, so a fetch is a concatenation of
// stored bytes.
//
// Tombstones: a record whose key is present and whose payload is empty is a
// tombstone (a delete marker for its key under the compact cleanup policy).
// A record without a key is never a tombstone.
package record
