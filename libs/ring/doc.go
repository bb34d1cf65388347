// Package ring is the consistent-hash ring that decides which coordinatord
// owns a consumer-group partition or a transaction coordinator shard.
//
// It is pure: the owner of a key depends only on the set of member ids and
// the number of virtual nodes, never on insertion order, so metad, every
// gateway and every coordinatord compute the same owner from the same
// metadata. Adding or removing one member moves only the keys that member
// gains or loses.
//
// Keys the team uses are built by GroupPartitionKey ("__consumer_offsets/<p>")
// and TxnShardKey ("txn/<shard>").
package ring
