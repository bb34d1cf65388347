// Package segment holds partitiond's on-disk formats: the stored batch (a
// fixed header with one CRC32C over the whole batch, followed by the Wire v2
// record set exactly as fetched), the sparse offset index and the time index
// files, segment file names, and the scanner that validates batches during
// recovery. It does no I/O policy of its own: the log (package seglog)
// decides when to write, sync, roll and truncate.
//
// Stored batch (all integers big-endian):
//
//	off  size  field
//	0    4     magic 0x53544231 ("STB1")
//	4    4     length of the whole stored batch, header included
//	8    4     CRC32C (Castagnoli) of bytes [12, length)
//	12   2     format version (1)
//	14   2     flags: bit0 idempotent, bit1 transactional, bit2 control
//	16   8     base offset
//	24   4     last offset delta (last offset - base offset)
//	28   4     record count (<= last offset delta + 1; smaller after compaction)
//	32   8     leader epoch
//	40   8     first timestamp (first record's, else append time)
//	48   8     max timestamp (largest record timestamp, else append time)
//	56   8     append time (broker clock, Unix ms)
//	64   8     durable watermark: the log's durable end offset when the batch
//	           was written (recovery uses it to tell a torn tail from
//	           corruption of synced data)
//	72   8     producer epoch
//	80   8     base sequence
//	88   8     last sequence
//	96   2     producer id length n
//	98   n     producer id
//	98+n ...   record set: ([u32 length][Wire v2 record]) x record count,
//	           offsets written in
//
// A fetch returns the record sets of consecutive batches concatenated: no
// re-encoding.
package segment
