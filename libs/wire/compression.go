package wire

import (
	"slices"
	"strings"
)

// Compression is a Wire v2 compression id (WIRE-V2 section 2).
type Compression uint8

// Compression ids.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
)

// AllCompressions lists every compression id in id order; a broker offers all
// of them.
var AllCompressions = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4}

// Valid reports whether c is one of the four ids.
func (c Compression) Valid() bool { return c <= CompressionLZ4 }

var compressionNames = [...]string{CompressionNone: "none", CompressionGzip: "gzip", CompressionSnappy: "snappy", CompressionLZ4: "lz4"}

// String returns the spec name: none, gzip, snappy or lz4.
func (c Compression) String() string { return nameOf(compressionNames[:], c, "compression") }

// ParseCompression maps a name (none, gzip, snappy, lz4; case-insensitive) to
// its id.
func ParseCompression(name string) (Compression, bool) {
	if i := slices.Index(compressionNames[:], strings.ToLower(strings.TrimSpace(name))); i >= 0 {
		return Compression(i), true
	}
	return 0, false
}

// Expansion bounds: the most output one input byte can produce in each format
// (deflate 1032:1, LZ4 255:1, snappy 64 bytes per 3-byte copy tag). A header
// that declares a decoded length beyond what its encoded length could ever
// produce is refused before the output buffer is allocated, so allocation is
// bounded by the bytes actually received, not by the attacker's declaration.
const (
	maxExpansionGzip   = 1032
	maxExpansionSnappy = 22
	maxExpansionLZ4    = 255
)

// MaxDecodedLength returns the largest decoded length that encodedLen bytes in
// compression c can legitimately produce. Decompress and Codec.CheckHeader
// refuse larger declarations.
func MaxDecodedLength(c Compression, encodedLen int) int64 {
	n := int64(encodedLen)
	switch c {
	case CompressionGzip:
		return n * maxExpansionGzip
	case CompressionSnappy:
		return n * maxExpansionSnappy
	case CompressionLZ4:
		return n * maxExpansionLZ4
	}
	return n
}

// Compress appends the encoding of src under c to dst and returns the
// extended slice. The formats are byte-identical to the public Go broker's:
// gzip is one member from compress/gzip's default writer, snappy a raw block,
// lz4 one LZ4 frame with the pierrec/lz4/v4 default settings (4 MiB
// independent blocks, content checksum). dst and src must not overlap.
func Compress(dst []byte, c Compression, src []byte) ([]byte, error) {
	if len(src) > PublicMaxPayload {
		return dst, encodeError("compression", "too_large", "payload above the public 64 MiB bound", "length", itoa(len(src)))
	}
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		return gzipCompress(dst, src)
	case CompressionSnappy:
		return snappyCompress(dst, src), nil
	case CompressionLZ4:
		return lz4Compress(dst, src), nil
	}
	return dst, encodeError("compression", "unknown_compression", "unknown compression id", "compression", itoa(int(c)))
}

// Decompress decodes src, compressed with c, into exactly decodedLen bytes.
// The result reuses dst's storage when cap(dst) >= decodedLen, else it is
// allocated once at decodedLen. For CompressionNone the result is src itself
// (no copy). dst must not overlap src.
//
// No decoder ever produces or buffers more than decodedLen bytes of output:
// output that would exceed it fails with errcode.DecompressedSizeExceeded
// before it is written, and fewer bytes, corrupt input, trailing data or a
// decodedLen beyond MaxDecodedLength fail with errcode.InvalidCompressedPayload.
func Decompress(dst []byte, c Compression, src []byte, decodedLen int) ([]byte, error) {
	if decodedLen < 0 {
		return nil, compressedError(c, "bad_length", "negative decoded length")
	}
	if c == CompressionNone {
		if len(src) != decodedLen {
			return nil, compressedError(c, "length_mismatch", "uncompressed payload length differs from decoded length")
		}
		return src, nil
	}
	if !c.Valid() {
		return nil, compressedError(c, "unknown_compression", "unknown compression id")
	}
	if int64(decodedLen) > MaxDecodedLength(c, len(src)) {
		return nil, compressedError(c, "unreachable_length", "declared decoded length exceeds what the encoded bytes can produce")
	}
	var out []byte
	if cap(dst) >= decodedLen {
		out = dst[:decodedLen]
	} else {
		out = make([]byte, decodedLen)
	}
	var err error
	switch c {
	case CompressionGzip:
		err = gzipDecompress(out, src)
	case CompressionSnappy:
		err = snappyDecompress(out, src)
	case CompressionLZ4:
		err = lz4Decompress(out, src)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
