// Package partition is partitiond's storage engine seen from above: a Node
// (one per partitiond process) owns the node state store (pebble), the
// group-commit syncer, the segment reader cache and a registry of Partition
// values; a Partition is one partition log with the semantics of
// SERVICE-SPEC 4.6: Append with acks and idempotence, Fetch with long-poll,
// ListOffsets, and the lifecycle hooks (create, delete, truncate under a new
// lifecycle epoch) the metad watcher calls. Maintenance (retention,
// compaction, producer-state expiry, checkpoints) runs from Node.Maintain.
//
// The gRPC service, metad watch wiring, Prometheus registration and health
// endpoints plug onto this API; none of them live here.
//
// docs/partitiond-storage.md describes the on-disk format, the durability
// protocol and the decisions behind this package.
package partition
