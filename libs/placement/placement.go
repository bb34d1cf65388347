// Package placement holds the pure rules every role and client must apply
// the same way, so each is written once:
//
//   - where a keyed record goes: FNV-1a 64 of the key modulo the partition
//     count (spec 4.6 hash_key), and the round-robin counter of unkeyed ones;
//   - where a group's state lives: FNV-1a 32 of the group name modulo the
//     __consumer_offsets partition count (libs/groups maps that partition to
//     a coordinatord);
//   - where a transactional id's state lives: FNV-1a 32 modulo the shard
//     count;
//   - where a group read starts (spec 4.5 and 4.6): see StartOffset.
//
// The hashes are fixed forever: changing one would move keys, groups or
// transactions away from their stored state.
package placement

import "sync/atomic"

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
	offset32 = 2166136261
	prime32  = 16777619
)

// fnv64a hashes b without allocating (hash/fnv would need a Hash value per
// call on the hot path).
func fnv64a(b []byte) uint64 {
	h := uint64(offset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime64
	}
	return h
}

func fnv32a(s string) uint32 {
	h := uint32(offset32)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= prime32
	}
	return h
}

// KeyPartition is the hash_key partition of a record key: FNV-1a 64 of the
// key modulo the partition count. n must be positive.
func KeyPartition(key []byte, n int32) int32 {
	return int32(fnv64a(key) % uint64(n))
}

// KeyPartitionString is KeyPartition for a string key, without a copy.
func KeyPartitionString(key string, n int32) int32 {
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	return int32(h % uint64(n))
}

// GroupPartition is the __consumer_offsets partition holding group among n
// partitions. n must be positive.
func GroupPartition(group string, n int32) int32 {
	return int32(fnv32a(group) % uint32(n))
}

// TxnShard is the transaction coordinator shard of a transactional id.
func TxnShard(id string, shards uint32) uint32 {
	if shards == 0 {
		return 0
	}
	return fnv32a(id) % shards
}

// RoundRobin hands out partitions in turn for unkeyed records. It is safe
// for concurrent use; one counter per topic keeps topics independent.
type RoundRobin struct{ n atomic.Uint64 }

// Next returns the next partition in [0, n). n must be positive.
func (r *RoundRobin) Next(n int32) int32 {
	return int32((r.n.Add(1) - 1) % uint64(n))
}

// Start is what decides where a group read (CONSUME, STREAM) begins on one
// partition.
type Start struct {
	// Committed is the group's committed offset (the next offset to read),
	// if HasCommitted.
	Committed    uint64
	HasCommitted bool
	// Requested is the offset the request names, if HasRequested.
	Requested    uint64
	HasRequested bool
}

// Offset returns where the read starts: the later of the committed and the
// requested offset (spec 4.6: the committed offset wins "when the request
// offset is lower", so a consumer polling with last delivered + 1 between
// commits moves on instead of re-reading from its last commit). ok is false
// when neither exists; the caller then applies autoOffsetReset (latest: the
// LIST_OFFSETS latest value; earliest: 0), the tail of spec 4.5's
// start-offset precedence.
func (s Start) Offset() (off uint64, ok bool) {
	switch {
	case s.HasCommitted && s.HasRequested:
		return max(s.Committed, s.Requested), true
	case s.HasCommitted:
		return s.Committed, true
	case s.HasRequested:
		return s.Requested, true
	}
	return 0, false
}
