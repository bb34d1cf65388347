package segment

import (
	"encoding/binary"
	"hash/crc32"
)

// watermarkPos is where the durable watermark lies in a stored header.
const watermarkPos = 64

// SetDurableWatermark rewrites the durable watermark of the stored batch
// header hdr (the bytes of a batch's header, CRC included, for a batch of
// total length batchLen) to w, and its CRC to match, without reading the
// records: CRC32C is linear, so replacing 8 bytes changes the CRC by the
// CRC of their difference carried through the bytes after them, which
// costs a few hundred shifts instead of a pass over the batch. A follower
// appending a replicated batch, whose only own field is the watermark, used
// to compute the CRC a second time over the whole batch right after
// checking it.
//
// The result is exactly the CRC a full computation over the new bytes would
// give when the old CRC matched the batch; when it did not (damage), the
// new CRC does not match either, so the damage stays detectable instead of
// being sealed by a fresh checksum.
func SetDurableWatermark(hdr []byte, batchLen int, w uint64) {
	be := binary.BigEndian
	old := be.Uint64(hdr[watermarkPos:])
	var delta [8]byte
	be.PutUint64(delta[:], old^w)
	be.PutUint64(hdr[watermarkPos:], w)
	if old == w {
		return
	}
	// The CRC of the difference alone, with neither the initial nor the
	// final inversion (they cancel between the old and the new CRC),
	// followed by the batchLen-watermarkPos-8 bytes after it.
	d := ^crc32.Update(^uint32(0), Castagnoli, delta[:])
	d = multModP(xPow8n(uint64(batchLen-watermarkPos-8)), d)
	be.PutUint32(hdr[8:], be.Uint32(hdr[8:])^d)
}

// castagnoliReflected is the CRC32C polynomial, bit-reversed (the
// representation hash/crc32 computes in).
const castagnoliReflected = 0x82f63b78

// multModP returns a·b modulo the CRC32C polynomial, both in the reflected
// representation (zlib's multmodp).
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
}

// x2n[k] is x^(2^k) modulo the polynomial.
var x2n = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial: the operator that carries a
// CRC over n zero bytes (zlib's x2nmodp(n, 3)).
func xPow8n(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(x2n[k], p)
		}
	}
	return p
}
