package logcodec

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/errcode"
)

func testLog(index, term uint64) *raft.Log {
	l := &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("data-%d", index))}
	if index%3 == 0 {
		l.Extensions = []byte("ext")
	}
	if index%5 != 0 {
		l.AppendedAt = time.Unix(1_700_000_000+int64(index), int64(index))
	}
	return l
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

func TestRoundTripKeepsEveryField(t *testing.T) {
	for i := uint64(1); i <= 30; i++ {
		in := testLog(i, i/7+1)
		var out raft.Log
		if err := Decode(Append(nil, in), &out); err != nil {
			t.Fatal(err)
		}
		if !sameLog(in, &out) {
			t.Fatalf("%+v -> %+v", *in, out)
		}
	}
}

func TestAppendExtendsTheBuffer(t *testing.T) {
	prefix := []byte("keep")
	b := Append(prefix, testLog(1, 1))
	if !bytes.HasPrefix(b, []byte("keep")) {
		t.Fatal("prefix overwritten")
	}
	var out raft.Log
	if err := Decode(b[4:], &out); err != nil {
		t.Fatal(err)
	}
}

// TestEveryByteFlipIsDetected flips each bit of an encoding: no flip may
// decode into a different entry.
func TestEveryByteFlipIsDetected(t *testing.T) {
	in := testLog(6, 2)
	good := Append(nil, in)
	for i := range good {
		for bit := range 8 {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			var out raft.Log
			err := Decode(b, &out)
			if err == nil {
				t.Fatalf("flip of byte %d bit %d decoded as %+v", i, bit, out)
			}
			if !errors.Is(err, errcode.StorageCorrupt) {
				t.Fatalf("flip error %v is not storage_corrupt", err)
			}
		}
	}
	for n := range len(good) {
		var out raft.Log
		if err := Decode(good[:n], &out); !errors.Is(err, errcode.StorageCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
}
