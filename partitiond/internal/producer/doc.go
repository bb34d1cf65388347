// Package producer holds a partition's idempotent-producer state: per
// producer id the current epoch, the last sequence number and the offsets of
// the last WindowSize batches, and the rules of SERVICE-SPEC 4.6 that decide
// whether a batch is new, a retry of a stored batch, out of order or fenced.
//
// Rules (a batch carries producer id, epoch and the sequence range
// base..last; base 0 disables dedup and never reaches this package):
//
//   - First batch of an unknown producer (or of a producer whose state
//     expired after the TTL of inactivity): base must be 1.
//   - Same epoch: base = last+1 appends; a batch equal (base and last) to one
//     of the last WindowSize batches is a duplicate and answers with the
//     stored offsets; a batch entirely at or below last but not in the window
//     is errcode.DuplicateSequence (already stored, offsets unknown); any
//     other base is errcode.OutOfOrderSequence (gap or overlap).
//   - Higher epoch: fences the old session; base may restart at 1 (or
//     continue at last+1); the window starts afresh.
//   - Lower epoch: errcode.StaleProducerEpoch with producer, current, got.
//
// The window holds five batches because five requests in flight is the
// idempotence maximum of Kafka-style clients: a retry of any in-flight batch
// after a lost response (or a restart) is recognised instead of being
// answered out-of-order, which clients treat as retriable and which then
// duplicates data (Redpanda #3039).
package producer
