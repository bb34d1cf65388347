// Package replica replicates partition logs between partition servers, on
// Kafka's model (leader epochs, ISR, high watermark; KIP-101/279/320 for
// truncation), with metad as the controller.
//
// A Manager holds, for every local partition, the role metad's view gives
// it (Apply):
//
//   - As leader it answers its followers' fetch sessions (Serve): one
//     bidirectional stream per follower, many partitions per stream. Each
//     request carries the follower's durable log end per partition; the
//     leader records it (progress), checks that the follower's log has not
//     diverged (the follower's last batch epoch must end, in the leader's
//     epoch history, at or after the follower's end), and answers with the
//     durable batches after it, long-polling when there are none. The high
//     watermark is the minimum durable end over the ISR (the leader
//     included): the partition's HWM cap. While the ISR is smaller than the
//     effective minimum the HWM does not move. A follower that has not been
//     caught up for MaxLag leaves the ISR, and one that reached the HWM
//     and the start of the leader's epoch (KAFKA-7128) joins it again,
//     each by an ALTER_ISR compare-and-set on the leader epoch through
//     metad; while a change is in flight the HWM counts the larger of the
//     two sets.
//   - As follower it belongs to the fetcher of its leader: one goroutine and
//     one stream per leader, sending the next request only when the
//     previous answer's batches are durable here. Divergence answers make
//     it truncate (to the smaller of the leader's end of the epoch and its
//     own), an offset below the leader's log start makes it skip ahead. The
//     follower's HWM is the leader's, as far as its own log reaches.
//
// Elections are metad's (a partition server's lease lapses or it shuts down
// cleanly; a new leader comes only from the ISR, with the epoch raised).
// Manager only follows the view.
package replica
