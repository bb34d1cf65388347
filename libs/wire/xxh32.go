package wire

import (
	"encoding/binary"
	"math/bits"
)

// xxHash32 (seed 0), the checksum of the LZ4 frame format: header checksum
// byte, optional block checksums and the content checksum. Written from the
// xxHash specification; verified against the LZ4 frames that pierrec/lz4
// writes and the Wire v2 lz4 vector.
const (
	xxPrime1 uint32 = 2654435761
	xxPrime2 uint32 = 2246822519
	xxPrime3 uint32 = 3266489917
	xxPrime4 uint32 = 668265263
	xxPrime5 uint32 = 374761393
)

func xxRound(acc, in uint32) uint32 {
	return bits.RotateLeft32(acc+in*xxPrime2, 13) * xxPrime1
}

func xxh32(b []byte) uint32 {
	n := len(b)
	var h uint32
	if n >= 16 {
		p1, p2 := xxPrime1, xxPrime2 // variables: the sums wrap, as the spec intends
		v1 := p1 + p2
		v2 := p2
		v3 := uint32(0)
		v4 := -p1
		for len(b) >= 16 {
			v1 = xxRound(v1, binary.LittleEndian.Uint32(b[0:4]))
			v2 = xxRound(v2, binary.LittleEndian.Uint32(b[4:8]))
			v3 = xxRound(v3, binary.LittleEndian.Uint32(b[8:12]))
			v4 = xxRound(v4, binary.LittleEndian.Uint32(b[12:16]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = xxPrime5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h += binary.LittleEndian.Uint32(b) * xxPrime3
		h = bits.RotateLeft32(h, 17) * xxPrime4
		b = b[4:]
	}
	for _, c := range b {
		h += uint32(c) * xxPrime5
		h = bits.RotateLeft32(h, 11) * xxPrime1
	}
	h ^= h >> 15
	h *= xxPrime2
	h ^= h >> 13
	h *= xxPrime3
	h ^= h >> 16
	return h
}
