package recordtest

import (
	"encoding/binary"
	"testing"

	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/record"
)

// Append appends rec (one encoded record, without a prefix) to set with
// its length prefix and returns the extended set.
func Append(set, rec []byte) []byte {
	set = binary.BigEndian.AppendUint32(set, uint32(len(rec)))
	return append(set, rec...)
}

// Encode encodes r; t fails when r does not encode.
func Encode(t testing.TB, r wire.Record) []byte {
	t.Helper()
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Set encodes recs, in order, as one record set.
func Set(t testing.TB, recs ...wire.Record) []byte {
	t.Helper()
	var set []byte
	for _, r := range recs {
		set = Append(set, Encode(t, r))
	}
	return set
}

// Repeat is the record set of n copies of r.
func Repeat(t testing.TB, r wire.Record, n int) []byte {
	t.Helper()
	rec := Encode(t, r)
	set := make([]byte, 0, n*(4+len(rec)))
	for range n {
		set = Append(set, rec)
	}
	return set
}

// OffsetPositions returns the byte position in set of each record's u64
// offset field, in order: the OffsetPos of a seglog.Batch of set.
func OffsetPositions(t testing.TB, set []byte) []int {
	t.Helper()
	var out []int
	for pos := 0; pos < len(set); {
		rec, _, ok, _ := record.Next(set[pos:])
		if !ok {
			t.Fatalf("malformed record set at byte %d", pos)
		}
		in, err := record.Wire{}.Inspect(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pos+4+in.OffsetPos)
		pos += 4 + len(rec)
	}
	return out
}

// Records parses every record of set, in order; t fails on a malformed
// set or record. The views alias set.
func Records(t testing.TB, set []byte) []wire.RecordView {
	t.Helper()
	var out []wire.RecordView
	for len(set) > 0 {
		rec, rest, ok, _ := record.Next(set)
		if !ok {
			t.Fatal("malformed record set")
		}
		v, err := wire.ParseRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
		set = rest
	}
	return out
}
