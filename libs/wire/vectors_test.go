package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/sharedtest"
)

// vectorFile is the shape of the shared Wire v2 fixture files.
type vectorFile struct {
	SchemaVersion  int               `json:"schema_version"`
	WireVersion    int               `json:"wire_version"`
	HeaderSize     int               `json:"header_size"`
	MaxPayload     int               `json:"max_payload"`
	Capabilities   []string          `json:"capabilities"`
	CommandIDs     map[string]uint16 `json:"command_ids"`
	CompressionIDs map[string]int    `json:"compression_ids"`
	Vectors        []struct {
		Name string `json:"name"`
		Hex  string `json:"hex"`
	} `json:"vectors"`
}

// The two fixture files and the command numbering each must match.
var vectorFiles = []struct {
	name  string
	table *CommandTable
	// recordVersion is the record version byte pair of full_record_batch.
	recordVersion uint16
}{
	{"wire-v2-vectors.json", TableB, RecordVersion2},
	{"wire-v2-vectors.go-testdata.json", TableA, RecordVersion3},
}

func loadVectors(t testing.TB, name string) (vectorFile, map[string][]byte) {
	t.Helper()
	var f vectorFile
	if err := json.Unmarshal(sharedtest.ReadFile(t, "protocol", name), &f); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	vecs := map[string][]byte{}
	for _, v := range f.Vectors {
		b, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatalf("%s: vector %s: %v", name, v.Name, err)
		}
		vecs[v.Name] = b
	}
	return f, vecs
}

// compressionPhrase is the decoded payload of the three compressed frames
// (WIRE-V2 section 11): "cross-language-compression" three times joined by "-".
const compressionPhrase = "cross-language-compression-cross-language-compression-cross-language-compression"

// expectedFullRecord is full_record_batch's record, written from WIRE-V2
// section 11 (not derived from the bytes).
func expectedFullRecord(version uint16) Record {
	return Record{
		Version:                 version,
		Topic:                   "events",
		Partition:               2,
		Offset:                  7,
		Payload:                 []byte("  opaque\x00한글\tpayload  "),
		Timestamp:               -123,
		ProducerID:              "producer-1",
		SeqNum:                  9,
		Epoch:                   -2,
		Key:                     "aggregate-7",
		EventType:               "Updated",
		SchemaVersion:           2,
		AggregateVersion:        3,
		Metadata:                `{"trace":"a b"}`,
		TransactionalID:         "txn-1",
		TransactionState:        TxnStateAborted,
		TransactionMarker:       TxnMarkerAbort,
		ControlType:             ControlTypeTransaction,
		ControlVersion:          2,
		ControlCoordinatorEpoch: 11,
		ControlKey:              []byte{0x00, 0x01, 0xFF},
		ControlValue:            []byte("control-value"),
	}
}

func TestVectorFilesMetadata(t *testing.T) {
	for _, vf := range vectorFiles {
		t.Run(vf.name, func(t *testing.T) {
			f, _ := loadVectors(t, vf.name)
			if f.WireVersion != int(ProtocolVersion) || f.HeaderSize != HeaderSize || f.MaxPayload != PublicMaxPayload {
				t.Fatalf("wire_version %d header_size %d max_payload %d", f.WireVersion, f.HeaderSize, f.MaxPayload)
			}
			want := map[string]int{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
			if diff := cmp.Diff(want, f.CompressionIDs); diff != "" {
				t.Fatalf("compression ids (-want +got):\n%s", diff)
			}
			for name, id := range f.CompressionIDs {
				c, ok := ParseCompression(name)
				if !ok || int(c) != id || c.String() != name {
					t.Fatalf("compression %s: ours %d %v", name, c, ok)
				}
			}
			if len(f.Capabilities) != 29 {
				t.Fatalf("capabilities: %d entries, want 29", len(f.Capabilities))
			}
		})
	}
}

func TestVectorCommandIDsMatchTables(t *testing.T) {
	for _, vf := range vectorFiles {
		t.Run(vf.name, func(t *testing.T) {
			f, _ := loadVectors(t, vf.name)
			// The published numbering only: Strata's extension commands
			// (ids from FirstExtensionID) are in no SDK's file.
			ours := map[string]uint16{}
			for _, c := range vf.table.Commands() {
				if c.IsExtension() {
					continue
				}
				id, _ := vf.table.ID(c)
				ours[c.String()] = id
			}
			if diff := cmp.Diff(f.CommandIDs, ours); diff != "" {
				t.Fatalf("table %s vs %s (-file +ours):\n%s", vf.table.Name(), vf.name, diff)
			}
		})
	}
}

func TestChecksumCheckValue(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("CRC32C(123456789) = %#x, want 0xE3069283", got)
	}
}

func TestVectorNegotiation(t *testing.T) {
	for _, vf := range vectorFiles {
		t.Run(vf.name, func(t *testing.T) {
			_, v := loadVectors(t, vf.name)
			req := NegotiationRequest{MinVersion: 2, MaxVersion: 2,
				Compressions: []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionNone}}
			matchesVector(t, v["negotiation_request_all_compressions"], req, DecodeNegotiationRequest, req.AppendTo)
			resp, err := DecodeNegotiationResponse(v["negotiation_response_lz4"])
			if err != nil || resp != (NegotiationResponse{Version: 2, Compression: CompressionLZ4}) {
				t.Fatalf("response = %+v, %v", resp, err)
			}
			if enc := resp.AppendTo(nil); !bytes.Equal(enc, v["negotiation_response_lz4"]) {
				t.Fatalf("re-encode response = %x", enc)
			}
			// The broker rule picks gzip, the client's first preference.
			if got, err := Negotiate(req, AllCompressions); err != nil || got.Compression != CompressionGzip {
				t.Fatalf("Negotiate = %+v, %v", got, err)
			}
		})
	}
}

func TestVectorFrames(t *testing.T) {
	cases := []struct {
		vector      string
		compression Compression
		flags       uint8
		requestID   uint64
		payload     string
		encodedLen  uint32
	}{
		{"uncompressed_publish_frame", CompressionNone, 0x01, 42, "hello", 5},
		{"gzip_publish_frame", CompressionGzip, 0x03, 77, compressionPhrase, 53},
		{"snappy_publish_frame", CompressionSnappy, 0x05, 77, compressionPhrase, 32},
		{"lz4_publish_frame", CompressionLZ4, 0x07, 77, compressionPhrase, 67},
	}
	for _, vf := range vectorFiles {
		for _, tc := range cases {
			t.Run(vf.name+"/"+tc.vector, func(t *testing.T) {
				_, v := loadVectors(t, vf.name)
				raw := v[tc.vector]
				codec := &Codec{Table: vf.table, Compression: tc.compression, Limits: PublicLimits}
				f, err := codec.DecodeFrame(raw, nil)
				if err != nil {
					t.Fatal(err)
				}
				h := f.Header
				if h.Kind != KindRequest || h.Flags != tc.flags || h.Status != StatusNone || h.RequestID != tc.requestID ||
					h.EncodedLength != tc.encodedLen || h.DecodedLength != uint32(len(tc.payload)) {
					t.Fatalf("header %+v", h)
				}
				if cmd, ok := vf.table.ByID(h.Command); !ok || cmd != CmdPublish {
					t.Fatalf("command %d = %v", h.Command, cmd)
				}
				if string(f.Payload) != tc.payload {
					t.Fatalf("payload %q", f.Payload)
				}
				id, _ := vf.table.ID(CmdPublish)
				enc, err := codec.AppendFrame(nil, Header{Kind: KindRequest, Command: id, RequestID: tc.requestID}, []byte(tc.payload))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(enc, raw) {
					t.Fatalf("re-encoded frame differs\n got %x\nwant %x", enc, raw)
				}
				// Through the stream reader too.
				fr := NewFrameReader(bytes.NewReader(raw))
				f2, err := fr.ReadFrame(codec)
				if err != nil || string(f2.Payload) != tc.payload || f2.Header != h {
					t.Fatalf("ReadFrame = %+v, %v", f2, err)
				}
			})
		}
	}
}

func TestVectorCommandPayload(t *testing.T) {
	want := Request{Fields: []Field{
		{"topic", "events"},
		{"key", "aggregate-7"},
		{"expectedVersion", "3"},
		{"eventType", "Updated"},
		{"schemaVersion", "2"},
		{"metadata", `{"trace":"a b"}`},
		{"message", `{"value":"x y"}`},
	}}
	for _, vf := range vectorFiles {
		t.Run(vf.name, func(t *testing.T) {
			_, v := loadVectors(t, vf.name)
			raw := v["append_stream_command_payload"]
			matchesVector(t, raw, want, DecodeRequest, want.AppendTo, cmpEmpty)
			// The SDK text algorithm produces the same payload.
			cmd, req, err := ParseText(`APPEND_STREAM topic=events key=aggregate-7 expectedVersion=3 eventType=Updated schemaVersion=2 metadata={"trace":"a b"} message={"value":"x y"}`)
			if err != nil || cmd != CmdAppendStream {
				t.Fatalf("ParseText = %v, %v", cmd, err)
			}
			enc, err := req.AppendTo(nil)
			if err != nil || !bytes.Equal(enc, raw) {
				t.Fatalf("text → CRQ2 = %x, %v", enc, err)
			}
		})
	}
}

func TestVectorFullRecordBatch(t *testing.T) {
	for _, vf := range vectorFiles {
		t.Run(vf.name, func(t *testing.T) {
			_, v := loadVectors(t, vf.name)
			raw := v["full_record_batch"]
			want := &Batch{
				BatchHeader: BatchHeader{Idempotent: true, Topic: "events", Partition: 2, Acks: "all", BatchStart: 9, BatchEnd: 9},
				Records:     []Record{expectedFullRecord(vf.recordVersion)},
			}
			matchesVector(t, raw, want, DecodeBatch, want.AppendTo)
			// The zero-copy view sees the same record.
			view, err := ParseBatch(raw)
			if err != nil {
				t.Fatal(err)
			}
			it := view.Records()
			rec, ok := it.Next()
			if !ok {
				t.Fatal(it.Err())
			}
			if rec.Presence() != 0x7FFF || rec.Version() != vf.recordVersion {
				t.Fatalf("presence %#x version %d", rec.Presence(), rec.Version())
			}
			if diff := cmp.Diff(want.Records[0], rec.Record()); diff != "" {
				t.Fatalf("view record (-want +got):\n%s", diff)
			}
			if _, ok := it.Next(); ok || it.Err() != nil {
				t.Fatalf("second record or error: %v", it.Err())
			}
			// Re-encoding by concatenation gives the same bytes.
			var bb BatchBuilder
			if err := bb.Reset(nil, view.Header()); err != nil {
				t.Fatal(err)
			}
			if err := bb.AppendRecords(view.RecordsSection()); err != nil {
				t.Fatal(err)
			}
			if enc, err := bb.Bytes(); err != nil || !bytes.Equal(enc, raw) {
				t.Fatalf("builder = %x, %v", enc, err)
			}
		})
	}
}

func TestVectorStructuredError(t *testing.T) {
	want := &errcode.Error{
		Code:      "replication_unavailable",
		Class:     errcode.ClassAvailability,
		Retryable: true,
		Message:   "replication quorum unavailable",
		Fields:    []errcode.Field{{Key: "offset", Value: "7"}, {Key: "reason", Value: "replica timeout"}},
	}
	for _, vf := range vectorFiles {
		t.Run(vf.name, func(t *testing.T) {
			_, v := loadVectors(t, vf.name)
			raw := v["structured_availability_error"]
			matchesVector(t, raw, want, DecodeError, func(dst []byte) ([]byte, error) { return AppendError(dst, want) })
			// The catalogue builds the same error.
			e := errcode.ReplicationUnavailable.New("replication quorum unavailable", "reason", "replica timeout", "offset", "7")
			if enc, _ := AppendError(nil, e); !bytes.Equal(enc, raw) {
				t.Fatalf("catalogue error encodes to %x", enc)
			}
		})
	}
}
