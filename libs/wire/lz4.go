package wire

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// LZ4 frame format constants (lz4 frame format specification 1.6).
const (
	lz4FrameMagic   uint32 = 0x184D2204
	lz4BlockMax            = 4 << 20 // BD 0x70: the pierrec/lz4 default block size
	lz4FLG                 = 0x64    // version 01, independent blocks, content checksum
	lz4BD                  = 0x70    // 4 MiB maximum block size
	lz4Uncompressed uint32 = 0x80000000
	lz4Window              = 64 << 10 // linked blocks may reference this much earlier output
)

// lz4HC is the header checksum byte for FLG 0x64, BD 0x70.
var lz4HC = byte(xxh32([]byte{lz4FLG, lz4BD}) >> 8)

// lz4.Compressor holds a 32 KiB hash table; pooling it saves that per frame.
var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// lz4Compress appends one LZ4 frame byte-identical to what lz4.NewWriter with
// default options writes: blocks of 4 MiB compressed with the fast block
// compressor, a block stored raw when it does not shrink, the end mark and the
// xxHash32 content checksum. Writing the frame here rather than through
// lz4.Writer lets it go straight into dst without the writer's 4 MiB buffer.
func lz4Compress(dst, src []byte) []byte {
	blocks := (len(src) + lz4BlockMax - 1) / lz4BlockMax
	dst = slices.Grow(dst, 7+len(src)+4*blocks+8)
	dst = binary.LittleEndian.AppendUint32(dst, lz4FrameMagic)
	dst = append(dst, lz4FLG, lz4BD, lz4HC)
	c := lz4Compressors.Get().(*lz4.Compressor)
	for off := 0; off < len(src); off += lz4BlockMax {
		chunk := src[off:min(off+lz4BlockMax, len(src))]
		p := len(dst)
		dst = dst[:p+4+len(chunk)]
		// A destination exactly as long as the input makes CompressBlock
		// return 0 for data that does not shrink, as lz4.Writer does.
		n, err := c.CompressBlock(chunk, dst[p+4:p+4+len(chunk)])
		if n == 0 || err != nil {
			copy(dst[p+4:], chunk)
			binary.LittleEndian.PutUint32(dst[p:], uint32(len(chunk))|lz4Uncompressed)
			continue
		}
		binary.LittleEndian.PutUint32(dst[p:], uint32(n))
		dst = dst[:p+4+n]
	}
	lz4Compressors.Put(c)
	dst = append(dst, 0, 0, 0, 0)
	return binary.LittleEndian.AppendUint32(dst, xxh32(src))
}

// lz4Decompress fills out from exactly one LZ4 frame. It accepts every frame
// option a standard encoder may use (block sizes 64 KiB-4 MiB, linked or
// independent blocks, block checksums, content size, content checksum) and
// refuses dictionary ids, legacy and skippable frames, and data after the
// frame. Each block's decoded size is computed from its sequence headers
// before it is decoded, so output never runs past len(out).
func lz4Decompress(out, src []byte) error {
	bad := func(msg string) error { return compressedError(CompressionLZ4, "corrupt", msg) }
	if len(src) < 7 || binary.LittleEndian.Uint32(src) != lz4FrameMagic {
		return bad("not an LZ4 frame")
	}
	flg, bd := src[4], src[5]
	if flg>>6 != 1 || flg&0x02 != 0 {
		return bad("LZ4 frame version or reserved FLG bit")
	}
	if flg&0x01 != 0 {
		return bad("LZ4 dictionary frames are not supported")
	}
	if bd&0x8F != 0 || (bd>>4)&7 < 4 {
		return bad("LZ4 block descriptor invalid")
	}
	independent, blockSum, hasSize, contentSum := flg&0x20 != 0, flg&0x10 != 0, flg&0x08 != 0, flg&0x04 != 0
	maxBlock := 1 << (8 + 2*int((bd>>4)&7))
	pos := 6
	if hasSize {
		if len(src)-pos < 9 {
			return bad("LZ4 frame header truncated")
		}
		size := binary.LittleEndian.Uint64(src[pos:])
		pos += 8
		if size > uint64(len(out)) {
			return bombError(CompressionLZ4, len(out))
		}
		if size < uint64(len(out)) {
			return compressedError(CompressionLZ4, "short", "LZ4 content size below the decoded length")
		}
	}
	if byte(xxh32(src[4:pos])>>8) != src[pos] {
		return bad("LZ4 header checksum mismatch")
	}
	pos++
	produced := 0
	for {
		if len(src)-pos < 4 {
			return bad("LZ4 frame truncated")
		}
		word := binary.LittleEndian.Uint32(src[pos:])
		pos += 4
		if word == 0 {
			break
		}
		size := int(word &^ lz4Uncompressed)
		if size > maxBlock || size > len(src)-pos {
			return bad("LZ4 block size invalid")
		}
		block := src[pos : pos+size]
		pos += size
		if blockSum {
			if len(src)-pos < 4 {
				return bad("LZ4 block checksum truncated")
			}
			if xxh32(block) != binary.LittleEndian.Uint32(src[pos:]) {
				return bad("LZ4 block checksum mismatch")
			}
			pos += 4
		}
		room := len(out) - produced
		if word&lz4Uncompressed != 0 {
			if size > room {
				return bombError(CompressionLZ4, len(out))
			}
			produced += copy(out[produced:], block)
			continue
		}
		n, ok := lz4BlockSize(block)
		if !ok {
			return bad("LZ4 block sequences invalid")
		}
		if n > room {
			return bombError(CompressionLZ4, len(out))
		}
		if n > maxBlock {
			return bad("LZ4 block decodes beyond the block size")
		}
		win := out[produced : produced+n : produced+n]
		var got int
		var err error
		if !independent && produced > 0 {
			got, err = lz4.UncompressBlockWithDict(block, win, out[max(0, produced-lz4Window):produced])
		} else {
			got, err = lz4.UncompressBlock(block, win)
		}
		if err != nil || got != n {
			return bad("LZ4 block is corrupt")
		}
		produced += n
	}
	if contentSum {
		if len(src)-pos < 4 {
			return bad("LZ4 content checksum truncated")
		}
		if xxh32(out[:produced]) != binary.LittleEndian.Uint32(src[pos:]) {
			return bad("LZ4 content checksum mismatch")
		}
		pos += 4
	}
	if pos != len(src) {
		return bad("data after the LZ4 frame")
	}
	if produced != len(out) {
		return compressedError(CompressionLZ4, "short", "LZ4 frame shorter than its decoded length")
	}
	return nil
}

// lz4BlockSize walks the sequences of an LZ4 block without producing output
// and returns the number of bytes it decodes to. It rejects truncated
// sequences and zero match offsets; the block decoder checks the rest.
func lz4BlockSize(src []byte) (int, bool) {
	n, i := 0, 0
	for i < len(src) {
		tok := src[i]
		i++
		lit, next, ok := lz4Length(src, i, int(tok>>4))
		if !ok || lit > len(src)-next {
			return 0, false
		}
		i = next + lit
		n += lit
		if i == len(src) {
			return n, true
		}
		if len(src)-i < 2 {
			return 0, false
		}
		if src[i] == 0 && src[i+1] == 0 {
			return 0, false
		}
		ml, next, ok := lz4Length(src, i+2, int(tok&15))
		if !ok {
			return 0, false
		}
		i = next
		n += ml + 4
	}
	return n, true
}

// lz4Length completes a literal or match length whose 4-bit token part is
// n, reading the extension bytes at src[i:] that follow a part of 15 (each
// 255 means another byte follows). It returns the length and the position
// after it; false when the extension runs past src.
func lz4Length(src []byte, i, n int) (int, int, bool) {
	if n != 15 {
		return n, i, true
	}
	for i < len(src) {
		b := src[i]
		i++
		n += int(b)
		if b != 255 {
			return n, i, true
		}
	}
	return 0, 0, false
}
