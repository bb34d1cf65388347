package wire

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/strataio/strata/libs/errcode"
)

// rawRecord builds record bytes by hand: the fixed part, then tail verbatim.
func rawRecord(version uint16, presence uint64, topic string, partition int32, payload string, tail ...byte) []byte {
	b := appendU16(nil, version)
	b = appendU64(b, presence)
	b = appendString(b, topic)
	b = appendU32(b, uint32(partition))
	b = appendU64(b, 0)
	b = appendString(b, payload)
	return append(b, tail...)
}

// rawBatch builds batch bytes by hand with the given count and records.
func rawBatch(flags uint16, topic string, partition int32, acks string, count uint32, records ...[]byte) []byte {
	b := appendU16(appendU16(appendU32(nil, BatchMagic), BatchVersion), flags)
	b = appendString(b, topic)
	b = appendU32(b, uint32(partition))
	b = appendString(b, acks)
	b = appendU64(appendU64(b, 1), 1)
	b = appendU32(b, count)
	for _, r := range records {
		b = appendBytes(b, r)
	}
	return b
}

func str(s string) []byte { return appendString(nil, s) }

func TestParseBatchRejectsInvalidBatches(t *testing.T) {
	rec := rawRecord(2, 0, "t", 1, "p")
	good := rawBatch(0, "t", 1, "1", 1, rec)
	set := func(b []byte, at int, v ...byte) []byte { b = bytes.Clone(b); copy(b[at:], v); return b }
	cases := []struct {
		name    string
		b       []byte
		payload string
		reason  string
	}{
		{"Empty", nil, "cbv2", "truncated"},
		{"HeaderTruncated", good[:39], "cbv2", "truncated"},
		{"BadMagic", set(good, 0, 'X'), "cbv2", "bad_magic"},
		{"CRQ2Magic", set(good, 0, 0x43, 0x52, 0x51, 0x32), "cbv2", "bad_magic"},
		{"Version1", set(good, 4, 0, 1), "cbv2", "bad_version"},
		{"Version3", set(good, 4, 0, 3), "cbv2", "bad_version"},
		{"FlagBit1", set(good, 6, 0, 2), "cbv2", "bad_flags"},
		{"FlagBit15", set(good, 6, 0x80, 1), "cbv2", "bad_flags"},
		{"AcksTwo", rawBatch(0, "t", 1, "2", 1, rec), "cbv2", "bad_acks"},
		{"AcksUpperALL", rawBatch(0, "t", 1, "ALL", 1, rec), "cbv2", "bad_acks"},
		{"AcksWithSpace", rawBatch(0, "t", 1, " 1", 1, rec), "cbv2", "bad_acks"},
		{"TopicLengthBeyondBytes", set(good, 8, 0x7F), "cbv2", "truncated"},
		{"AcksLengthBeyondBytes", set(good, 17, 0x7F), "cbv2", "truncated"},
		{"CountAboveLimit", rawBatch(0, "t", 1, "1", MaxBatchRecords+1), "cbv2", "too_many_records"},
		{"CountBeyondBytes", rawBatch(0, "t", 1, "1", 2, rec), "cbv2", "truncated"},
		{"TrailingRecord", rawBatch(0, "t", 1, "1", 1, rec, rec), "cbv2", "trailing_bytes"},
		{"TrailingByte", append(bytes.Clone(good), 0), "cbv2", "trailing_bytes"},
		{"RecordLengthBeyondBytes", set(good, len(good)-len(rec)-4, 0, 0, 1, 0), "cbv2", "truncated"},
		{"RoutingTopic", rawBatch(0, "t", 1, "1", 1, rawRecord(2, 0, "u", 1, "p")), "cbv2", "routing_mismatch"},
		{"RoutingPartition", rawBatch(0, "t", 1, "1", 1, rawRecord(2, 0, "t", 2, "p")), "cbv2", "routing_mismatch"},
		{"RecordVersion1", rawBatch(0, "t", 1, "1", 1, rawRecord(1, 0, "t", 1, "p")), "record", "bad_version"},
		{"RecordVersion4", rawBatch(0, "t", 1, "1", 1, rawRecord(4, 0, "t", 1, "p")), "record", "bad_version"},
		{"V2EventIDBit", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceEventID, "t", 1, "p", str("e")...)), "record", "unknown_presence_bits"},
		{"V2DigestBit", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresencePayloadDigest, "t", 1, "p", str("d")...)), "record", "unknown_presence_bits"},
		{"V3Bit17", rawBatch(0, "t", 1, "1", 1, rawRecord(3, 1<<17, "t", 1, "p")), "record", "unknown_presence_bits"},
		{"V2Bit63", rawBatch(0, "t", 1, "1", 1, rawRecord(2, 1<<63, "t", 1, "p")), "record", "unknown_presence_bits"},
		{"BadTxnState", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceTransactionState, "t", 1, "p", str("pending")...)), "record", "bad_value"},
		{"BadTxnMarker", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceTransactionMarker, "t", 1, "p", str("rollback")...)), "record", "bad_value"},
		{"BadControlType", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceControlType, "t", 1, "p", str("Transaction")...)), "record", "bad_value"},
		{"RecordTrailingByte", rawBatch(0, "t", 1, "1", 1, rawRecord(2, 0, "t", 1, "p", 0)), "record", "trailing_bytes"},
		{"RecordMissingTimestamp", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceTimestamp, "t", 1, "p", 0, 0, 0, 0)), "record", "truncated"},
		{"RecordStringBeyondBytes", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceKey, "t", 1, "p", 0, 0, 0, 9, 'k')), "record", "truncated"},
		{"RecordProducerTruncated", rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceProducer, "t", 1, "p", append(str("pid"), 0, 0, 0, 0, 0, 0, 0, 1)...)), "record", "truncated"},
		{"RecordShorterThanFixed", rawBatch(0, "t", 1, "1", 1, rec[:29], bytes.Repeat([]byte{0}, 10)), "record", "truncated"},
		{"RecordPayloadBeyondBytes", rawBatch(0, "t", 1, "1", 1, set(rec, len(rec)-5, 0, 0, 0, 9)), "record", "truncated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBatch(tc.b)
			wantCode(t, err, errcode.DecodeFailed, tc.reason)
			if e, _ := errcode.As(err); e.Field("payload") != tc.payload {
				t.Fatalf("payload field %q, want %q (%v)", e.Field("payload"), tc.payload, err)
			}
			if _, err := DecodeBatch(tc.b); err == nil {
				t.Fatal("DecodeBatch accepted what ParseBatch refused")
			}
		})
	}
}

func TestParseBatchAcceptsEdgeValues(t *testing.T) {
	cases := map[string][]byte{
		"NoRecords":         rawBatch(0, "t", 1, "", 0),
		"AcksNone":          rawBatch(1, "", -1, "none", 0),
		"AcksMinusOne":      rawBatch(0, "t", 1, "-1", 1, rawRecord(2, 0, "t", 1, "")),
		"V3EventID":         rawBatch(0, "t", 1, "all", 1, rawRecord(3, PresenceEventID|PresencePayloadDigest, "t", 1, "p", append(str("e"), str("d")...)...)),
		"V3WithoutNewBits":  rawBatch(0, "t", 1, "0", 1, rawRecord(3, 0, "t", 1, "p")),
		"PresentEmptyState": rawBatch(0, "t", 1, "1", 1, rawRecord(2, PresenceTransactionState|PresenceControlKey, "t", 1, "p", append(str(""), str("")...)...)),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseBatch(b); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			// Canonical re-encoding decodes to the same values.
			reencodes(t, "decoded batch", got, got.AppendTo, DecodeBatch)
		})
	}
}

func TestRecordViewAccessorsMatchTheStruct(t *testing.T) {
	want := expectedFullRecord(RecordVersion3)
	want.EventID, want.PayloadDigest = "ev-1", "sha256:00"
	b, err := want.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, v.Record()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	ts, _ := v.Timestamp()
	id, seq, ep, _ := v.Producer()
	key, _ := v.Key()
	state, _ := v.TransactionState()
	ck, _ := v.ControlKey()
	ev, _ := v.EventID()
	if ts != -123 || string(id) != "producer-1" || seq != 9 || ep != -2 || string(key) != "aggregate-7" ||
		string(state) != "aborted" || !bytes.Equal(ck, []byte{0, 1, 0xFF}) || string(ev) != "ev-1" || !v.IsControl() ||
		v.TopicString() != "events" || v.KeyString() != "aggregate-7" || v.Partition() != 2 || v.Offset() != 7 {
		t.Fatal("accessor values differ")
	}
	if binary.BigEndian.Uint64(b[v.OffsetPos():]) != 7 || int32(binary.BigEndian.Uint32(b[v.PartitionPos():])) != 2 {
		t.Fatal("field positions")
	}
	if pos, err := RecordOffsetPos(b); err != nil || pos != v.OffsetPos() {
		t.Fatalf("RecordOffsetPos = %d, %v", pos, err)
	}
	// Absent fields report absence.
	bare := Record{Topic: "t", Payload: []byte("x")}
	bb, _ := bare.AppendTo(nil)
	bv, _ := ParseRecord(bb)
	if _, ok := bv.Timestamp(); ok {
		t.Fatal("timestamp present")
	}
	if _, _, _, ok := bv.Producer(); ok {
		t.Fatal("producer present")
	}
	if _, ok := bv.ControlKey(); ok || bv.IsControl() || bv.Version() != RecordVersion2 || bv.Presence() != 0 {
		t.Fatal("absent fields")
	}
}

func TestRecordEncoderChoosesVersionAndPresence(t *testing.T) {
	r := Record{Topic: "t", EventID: "e"}
	b, err := r.AppendTo(nil)
	if err != nil || binary.BigEndian.Uint16(b) != RecordVersion3 {
		t.Fatalf("event id needs version 3: %x %v", b[:2], err)
	}
	r.Version = RecordVersion2
	_, err = r.AppendTo(nil)
	wantCode(t, err, errcode.MalformedInput, "needs_version_3")
	for name, bad := range map[string]Record{
		"Version4":    {Version: 4},
		"TxnState":    {TransactionState: "pending"},
		"TxnMarker":   {TransactionMarker: "Commit"},
		"ControlType": {ControlType: "x"},
	} {
		if _, err := bad.AppendTo(nil); err == nil {
			t.Errorf("%s: encoder accepted an invalid record", name)
		}
	}
	// Presence rules: producer bit when any of its three fields is set; the
	// control byte fields when non-nil, even empty.
	for _, tc := range []struct {
		r    Record
		want uint64
	}{
		{Record{SeqNum: 1}, PresenceProducer},
		{Record{Epoch: -1}, PresenceProducer},
		{Record{ProducerID: "p"}, PresenceProducer},
		{Record{ControlKey: []byte{}}, PresenceControlKey},
		{Record{ControlValue: []byte{}, ControlVersion: 2}, PresenceControlValue | PresenceControlVersion},
		{Record{Timestamp: -1, SchemaVersion: 1, AggregateVersion: 1}, PresenceTimestamp | PresenceSchemaVersion | PresenceAggregateVersion},
	} {
		if got := tc.r.Presence(); got != tc.want {
			t.Errorf("%+v presence %#x, want %#x", tc.r, got, tc.want)
		}
	}
	r = Record{Topic: "t", ControlKey: []byte{}}
	b, _ = r.AppendTo(nil)
	got, err := DecodeRecord(b)
	if err != nil || got.ControlKey == nil || len(got.ControlKey) != 0 {
		t.Fatalf("present-empty control key lost: %#v %v", got.ControlKey, err)
	}
}

func makeBatch(t testing.TB, n int, payload int) []byte {
	t.Helper()
	b := &Batch{BatchHeader: BatchHeader{Topic: "orders", Partition: 3, Acks: "all", Idempotent: true}}
	for i := range n {
		b.Records = append(b.Records, Record{
			Payload: bytes.Repeat([]byte{byte(i)}, payload), Timestamp: int64(1700000000000 + i),
			ProducerID: "producer-7", SeqNum: uint64(i + 1), Epoch: 3, Key: "customer-42",
		})
	}
	b.FillSequenceRange()
	enc, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func TestBatchPatchingInPlace(t *testing.T) {
	raw := makeBatch(t, 50, 10)
	v, err := ParseBatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	if v.BatchStart() != 1 || v.BatchEnd() != 50 || v.RecordCount() != 50 || !v.Idempotent() || string(v.Acks()) != "all" {
		t.Fatalf("header %+v", v.Header())
	}
	if next := v.AssignOffsets(1000); next != 1050 {
		t.Fatalf("next offset %d", next)
	}
	v.SetPartition(9)
	v2, err := ParseBatch(raw)
	if err != nil {
		t.Fatalf("patched batch invalid: %v", err)
	}
	if v2.Partition() != 9 {
		t.Fatal("header partition")
	}
	it := v2.Records()
	i := 0
	for rec, ok := it.Next(); ok; rec, ok = it.Next() {
		if rec.Offset() != uint64(1000+i) || rec.Partition() != 9 {
			t.Fatalf("record %d offset %d partition %d", i, rec.Offset(), rec.Partition())
		}
		if got := binary.BigEndian.Uint32(raw[it.Pos():]); int(got) != len(rec.Bytes()) {
			t.Fatal("Pos does not point at the length prefix")
		}
		// The standalone patchers work on a record's bytes.
		if err := SetRecordOffset(rec.Bytes(), 5); err != nil {
			t.Fatal(err)
		}
		if err := SetRecordPartition(rec.Bytes(), 9); err != nil {
			t.Fatal(err)
		}
		if rec.Offset() != 5 {
			t.Fatal("SetRecordOffset did not patch in place")
		}
		rec.SetOffset(uint64(1000 + i))
		i++
	}
	if err := it.Err(); err != nil || i != 50 {
		t.Fatalf("%d records, %v", i, err)
	}
	if err := SetRecordOffset([]byte{0, 2, 0}, 1); err == nil {
		t.Fatal("SetRecordOffset accepted a truncated record")
	}
	wantCode(t, SetRecordPartition(rawRecord(9, 0, "t", 0, ""), 1), errcode.DecodeFailed, "bad_version")
}

func TestBatchBuilderConcatenatesStoredRecords(t *testing.T) {
	raw := makeBatch(t, 20, 5)
	v, _ := ParseBatch(raw)
	var bb BatchBuilder
	if err := bb.Reset([]byte("hdr"), BatchHeader{Topic: "orders", Partition: 3, Acks: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := bb.AppendRecords(v.RecordsSection()); err != nil {
		t.Fatal(err)
	}
	it := v.Records()
	rec, _ := it.Next()
	if err := bb.AppendRecord(rec.Bytes()); err != nil {
		t.Fatal(err)
	}
	bb.SetRange(1, 21)
	out, err := bb.Bytes()
	if err != nil || string(out[:3]) != "hdr" || bb.Count() != 21 || bb.Size() != len(out)-3 {
		t.Fatalf("%v count %d", err, bb.Count())
	}
	got, err := ParseBatch(out[3:])
	if err != nil || got.RecordCount() != 21 || got.BatchEnd() != 21 {
		t.Fatalf("built batch: %v", err)
	}
	// Routing mismatches are refused.
	var other BatchBuilder
	other.Reset(nil, BatchHeader{Topic: "orders", Partition: 4})
	wantCode(t, other.AppendRecord(rec.Bytes()), errcode.MalformedInput, "routing_mismatch")
	wantCode(t, other.AppendRecords(v.RecordsSection()), errcode.MalformedInput, "routing_mismatch")
	wantCode(t, other.Add(&Record{Topic: "x"}), errcode.MalformedInput, "routing_mismatch")
	wantCode(t, other.AppendRecords([]byte{0, 0, 9}), errcode.MalformedInput, "truncated")
	var badAcks BatchBuilder
	wantCode(t, badAcks.Reset(nil, BatchHeader{Acks: "2"}), errcode.MalformedInput, "bad_acks")
	if _, err := badAcks.Bytes(); err == nil {
		t.Fatal("Bytes after a failed Reset")
	}
	// More than 100,000 records are refused.
	one := rawRecord(2, 0, "t", 0, "")
	section := bytes.Repeat(appendBytes(nil, one), MaxBatchRecords+1)
	var big BatchBuilder
	big.Reset(nil, BatchHeader{Topic: "t"})
	wantCode(t, big.AppendRecords(section), errcode.MalformedInput, "too_many_records")
}

func TestBatchDecodeIsZeroAllocation(t *testing.T) {
	raw := makeBatch(t, 1000, 100)
	allocs := testing.AllocsPerRun(20, func() {
		v, err := ParseBatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		it := v.Records()
		var sum uint64
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			ts, _ := rec.Timestamp()
			_, seq, _, _ := rec.Producer()
			k, _ := rec.Key()
			sum += uint64(ts) + seq + uint64(len(k)+len(rec.Payload())) + rec.Offset()
		}
		if it.Err() != nil || sum == 0 {
			t.Fatal(it.Err())
		}
	})
	if allocs != 0 {
		t.Fatalf("parse and iterate a 1,000-record batch: %.1f allocations", allocs)
	}
}

func TestDecodeBatchOwnedAliasesItsInput(t *testing.T) {
	rec := expectedFullRecord(RecordVersion3)
	rec.EventID, rec.PayloadDigest = "ev-1", "sha256:00"
	in := &Batch{BatchHeader: BatchHeader{Topic: rec.Topic, Partition: rec.Partition, Acks: "1"}, Records: []Record{rec, rec}}
	b, err := in.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBatchOwned(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeBatchOwned = %+v, want %+v", got, want)
	}
	orig := bytes.Clone(b)
	for _, r := range got.Records {
		// Writing and appending to a handed-out byte field never reaches
		// the strings that view the same input.
		for j := range r.Payload {
			r.Payload[j] = 'X'
		}
		_ = append(r.Payload, 'Y')
		_ = append(r.ControlKey, 'Y')
	}
	if bytes.Equal(b, orig) {
		t.Fatal("the payloads are copies, not views of the input")
	}
	for i := range got.Records {
		g, w := got.Records[i], want.Records[i]
		g.Payload, w.Payload = nil, nil
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("record %d changed with its payload: %+v, want %+v", i, g, w)
		}
	}
}
