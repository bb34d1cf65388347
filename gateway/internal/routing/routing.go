// Package routing holds the gateway's pure routing functions: which partition
// a keyed record goes to (spec 4.6, FNV-1a 64 of the key), the round-robin
// counter of unkeyed records and the transaction coordinator shard of a
// transactional id. Group routing lives in libs/groups, shared with
// coordinatord.
package routing

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
