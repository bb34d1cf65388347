// Package statestore is partitiond's node-level state: one pebble instance
// per node holding, per partition, the lifecycle marker and topic config,
// producer-sequence checkpoints, high-watermark checkpoints and the key
// spaces later features use (transaction index, event-sourcing index and
// snapshots).
//
// Key layout (partition numbers are 4-byte big-endian; topic names cannot
// contain '/', so "<topic>/" delimits a topic unambiguously):
//
//	m/<topic>/<partition>                 partition meta (JSON): lifecycle
//	                                      epoch marker, state, log directory,
//	                                      topic config, leader epoch
//	p/<topic>/<partition>/hwm             HWM checkpoint: hwm u64, leader
//	                                      epoch u64, lifecycle epoch u64
//	p/<topic>/<partition>/prodckpt        offset the producer checkpoint
//	                                      covers (state of batches below it)
//	p/<topic>/<partition>/prod/<id>       producer state (package producer)
//	p/<topic>/<partition>/txn/...         reserved: transaction index
//	p/<topic>/<partition>/esidx/...       reserved: event-sourcing aggregate
//	                                      index
//	p/<topic>/<partition>/essnap/...      reserved: event-sourcing snapshots
//
// Everything under p/<topic>/<partition>/ is the partition's data state:
// truncate and delete drop that whole range in the same synced batch that
// writes (or removes) the meta key.
package statestore
