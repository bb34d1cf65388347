package logcodec

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/errcode"
)

// FuzzDecodeLog feeds arbitrary bytes to the entry decoder: it must never
// panic, must fail only with storage_corrupt, and whatever it accepts must
// survive an encode/decode round trip unchanged.
func FuzzDecodeLog(f *testing.F) {
	f.Add(Append(nil, testLog(1, 1)))
	f.Add(Append(nil, testLog(33, 7)))
	f.Add(Append(nil, &raft.Log{}))
	f.Add([]byte{FormatVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		err := Decode(b, &l)
		if err != nil {
			if !errors.Is(err, errcode.StorageCorrupt) {
				t.Fatalf("decode error %v is not storage_corrupt", err)
			}
			return
		}
		var again raft.Log
		if err := Decode(Append(nil, &l), &again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !sameLog(&l, &again) {
			t.Fatalf("round trip changed %+v into %+v", l, again)
		}
	})
}

// FuzzLogRoundTrip encodes arbitrary entries and checks they decode back
// identical.
func FuzzLogRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint64(1), uint8(0), []byte("data"), []byte(nil), int64(1_700_000_000), uint32(5))
	f.Add(^uint64(0), ^uint64(0), uint8(255), []byte(nil), []byte("ext"), int64(-62135596800), uint32(0))
	f.Fuzz(func(t *testing.T, index, term uint64, typ uint8, data, ext []byte, sec int64, nsec uint32) {
		in := raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
		if sec != 0 {
			in.AppendedAt = time.Unix(sec, int64(nsec%1e9))
		}
		var out raft.Log
		if err := Decode(Append(nil, &in), &out); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !sameLog(&in, &out) || !bytes.Equal(in.Data, out.Data) {
			t.Fatalf("round trip %+v -> %+v", in, out)
		}
	})
}
