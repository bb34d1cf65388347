package offsetlog

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/libs/errcode"
)

// FuzzDecodeSet: replay walks every fetched record set of __consumer_offsets;
// arbitrary bytes must give a storage_corrupt error (which keeps readiness
// false), never a panic, and every record of a set that decodes must either
// decode as a value or be reported corrupt.
func FuzzDecodeSet(f *testing.F) {
	tp := group.TP{Topic: "orders", Partition: 2}
	good, err := encodeSet("__consumer_offsets", 3, 1700000000000, []Value{
		Offset("g1", 7, tp, 42),
		{V: FormatVersion, Type: TypeOwner, Node: "coordinatord-1", Epoch: 9},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte{0, 0, 0, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeSet(b, 0)
		if err != nil {
			mustBeCorrupt(t, err)
			return
		}
		for _, r := range recs {
			if r.control {
				continue
			}
			if _, err := Decode(r.key, r.payload, r.offset); err != nil {
				mustBeCorrupt(t, err)
			}
		}
	})
}

// FuzzDecode: a record value that decodes re-encodes to an equal value
// under the same key; everything else is storage_corrupt.
func FuzzDecode(f *testing.F) {
	tp := group.TP{Topic: "orders", Partition: 0}
	mark := TxnMark("g", 1, "tx", group.TxnMark{ProducerID: "p", Epoch: 3, Partitions: []group.TP{tp}, Marked: time.UnixMilli(1)})
	for _, v := range []Value{Offset("g", 1, tp, 5), {V: FormatVersion, Type: TypeOwner, Node: "c-1", Epoch: 2}, mark, TxnMarkClear("g", 1, "tx")} {
		b, _ := json.Marshal(v)
		f.Add([]byte(v.Key()), b)
	}
	f.Add([]byte("group/\"g\""), []byte(`{"type":"group"}`))
	f.Add([]byte("x"), []byte(`{"v":99}`))
	f.Add([]byte(""), []byte(`not json`))
	f.Fuzz(func(t *testing.T, key, payload []byte) {
		v, err := Decode(key, payload, 0)
		if err != nil {
			mustBeCorrupt(t, err)
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := Decode(key, again, 0)
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		if !reflect.DeepEqual(v, v2) {
			t.Fatalf("round trip changed the value: %+v vs %+v", v, v2)
		}
	})
}

func mustBeCorrupt(t *testing.T, err error) {
	t.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != "storage_corrupt" {
		t.Fatalf("want a storage_corrupt error, got %v", err)
	}
}
