package seglog

import (
	"bytes"
	"testing"
)

// FuzzDecodeEpochs: the leader epoch history file is read on every open; a
// damaged file must give an error (never a panic or an unbounded
// allocation), and accepted histories are ordered and re-encode exactly.
func FuzzDecodeEpochs(f *testing.F) {
	f.Add(encodeEpochs([]EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 100}}))
	f.Add(encodeEpochs(nil))
	f.Add([]byte("SEP1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeEpochs(b)
		if err != nil {
			return
		}
		for i := 1; i < len(es); i++ {
			if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset < es[i-1].StartOffset {
				t.Fatalf("accepted unordered history %v", es)
			}
		}
		if again := encodeEpochs(es); !bytes.Equal(again, b) {
			t.Fatalf("accepted history re-encodes differently")
		}
	})
}
