// Package raftstore holds metad's Raft log and stable store: hashicorp/raft's
// LogStore and StableStore on one pebble database.
//
// Keys are a one-byte prefix and a suffix: log entries live under 'l' followed
// by the big-endian uint64 index (so pebble's byte order is index order and a
// log range is one range delete), stable keys under 's' followed by the key.
// Every write is one pebble batch committed with pebble.Sync: when StoreLogs,
// DeleteRange, Set or SetUint64 return nil the change is on stable storage.
//
// Log entries are encoded by package logcodec, never by gob or msgpack: a
// version byte and a CRC32C, so a torn or foreign value is reported as
// errcode.StorageCorrupt instead of being handed to Raft.
//
// The store is deliberately not a raft.MonotonicLogStore; see docs/metad.md
// ("Raft log store") for why.
package raftstore
