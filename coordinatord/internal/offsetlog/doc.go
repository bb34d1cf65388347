// Package offsetlog stores consumer-group state in the __consumer_offsets
// partitions on partitiond and rebuilds it by replay.
//
// Record format (docs/coordinatord.md has the full table). Every record is a
// Wire v2 record (libs/wire) of topic __consumer_offsets with a key and a JSON
// value that always carries "v":1 and "type":
//
//	key group/"<group>"                 type group            registration: selector, expansion, incarnation
//	key group/"<group>"                 type group_tombstone  group deleted (incarnation)
//	key offset/"<group>"/<topic>/<p>    type offset           committed next offset (incarnation)
//	key offset/"<group>"/<topic>/<p>    type offset_tombstone offset dropped (incarnation)
//	key txnmark/"<group>"/"<txn id>"    type txn_offset_mark  partitions a transaction staged offsets of (producer id, epoch)
//	key txnmark/"<group>"/"<txn id>"    type txn_offset_mark_clear  the transaction's mark ended (commit or abort)
//	key owner                           type owner            takeover marker: node and producer epoch
//
// The group name is Go-quoted inside keys so any name maps to one key;
// topic names cannot contain '/' or '"'. The latest record per key wins, as
// under compaction, so replay resolves keys first and only then joins
// offsets to registrations: an offset whose incarnation differs from its
// group's registration (written before a delete) is an orphan. A record
// without "v", with another version, with a value that does not match its
// key, or that does not decode is corrupt: replay stops and reports it, and
// the partition is never served from a partial state.
//
// Writes use an idempotent producer per partition ("coordinatord/<topic>/<p>")
// whose epoch is the metadata revision at takeover; the takeover marker is
// written before replay, so partitiond fences a previous owner's later writes
// (stale_producer_epoch) and replay sees everything that owner wrote.
package offsetlog
