package wire

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/snappy/xerial"
	"github.com/pierrec/lz4/v4"
	"github.com/strataio/strata/libs/errcode"
)

// The committed seed corpora under testdata/fuzz are generated from our own
// encoders and the decoded values of WIRE-V2 section 11 (so the vector seeds
// are byte-identical to the shared vectors without copying the shared files),
// plus edge cases. Regenerate with
//
//	STRATA_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds ./wire/
//
// Crashers the fuzzer finds land in the same directories and stay there.

type seed struct {
	name string
	vals []any
}

func mustB(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// vectorSeeds re-creates the section 11 vectors with our encoders.
func vectorSeeds() map[string][]byte {
	neg := NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionNone}}
	frame := func(c Compression, id uint64, p string) []byte {
		return mustB((&Codec{Compression: c}).AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: id}, []byte(p)))
	}
	req := Request{Fields: []Field{{"topic", "events"}, {"key", "aggregate-7"}, {"expectedVersion", "3"}, {"eventType", "Updated"},
		{"schemaVersion", "2"}, {"metadata", `{"trace":"a b"}`}, {"message", `{"value":"x y"}`}}}
	batch := func(v uint16) []byte {
		b := Batch{BatchHeader: BatchHeader{Idempotent: true, Topic: "events", Partition: 2, Acks: "all", BatchStart: 9, BatchEnd: 9},
			Records: []Record{expectedFullRecord(v)}}
		return mustB(b.AppendTo(nil))
	}
	return map[string][]byte{
		"negotiation_request_all_compressions": mustB(neg.AppendTo(nil)),
		"negotiation_response_lz4":             NegotiationResponse{Version: 2, Compression: CompressionLZ4}.AppendTo(nil),
		"uncompressed_publish_frame":           frame(CompressionNone, 42, "hello"),
		"gzip_publish_frame":                   frame(CompressionGzip, 77, compressionPhrase),
		"snappy_publish_frame":                 frame(CompressionSnappy, 77, compressionPhrase),
		"lz4_publish_frame":                    frame(CompressionLZ4, 77, compressionPhrase),
		"append_stream_command_payload":        mustB(req.AppendTo(nil)),
		"full_record_batch_v2":                 batch(2),
		"full_record_batch_v3":                 batch(3),
		"structured_availability_error": mustB(AppendError(nil,
			errcode.ReplicationUnavailable.New("replication quorum unavailable", "reason", "replica timeout", "offset", "7"))),
	}
}

func fuzzSeeds() map[string][]seed {
	v := vectorSeeds()
	out := map[string][]seed{}
	add := func(target, name string, vals ...any) { out[target] = append(out[target], seed{name, vals}) }
	frames := []string{"uncompressed_publish_frame", "gzip_publish_frame", "snappy_publish_frame", "lz4_publish_frame"}

	// Frame header and full frames.
	for i, n := range frames {
		add("FuzzParseHeader", n, v[n])
		add("FuzzDecodeFrame", n, v[n], uint8(i))
		add("FuzzDecodeFrame", n+"_wrong_compression", v[n], uint8((i+1)%4))
	}
	negFrame := mustB((&Codec{}).AppendFrame(nil, Header{Kind: KindNegotiationRequest, Command: 46}, v["negotiation_request_all_compressions"]))
	negFrameB := mustB((&Codec{Table: TableB}).AppendFrame(nil, Header{Kind: KindNegotiationRequest, Command: 47}, v["negotiation_request_all_compressions"]))
	add("FuzzParseHeader", "negotiation", negFrame[:HeaderSize])
	add("FuzzDecodeFrame", "negotiation_table_a", negFrame, uint8(0))
	add("FuzzDecodeFrame", "negotiation_table_b", negFrameB, uint8(4))
	bad := goodRequest()
	bad.flags = 0xF1
	add("FuzzParseHeader", "reserved_flags", bad.bytes())
	bad = goodRequest()
	bad.enc, bad.dec = 0xFFFFFFFF, 0xFFFFFFFF
	add("FuzzParseHeader", "max_lengths", bad.bytes())
	add("FuzzDecodeFrame", "max_lengths", bad.bytes(), uint8(0))
	crc := bytes.Clone(v["lz4_publish_frame"])
	crc[len(crc)-1] ^= 1
	add("FuzzDecodeFrame", "checksum_mismatch", crc, uint8(3))
	zeros := make([]byte, 1<<16)
	for c := CompressionGzip; c <= CompressionLZ4; c++ {
		enc := mustB(Compress(nil, c, zeros))
		h := Header{Kind: KindRequest, Flags: flagsFor(KindRequest, c), Command: 10, RequestID: 1,
			EncodedLength: uint32(len(enc)), DecodedLength: 100, Checksum: Checksum(enc)}
		add("FuzzDecodeFrame", "bomb_"+c.String(), append(h.AppendTo(nil), enc...), uint8(c))
	}
	add("FuzzDecodeFrame", "truncated", v["gzip_publish_frame"][:40], uint8(1))

	// Negotiation.
	add("FuzzNegotiationRequest", "negotiation_request_all_compressions", v["negotiation_request_all_compressions"])
	add("FuzzNegotiationRequest", "count_zero", []byte{0, 2, 0, 2, 0, 0})
	add("FuzzNegotiationRequest", "count_five", []byte{0, 2, 0, 2, 0, 5, 0, 1, 2, 3, 0})
	add("FuzzNegotiationRequest", "duplicate", []byte{0, 2, 0, 2, 0, 2, 3, 3})
	add("FuzzNegotiationRequest", "range_without_2", []byte{0, 3, 0, 9, 0, 1, 0})
	add("FuzzNegotiationResponse", "negotiation_response_lz4", v["negotiation_response_lz4"])
	add("FuzzNegotiationResponse", "four_bytes", []byte{0, 2, 3, 0})

	// Decompressors.
	for _, n := range frames[1:] {
		c := Compression(v[n][7] >> 1)
		target := map[Compression]string{CompressionGzip: "FuzzDecompressGzip", CompressionSnappy: "FuzzDecompressSnappy", CompressionLZ4: "FuzzDecompressLZ4"}[c]
		p := v[n][HeaderSize:]
		add(target, n, p, uint32(80))
		add(target, n+"_declared_short", p, uint32(79))
		add(target, n+"_declared_long", p, uint32(81))
		add(target, "empty", mustB(Compress(nil, c, nil)), uint32(0))
		add(target, "zeros_bomb", mustB(Compress(nil, c, zeros)), uint32(1000))
		add(target, "unreachable", p, uint32(1<<23))
	}
	add("FuzzDecompressSnappy", "xerial", xerial.Encode(nil, bytes.Repeat([]byte(compressionPhrase), 1000)), uint32(80*1000))
	add("FuzzDecompressSnappy", "xerial_header_only", xerial.Encode(nil, nil), uint32(0))
	linked, content := linkedLZ4Frame(2048, false)
	add("FuzzDecompressLZ4", "linked_blocks", linked, uint32(len(content)))
	for name, opt := range map[string]lz4.Option{
		"block_checksum": lz4.BlockChecksumOption(true),
		"content_size":   lz4.SizeOption(80),
		"block_64k":      lz4.BlockSizeOption(lz4.Block64Kb),
	} {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Apply(opt)
		w.Write([]byte(compressionPhrase))
		w.Close()
		add("FuzzDecompressLZ4", name, buf.Bytes(), uint32(80))
	}
	add("FuzzCompressRoundTrip", "phrase_lz4", []byte(compressionPhrase), uint8(3))
	add("FuzzCompressRoundTrip", "empty_gzip", []byte{}, uint8(1))
	add("FuzzCompressRoundTrip", "zeros_snappy", make([]byte, 1000), uint8(2))

	// CRQ2 and text commands.
	add("FuzzDecodeRequest", "append_stream_command_payload", v["append_stream_command_payload"])
	add("FuzzDecodeRequest", "positional", mustB((&Request{Positionals: []string{"P0:1,P1:2"}}).AppendTo(nil)))
	add("FuzzDecodeRequest", "duplicate_key", crq2(RequestMagic, 2, nil, "a", "1", "a", "2"))
	add("FuzzDecodeRequest", "count_over_limit", appendU16(appendU16(appendU32(nil, RequestMagic), 2), 1025))
	add("FuzzDecodeRequest", "trailing", append(crq2(RequestMagic, 2, nil), 0))
	for i, s := range []string{
		`APPEND_STREAM topic=events key=aggregate-7 expectedVersion=3 eventType=Updated schemaVersion=2 metadata={"trace":"a b"} message={"value":"x y"}`,
		"PUBLISH topic=t xmessage=1 message=real text", "REPLICATE_SNAPSHOT internal_token=s payload={\"a\": 1}",
		"BATCH_COMMIT P0:1,P1:2 topic=t group=g", "help extra", "PUBLISH topic=a topic=b", "",
	} {
		add("FuzzParseText", fmt.Sprintf("text_%d", i), s)
	}

	// Batches and records.
	add("FuzzParseBatch", "full_record_batch_v2", v["full_record_batch_v2"])
	add("FuzzParseBatch", "full_record_batch_v3", v["full_record_batch_v3"])
	add("FuzzParseBatch", "empty", rawBatch(0, "t", 0, "", 0))
	add("FuzzParseBatch", "routing_mismatch", rawBatch(0, "t", 1, "1", 1, rawRecord(2, 0, "t", 2, "p")))
	add("FuzzParseBatch", "bad_acks", rawBatch(0, "t", 1, "2", 0))
	add("FuzzParseBatch", "count_over_limit", rawBatch(0, "t", 1, "1", MaxBatchRecords+1))
	add("FuzzParseBatch", "unknown_presence", rawBatch(0, "t", 1, "1", 1, rawRecord(2, 1<<15, "t", 1, "p", 0, 0, 0, 0)))
	add("FuzzParseBatch", "bad_txn_state", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceTransactionState, "t", 1, "p", str("x")...)))
	fullRec := func(v uint16) []byte { r := expectedFullRecord(v); return mustB(r.AppendTo(nil)) }
	add("FuzzParseRecord", "full_record_v2", fullRec(2))
	add("FuzzParseRecord", "full_record_v3", fullRec(3))
	add("FuzzParseRecord", "v3_event_id", mustB((&Record{Topic: "t", EventID: "e", PayloadDigest: "d"}).AppendTo(nil)))
	add("FuzzParseRecord", "present_empty_control_key", mustB((&Record{ControlKey: []byte{}}).AppendTo(nil)))
	add("FuzzParseRecord", "trailing", rawRecord(2, 0, "t", 1, "p", 0))
	add("FuzzRecordRoundTrip", "full", "events", int32(2), []byte("  opaque\x00한글\tpayload  "), int64(-123), "producer-1", uint64(9),
		int64(-2), "aggregate-7", "txn-1", uint8(3), []byte{0, 1, 0xFF}, "")

	// Error payloads.
	add("FuzzDecodeError", "structured_availability_error", v["structured_availability_error"])
	add("FuzzDecodeError", "unsorted_fields", rawError("NOT_LEADER", 3, 1, "", "z", "1", "a", "2"))
	add("FuzzDecodeError", "bad_class", rawError("x", 9, 0, ""))
	add("FuzzDecodeError", "field_count_beyond", appendU16(rawError("x", 1, 0, "")[:len(rawError("x", 1, 0, ""))-2], 256))

	// Text envelopes.
	for i, s := range []string{"P0:10,P1:20", " P2147483647:18446744073709551615 ", "P0:1,", "P-1:0", "P2147483648:1", ""} {
		add("FuzzParseOffsetList", fmt.Sprintf("list_%d", i), s)
	}
	for i, s := range []string{
		"STREAM_CONTROL type=CLOSE reason=stopped offset=42",
		"STREAM_CONTROL type=CLOSE reason=offset_out_of_range offset=3 requested=3 earliest=10 latest=12",
		"  STREAM_CONTROL latest=1 type=close reason=error", "STREAM_CONTROL type=CLOSE reason=x offset=-1",
	} {
		add("FuzzParseStreamControl", fmt.Sprintf("control_%d", i), []byte(s))
	}
	ack := AckResponse{Status: "OK", LastOffset: 18446744073709551615, ProducerEpoch: -1, ProducerID: "p<&>", SeqStart: 1, SeqEnd: 2, Leader: "h:1"}
	add("FuzzParseAck", "ok", ack.AppendJSON(nil))
	add("FuzzParseAck", "error_text", []byte("ERROR: NOT_LEADER class=routing retryable=true leader=h:1"))
	add("FuzzParseAck", "nested_unknown", []byte(`{"status":"OK","x":{"y":[1,"}",null]},"last_offset":1}`))
	add("FuzzParseAck", "surrogates", []byte(`{"producer_id":"\ud83d\udca1\udc00"}`))
	add("FuzzParseAck", "negative_offset", []byte(`{"last_offset":-1}`))
	add("FuzzAckJSONEncode", "html", "OK", "<&>", "h:1", "", uint64(1), int64(-1))
	add("FuzzAckJSONEncode", "invalid_utf8", "OK", "\xff\u2028", "", "e\"\\\n", uint64(0), int64(0))
	add("FuzzParseOK", "join_group", "OK generation=3 member=m-1 assignments=[0 1 2] resumed=true")
	add("FuzzParseOK", "json", `OK cluster={"nodes":[{"id":"a b"}]} snapshot=null topics=`)
	add("FuzzParseOK", "unbalanced", "OK x=[1 2")
	return out
}

func marshalSeed(vals []any) []byte {
	b := []byte("go test fuzz v1\n")
	for _, v := range vals {
		switch t := v.(type) {
		case []byte:
			b = fmt.Appendf(b, "[]byte(%q)\n", t)
		case string:
			b = fmt.Appendf(b, "string(%q)\n", t)
		case uint8:
			b = fmt.Appendf(b, "byte(%q)\n", t)
		case int32, int64, uint32, uint64:
			b = fmt.Appendf(b, "%T(%v)\n", t, t)
		default:
			panic(fmt.Sprintf("seed type %T", v))
		}
	}
	return b
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("STRATA_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set STRATA_WRITE_FUZZ_SEEDS=1 to regenerate the committed seed corpora")
	}
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			if err := os.WriteFile(filepath.Join(dir, "seed_"+s.name), marshalSeed(s.vals), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestSeedVectorsMatchSharedVectors(t *testing.T) {
	// The generated vector seeds are the shared vectors byte for byte.
	ours := vectorSeeds()
	for _, vf := range vectorFiles {
		_, shared := loadVectors(t, vf.name)
		for name, b := range shared {
			key := name
			if name == "full_record_batch" {
				key = fmt.Sprintf("full_record_batch_v%d", vf.recordVersion)
			}
			if !bytes.Equal(ours[key], b) {
				t.Errorf("%s/%s: seed differs from the shared vector", vf.name, name)
			}
		}
	}
}

func TestEveryFuzzTargetHasSeeds(t *testing.T) {
	seeds := fuzzSeeds()
	for _, target := range []string{
		"FuzzParseHeader", "FuzzDecodeFrame", "FuzzNegotiationRequest", "FuzzNegotiationResponse",
		"FuzzDecompressGzip", "FuzzDecompressSnappy", "FuzzDecompressLZ4", "FuzzCompressRoundTrip",
		"FuzzDecodeRequest", "FuzzParseText", "FuzzParseBatch", "FuzzParseRecord", "FuzzRecordRoundTrip",
		"FuzzDecodeError", "FuzzParseOffsetList", "FuzzParseStreamControl", "FuzzParseAck", "FuzzAckJSONEncode", "FuzzParseOK",
	} {
		if len(seeds[target]) == 0 {
			t.Errorf("%s has no seeds", target)
		}
		entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", target))
		if err != nil || len(entries) < len(seeds[target]) {
			t.Errorf("%s: committed corpus missing or stale (regenerate with STRATA_WRITE_FUZZ_SEEDS=1)", target)
		}
	}
}
