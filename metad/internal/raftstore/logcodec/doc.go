// Package logcodec is the on-disk encoding of one Raft log entry in metad's
// log store: a version byte, a CRC32C, the fixed fields (index, term, type,
// appended_at) and the length-prefixed data and extensions. It is pure (bytes
// in, struct out) and kept apart from the store so it can be fuzzed without
// the storage engine.
package logcodec
