package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strataio/strata/libs/errcode"
)

func TestTxnMarkerRoundTrip(t *testing.T) {
	for _, m := range []TxnMarker{{Commit: true, CoordinatorEpoch: 7}, {CoordinatorEpoch: -1}, {Commit: true}} {
		k, v := m.AppendKey(nil), m.AppendValue(nil)
		got, err := ParseTxnMarker(k, v)
		if err != nil || got != m {
			t.Fatalf("%+v: got %+v, %v", m, got, err)
		}
	}
	// The spec's layout, byte for byte.
	m := TxnMarker{Commit: true, CoordinatorEpoch: 0x01020304}
	if k := m.AppendKey(nil); !bytes.Equal(k, []byte{0, 0, 0, 1}) {
		t.Fatalf("key %x", k)
	}
	if v := m.AppendValue(nil); !bytes.Equal(v, []byte{0, 0, 1, 2, 3, 4}) {
		t.Fatalf("value %x", v)
	}
}

func TestTxnMarkerRejects(t *testing.T) {
	good := TxnMarker{Commit: true}
	k, v := good.AppendKey(nil), good.AppendValue(nil)
	cases := map[string][2][]byte{
		"short key":      {k[:3], v},
		"long value":     {k, append(append([]byte{}, v...), 0)},
		"key version":    {{0, 1, 0, 1}, v},
		"value version":  {k, {0, 9, 0, 0, 0, 0}},
		"unknown marker": {{0, 0, 0, 2}, v},
	}
	for name, c := range cases {
		if _, err := ParseTxnMarker(c[0], c[1]); !errors.Is(err, errcode.MalformedInput) {
			t.Errorf("%s: got %v, want malformed_input", name, err)
		}
	}
}

func TestTxnMarkerRecordEncodes(t *testing.T) {
	r := TxnMarkerRecord("t", 3, "p-1", 4, "tx", TxnMarker{Commit: false, CoordinatorEpoch: 9}, 1000)
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if !v.IsControl() {
		t.Fatal("marker is not a control record")
	}
	ck, _ := v.ControlKey()
	cv, _ := v.ControlValue()
	m, err := ParseTxnMarker(ck, cv)
	if err != nil || m.Commit || m.CoordinatorEpoch != 9 {
		t.Fatalf("marker %+v, %v", m, err)
	}
	if ver, _ := v.ControlVersion(); ver != 2 {
		t.Fatalf("control version %d", ver)
	}
}

func FuzzTxnMarker(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 5})
	f.Add([]byte{0, 0, 0, 0}, []byte{0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 1}, []byte{})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		m, err := ParseTxnMarker(key, value)
		if err != nil {
			if !errors.Is(err, errcode.MalformedInput) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !bytes.Equal(m.AppendKey(nil), key) || !bytes.Equal(m.AppendValue(nil), value) {
			t.Fatal("re-encoding differs")
		}
	})
}
