package offsetlog

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/libs/errcode"
)

// checkEncoding fails unless the set encoder writes v exactly as
// encoding/json does and keys it as Value.Key does.
func checkEncoding(t *testing.T, enc *setEncoder, v Value) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.value(nil, v)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("value %+v:\n got %s (%v)\nwant %s", v, got, err, want)
	}
	if k := enc.key(v); k != v.Key() {
		t.Fatalf("key %+v: got %q want %q", v, k, v.Key())
	}
}

func TestOffsetEncodingMatchesEncodingJSON(t *testing.T) {
	groups := []string{"g", "", `quo"te\back`, "<html>&amp;", "ünïcode-グループ", "line\u2028sep\u2029", "tab\tnl\n", "\x00\x1f"}
	topics := []string{"orders", "", "a.b-c_d=e"}
	nums := []uint64{0, 1, 42, math.MaxInt64, math.MaxUint64}
	parts := []int32{0, 1, 1023, math.MaxInt32, -1}
	var enc setEncoder // shared, as within one set: cached strings must not leak between values
	for _, g := range groups {
		for _, topic := range topics {
			for _, n := range nums {
				for _, p := range parts {
					checkEncoding(t, &enc, Offset(g, n, group.TP{Topic: topic, Partition: p}, n/3))
				}
			}
		}
	}
	// Other shapes go through encoding/json and keep their keys.
	sel := group.Selector{Topic: "orders"}
	for _, v := range []Value{
		{V: FormatVersion, Type: TypeOffsetTombstone, Group: "g", Incarnation: 3, Topic: "t", Partition: 2},
		{V: FormatVersion, Type: TypeGroup, Group: "g", Incarnation: 3, Selector: &sel, Partitions: []group.TP{{Topic: "orders"}}},
		{V: FormatVersion, Type: TypeGroupTombstone, Group: "g", Incarnation: 3},
		{V: FormatVersion, Type: TypeOwner, Node: "c1", Epoch: 7},
		{V: 2, Type: TypeOffset, Group: "g", Incarnation: 1, Offset: 5},
		{V: FormatVersion, Type: TypeOffset, Group: "g", Incarnation: 1, Node: "stray"},
	} {
		checkEncoding(t, &enc, v)
	}
}

// FuzzOffsetEncoding: for any group, topic and numbers, the hand-written
// offset encoding equals encoding/json's, and the record decodes back to the
// same value.
func FuzzOffsetEncoding(f *testing.F) {
	f.Add("g", "orders", uint64(7), int32(2), uint64(42))
	f.Add(`q"<>&`+"\xff", "", uint64(0), int32(-1), uint64(math.MaxUint64))
	f.Add("bad\xffutf8", "orders", uint64(3), int32(1), uint64(9))
	f.Fuzz(func(t *testing.T, g, topic string, inc uint64, p int32, off uint64) {
		if g == "" || inc == 0 {
			return // the coordinator never writes either (Decode refuses them)
		}
		v := Offset(g, inc, group.TP{Topic: topic, Partition: p}, off)
		set, err := encodeSet("__consumer_offsets", 0, 1, []Value{v})
		if !utf8.ValidString(g) || !utf8.ValidString(topic) {
			// It would replay as key_mismatch (encoding/json replaces the
			// bad bytes): refused before anything is written.
			if code := errcode.From(err).Code; code != errcode.InvalidParameter.Name() {
				t.Fatalf("non-UTF-8 name written: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var enc setEncoder
		checkEncoding(t, &enc, v)
		recs, err := decodeSet(set, 0)
		if err != nil || len(recs) != 1 {
			t.Fatalf("decode set: %v %d", err, len(recs))
		}
		back, err := Decode(recs[0].key, recs[0].payload, 0)
		if err != nil {
			t.Fatalf("a written record does not replay: %v", err)
		}
		if back.Group != v.Group || back.Topic != v.Topic || back.Offset != v.Offset || back.Partition != v.Partition {
			t.Fatalf("round trip: got %+v want %+v", back, v)
		}
	})
}

func BenchmarkEncodeSet1024(b *testing.B) {
	vals := make([]Value, 1024)
	for i := range vals {
		vals[i] = Offset("orders-consumers", 1764000000000000000, group.TP{Topic: "orders", Partition: int32(i)}, uint64(1000000+i))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeSet("__consumer_offsets", 3, 1764000000000, vals); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(vals))/b.Elapsed().Seconds(), "records/s")
}
