package producer

import (
	"bytes"
	"testing"
)

// FuzzDecode: producer checkpoints are read back from the state store on
// restart; damaged bytes must give an error, never a panic or a window
// larger than WindowSize, and an accepted state re-encodes byte for byte.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(&State{Epoch: 3, LastSeq: 10, LastUpdate: 1700000000000,
		Window: []BatchRef{{BaseSeq: 1, LastSeq: 5, BaseOffset: 0, LastOffset: 4}, {BaseSeq: 6, LastSeq: 10, BaseOffset: 5, LastOffset: 9}}}))
	f.Add(Encode(&State{}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		if len(s.Window) > WindowSize {
			t.Fatalf("window of %d above %d", len(s.Window), WindowSize)
		}
		if again := Encode(&s); !bytes.Equal(again, b) {
			t.Fatalf("accepted state re-encodes differently")
		}
	})
}
