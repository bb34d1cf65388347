// Package syncer is partitiond's node-level group commit: one goroutine that
// collects the partition logs with written-but-unsynced data and fdatasyncs
// them. Appends from every producer of a partition, and from every partition
// of the node, that arrive while a sync is running are covered together by
// the next one, which starts as soon as the running sync finishes: there is
// no timed linger, so an idle node syncs a lone append at once.
//
// When several logs are pending, their syncs run in parallel (bounded), so
// one slow file does not delay acknowledgements on the others.
package syncer
