package recordtest

import (
	"encoding/binary"
	"testing"

	"github.com/strataio/strata/libs/wire"
)

func TestSetRoundTripsThroughRecords(t *testing.T) {
	recs := []wire.Record{
		{Topic: "t", Payload: []byte("a")},
		{Topic: "t", Key: "k", Payload: []byte("bb"), Timestamp: 7},
		{Topic: "t", Offset: 42, Partition: 3},
	}
	got := Records(t, Set(t, recs...))
	if len(got) != len(recs) {
		t.Fatalf("%d records, want %d", len(got), len(recs))
	}
	for i, v := range got {
		k, _ := v.Key()
		if string(v.Payload()) != string(recs[i].Payload) || string(k) != recs[i].Key || v.Offset() != recs[i].Offset ||
			v.Partition() != recs[i].Partition {
			t.Fatalf("record %d = %q key %q offset %d partition %d, want %+v", i, v.Payload(), k, v.Offset(), v.Partition(), recs[i])
		}
	}
}

func TestRepeatIsASetOfCopies(t *testing.T) {
	r := wire.Record{Topic: "t", Payload: []byte("p")}
	if got, want := string(Repeat(t, r, 3)), string(Set(t, r, r, r)); got != want {
		t.Fatalf("Repeat = %x, want %x", got, want)
	}
}

// The positions must point at each record's offset field: writing an
// offset there is what the log does on append.
func TestOffsetPositionsPointAtTheOffsetFields(t *testing.T) {
	set := Set(t, wire.Record{Topic: "t", Payload: []byte("first")}, wire.Record{Topic: "topic", Key: "k", Payload: []byte("2")})
	pos := OffsetPositions(t, set)
	if len(pos) != 2 {
		t.Fatalf("%d positions, want 2", len(pos))
	}
	for i, p := range pos {
		binary.BigEndian.PutUint64(set[p:], uint64(100+i))
	}
	for i, v := range Records(t, set) {
		if v.Offset() != uint64(100+i) {
			t.Fatalf("record %d offset %d after patching, want %d", i, v.Offset(), 100+i)
		}
	}
}
