// Package partitionfake is an in-memory fake of partitiond's
// PartitionService for the tests of the roles that append to or read from
// partitions (coordinatord's offsets log, the gateway), served over real
// mTLS gRPC on loopback.
//
// Every partition is a log of records in memory (offsets assigned in
// place, everything appended counts as committed). Append checks the record
// set and follows the idempotent-producer rules its callers depend on
// (fencing by a higher producer epoch, duplicate retries, sequence gaps);
// Produce is the pipelined stream with in-band errors; Fetch can long-poll;
// ListOffsets reports the log end; Options.Discard keeps nothing (for
// benchmarks). Back doors set up state a test needs: Inject writes a raw
// record, Compact keeps the latest record per key, SetLog fills a
// partition.
//
// Faults go through the embedded fakerpc.Controls: for example
// On("Append", 1, fakerpc.Fail(err)) fails the next append,
// fakerpc.LoseAnswer stores an append but answers an error, and
// On("Produce", 2, InBand(err)) answers the next two appends of a produce
// stream with err in band while the stream goes on.
package partitionfake
