package wire

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Benchmarks of the batch hot paths: 1,000 records with 100 B and 1 KiB
// payloads, per compression. MB/s is measured against the uncompressed batch
// size (the CBV2 payload), so the figures of different compressions compare
// the same work. Run with
//
//	go test -run '^$' -bench 'Batch' -benchmem ./wire/

const benchRecords = 1000

var benchPayloadSizes = []int{100, 1024}

// benchWords make the free-text part of benchmark payloads.
var benchWords = []string{"order", "created", "shipped", "customer", "amount", "warehouse", "north", "south",
	"priority", "standard", "express", "invoice", "paid", "pending", "refund", "item", "quantity", "discount",
	"coupon", "address", "city", "berlin", "lisbon", "osaka", "lima", "note", "gift", "wrap", "fragile", "return"}

// benchPayload returns a JSON-ish event of exactly n bytes: random ids and
// amounts and a free-text note of random words, compressible like real event
// data (about 3:1 with lz4 at 1 KiB), neither all zeros nor noise.
func benchPayload(rng *rand.Rand, n int) []byte {
	b := fmt.Appendf(nil, `{"order":%d,"customer":"c-%04d","amount":%d.%02d,"status":"created","note":"`,
		rng.Uint32(), rng.IntN(10000), rng.IntN(100000), rng.IntN(100))
	for len(b) < n-2 {
		b = append(append(b, benchWords[rng.IntN(len(benchWords))]...), ' ')
	}
	return append(b[:n-2], `"}`...)
}

func benchRecordsOf(size int) []Record {
	rng := rand.New(rand.NewPCG(7, uint64(size)))
	recs := make([]Record, benchRecords)
	for i := range recs {
		recs[i] = Record{
			Payload:    benchPayload(rng, size),
			Timestamp:  1_760_000_000_000 + int64(i),
			ProducerID: "producer-0007",
			SeqNum:     uint64(i + 1),
			Epoch:      3,
			Key:        fmt.Sprintf("customer-%04d", rng.IntN(10000)),
		}
	}
	return recs
}

var benchHeader = BatchHeader{Idempotent: true, Topic: "orders", Partition: 3, Acks: "all", BatchStart: 1, BatchEnd: benchRecords}

func encodeBenchBatch(b *testing.B, dst []byte, recs []Record) []byte {
	var bb BatchBuilder
	if err := bb.Reset(dst, benchHeader); err != nil {
		b.Fatal(err)
	}
	for i := range recs {
		if err := bb.Add(&recs[i]); err != nil {
			b.Fatal(err)
		}
	}
	out, err := bb.Bytes()
	if err != nil {
		b.Fatal(err)
	}
	return out
}

var benchFrameHeader = Header{Kind: KindRequest, Command: 10, RequestID: 1}

// benchEachCompression runs bench for every payload size and compression
// with the records, their encoded batch and its frame; MB/s counts the
// batch. b.Loop in bench starts the timer.
func benchEachCompression(b *testing.B, bench func(b *testing.B, c *Codec, recs []Record, batch, frame []byte)) {
	for _, size := range benchPayloadSizes {
		recs := benchRecordsOf(size)
		for _, comp := range AllCompressions {
			b.Run(fmt.Sprintf("%s/%dB", comp, size), func(b *testing.B) {
				c := &Codec{Compression: comp}
				batch := encodeBenchBatch(b, nil, recs)
				frame, _ := c.AppendFrame(nil, benchFrameHeader, batch)
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				bench(b, c, recs, batch, frame)
			})
		}
	}
}

// BenchmarkBatchEncode: Record structs -> CBV2 batch -> compressed frame with
// CRC32C, into reused buffers.
func BenchmarkBatchEncode(b *testing.B) {
	benchEachCompression(b, func(b *testing.B, c *Codec, recs []Record, batch, frame []byte) {
		for b.Loop() {
			batch = encodeBenchBatch(b, batch[:0], recs)
			var err error
			if frame, err = c.AppendFrame(frame[:0], benchFrameHeader, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(frame))/float64(len(batch)), "ratio")
	})
}

// BenchmarkBatchDecode: frame -> CRC32C check -> decompress into a reused
// buffer -> ParseBatch (one validation pass over every record, zero copy).
func BenchmarkBatchDecode(b *testing.B) {
	benchEachCompression(b, func(b *testing.B, c *Codec, _ []Record, batch, frame []byte) {
		scratch := make([]byte, len(batch))
		for b.Loop() {
			f, err := c.DecodeFrame(frame, scratch)
			if err != nil {
				b.Fatal(err)
			}
			v, err := ParseBatch(f.Payload)
			if err != nil || v.RecordCount() != benchRecords {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecords), "ns/record")
	})
}

// BenchmarkBatchIterate: walk a validated batch with the zero-copy iterator,
// reading what a log needs per record.
func BenchmarkBatchIterate(b *testing.B) {
	for _, size := range benchPayloadSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			batch := encodeBenchBatch(b, nil, benchRecordsOf(size))
			v, _ := ParseBatch(batch)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			var sink uint64
			for b.Loop() {
				it := v.Records()
				for rec, ok := it.Next(); ok; rec, ok = it.Next() {
					ts, _ := rec.Timestamp()
					_, seq, ep, _ := rec.Producer()
					k, _ := rec.Key()
					sink += uint64(ts) + seq + uint64(ep) + uint64(len(k)+len(rec.Payload())+rec.OffsetPos())
				}
			}
			_ = sink
		})
	}
}

// BenchmarkBatchAssignOffsets: a broker stamping offsets in place.
func BenchmarkBatchAssignOffsets(b *testing.B) {
	batch := encodeBenchBatch(b, nil, benchRecordsOf(100))
	v, _ := ParseBatch(batch)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	base := uint64(0)
	for b.Loop() {
		base = v.AssignOffsets(base)
	}
}

// BenchmarkBatchConcat: a consumer fetch re-encoding stored records into a
// new batch by concatenation.
func BenchmarkBatchConcat(b *testing.B) {
	for _, size := range benchPayloadSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			batch := encodeBenchBatch(b, nil, benchRecordsOf(size))
			v, _ := ParseBatch(batch)
			section := v.RecordsSection()
			out := make([]byte, 0, len(batch))
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				var bb BatchBuilder
				bb.Reset(out[:0], BatchHeader{Topic: "orders", Partition: 3, Acks: "1"})
				if err := bb.AppendRecords(section); err != nil {
					b.Fatal(err)
				}
				out, _ = bb.Bytes()
			}
		})
	}
}

// BenchmarkDecodeBatchStructs: the convenience decoder into Record structs.
func BenchmarkDecodeBatchStructs(b *testing.B) {
	batch := encodeBenchBatch(b, nil, benchRecordsOf(100))
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRequest: a CRQ2 command payload with a handful of fields.
func BenchmarkDecodeRequest(b *testing.B) {
	r := Request{Fields: []Field{{"topic", "orders"}, {"partition", "3"}, {"offset", "1000"}, {"member", "m-1"},
		{"group", "g"}, {"isolation", "read_committed"}, {"batch", "8192"}, {"wait_ms", "100"}}}
	p, _ := r.AppendTo(nil)
	var dst Request
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if err := dst.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRecordShapes are the records of the per-record encode and decode
// benchmarks: 1,000 × 100 B as `strata bench` sends them (payload and
// timestamp, the batch header's topic) and as an idempotent producer with
// keys sends them.
func benchRecordShapes() map[string][]Record {
	load := make([]Record, benchRecords)
	payload := benchPayload(rand.New(rand.NewPCG(7, 100)), 100)
	for i := range load {
		load[i] = Record{Payload: payload, Timestamp: 1_760_000_000_000}
	}
	return map[string][]Record{"load": load, "producer": benchRecordsOf(100)}
}

// BenchmarkRecordEncode: Record structs -> CBV2 batch through
// BatchBuilder.Add, into a reused buffer; ns/record is the client's encode
// cost per record.
func BenchmarkRecordEncode(b *testing.B) {
	for _, name := range []string{"load", "producer"} {
		recs := benchRecordShapes()[name]
		b.Run(name+"/100B", func(b *testing.B) {
			buf := encodeBenchBatch(b, nil, recs)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = encodeBenchBatch(b, buf[:0], recs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecords), "ns/record")
		})
	}
}

// BenchmarkDecodeBatchOwned: a client decoding a CONSUME reply it owns into
// Record structs; ns/record is the client's decode cost per record.
func BenchmarkDecodeBatchOwned(b *testing.B) {
	for _, name := range []string{"load", "producer"} {
		batch := encodeBenchBatch(b, nil, benchRecordShapes()[name])
		b.Run(name+"/100B", func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeBatchOwned(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecords), "ns/record")
		})
	}
}
