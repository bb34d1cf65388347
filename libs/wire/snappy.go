package wire

import (
	"bytes"
	"encoding/binary"

	"github.com/klauspost/compress/snappy"
)

// xerialMagic opens a snappy-java (xerial) stream: the magic, then u32 version
// and u32 compatible version, then [u32 length][raw block] chunks.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// snappyCompress appends one raw Snappy block (the format the Go broker writes
// and every SDK reads).
func snappyCompress(dst, src []byte) []byte {
	n := snappy.MaxEncodedLen(len(src)) // src is at most PublicMaxPayload: never negative
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n)
		copy(grown, dst)
		dst = grown
	}
	enc := snappy.Encode(dst[start:start+n], src)
	return dst[:start+len(enc)]
}

// snappyDecompress fills out from a raw block, or from a xerial stream when the
// xerial magic is present (what the Python and Java SDKs write). Each block's
// varint length is checked against the room left in out before decoding.
// Blocks decode with klauspost's snappy.Decode (the s2 assembly decoder, about
// twice as fast as the strict pure-Go one); it also accepts s2's repeat-offset
// copies, which is harmless because decoded bytes are bounded the same way
// and compressed bytes are never forwarded, only decoded.
func snappyDecompress(out, src []byte) error {
	if len(src) >= len(xerialMagic) && bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
		return xerialDecompress(out, src)
	}
	n, err := snappyBlock(out, src)
	if err != nil {
		return err
	}
	if n != len(out) {
		return compressedError(CompressionSnappy, "short", "snappy block shorter than its decoded length")
	}
	return nil
}

// snappyBlock decodes one raw block into the front of out and returns its
// length.
func snappyBlock(out, block []byte) (int, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return 0, compressedError(CompressionSnappy, "corrupt", "snappy block length: "+err.Error())
	}
	if n > len(out) {
		return 0, bombError(CompressionSnappy, len(out))
	}
	dec, err := snappy.Decode(out[:n:n], block)
	if err != nil || len(dec) != n {
		return 0, compressedError(CompressionSnappy, "corrupt", "snappy block is corrupt")
	}
	return n, nil
}

func xerialDecompress(out, src []byte) error {
	if len(src) < xerialHeaderSize {
		return compressedError(CompressionSnappy, "corrupt", "xerial header truncated")
	}
	pos, produced := xerialHeaderSize, 0
	for pos < len(src) {
		if len(src)-pos < 4 {
			return compressedError(CompressionSnappy, "corrupt", "xerial chunk length truncated")
		}
		l := binary.BigEndian.Uint32(src[pos:])
		pos += 4
		if uint64(l) > uint64(len(src)-pos) {
			return compressedError(CompressionSnappy, "corrupt", "xerial chunk longer than the payload")
		}
		n, err := snappyBlock(out[produced:], src[pos:pos+int(l)])
		if err != nil {
			return err
		}
		produced += n
		pos += int(l)
	}
	if produced != len(out) {
		return compressedError(CompressionSnappy, "short", "xerial stream shorter than its decoded length")
	}
	return nil
}
