package wire

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/pierrec/lz4/v4"
	"github.com/strataio/strata/libs/errcode"
)

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// testInputs are payloads of the shapes that matter to the codecs: empty,
// tiny, text, incompressible, and larger than a xerial chunk.
func testInputs() map[string][]byte {
	return map[string][]byte{
		"empty":      {},
		"one":        {'x'},
		"phrase":     []byte(compressionPhrase),
		"text64K":    bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog "), 1500),
		"random100K": randomBytes(1, 100_000),
		"zeros300K":  make([]byte, 300_000),
	}
}

// largeInputs span more than one 4 MiB LZ4 block; they are used where block
// boundaries matter (LZ4) and kept out of the slow gzip paths.
func largeInputs() map[string][]byte {
	return map[string][]byte{
		"zeros5M":        make([]byte, 5<<20),
		"mixed4MPlus":    append(randomBytes(3, 3<<20), bytes.Repeat([]byte("abcd"), 300_000)...),
		"randomBlockish": randomBytes(4, lz4BlockMax+17),
	}
}

func TestCompressRoundTripsEveryInput(t *testing.T) {
	type input struct {
		data  []byte
		comps []Compression
	}
	inputs := map[string]input{}
	for name, in := range testInputs() {
		inputs[name] = input{in, AllCompressions}
	}
	for name, in := range largeInputs() {
		inputs[name] = input{in, []Compression{CompressionNone, CompressionSnappy, CompressionLZ4}}
	}
	for name, tc := range inputs {
		in := tc.data
		for _, c := range tc.comps {
			enc, err := Compress(nil, c, in)
			if err != nil {
				t.Fatalf("%s/%v: %v", name, c, err)
			}
			out, err := Decompress(nil, c, enc, len(in))
			if err != nil {
				t.Fatalf("%s/%v: %v", name, c, err)
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("%s/%v: round trip differs", name, c)
			}
			// Appending keeps what dst held.
			enc2, _ := Compress([]byte("prefix"), c, in)
			if !bytes.Equal(enc2[6:], enc) || string(enc2[:6]) != "prefix" {
				t.Fatalf("%s/%v: append changed the encoding", name, c)
			}
		}
	}
}

func TestCompressIsByteIdenticalToReferenceWriters(t *testing.T) {
	for name, in := range largeInputs() {
		var lz bytes.Buffer
		lw := lz4.NewWriter(&lz)
		lw.Write(in)
		lw.Close()
		if got := lz4Compress(nil, in); !bytes.Equal(got, lz.Bytes()) {
			t.Fatalf("%s: lz4 differs from lz4.NewWriter (%d vs %d bytes)", name, len(got), lz.Len())
		}
	}
	for name, in := range testInputs() {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(in)
		zw.Close()
		var lz bytes.Buffer
		lw := lz4.NewWriter(&lz)
		lw.Write(in)
		lw.Close()
		want := map[Compression][]byte{
			CompressionGzip:   gz.Bytes(),
			CompressionSnappy: snappy.Encode(nil, in),
			CompressionLZ4:    lz.Bytes(),
		}
		for c, w := range want {
			got, err := Compress(nil, c, in)
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("%s/%v: differs from the reference writer (%d vs %d bytes, %v)", name, c, len(got), len(w), err)
			}
		}
	}
}

func TestSnappyDecodesXerialStreams(t *testing.T) {
	for name, in := range testInputs() {
		x := xerial.Encode(nil, in)
		out, err := Decompress(nil, CompressionSnappy, x, len(in))
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestLZ4DecodesEveryFrameOption(t *testing.T) {
	in := append(randomBytes(5, 1<<20), bytes.Repeat([]byte("abcd"), 150_000)...)
	opts := map[string][]lz4.Option{
		"Block64K":        {lz4.BlockSizeOption(lz4.Block64Kb)},
		"Block256K":       {lz4.BlockSizeOption(lz4.Block256Kb)},
		"Block1M":         {lz4.BlockSizeOption(lz4.Block1Mb)},
		"BlockChecksum":   {lz4.BlockChecksumOption(true)},
		"NoChecksum":      {lz4.ChecksumOption(false)},
		"ContentSize":     {lz4.SizeOption(uint64(len(in)))},
		"HighCompression": {lz4.CompressionLevelOption(lz4.Level9)},
		"Concurrent":      {lz4.ConcurrencyOption(4)},
	}
	for name, o := range opts {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(o...); err != nil {
			t.Fatal(err)
		}
		w.Write(in)
		w.Close()
		out, err := Decompress(nil, CompressionLZ4, buf.Bytes(), len(in))
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// linkedLZ4Frame hand-builds a frame with dependent blocks: block 1 is n
// bytes stored raw (1001 <= n <= 64 KiB), block 2 is one 1,000-byte match
// reaching n-1 bytes back into block 1, then 5 literals. It returns the frame
// and its content.
func linkedLZ4Frame(n int, independentFlag bool) ([]byte, []byte) {
	first := randomBytes(6, n)
	content := append(append(bytes.Clone(first), first[1:1001]...), "12345"...)
	flg := byte(0x44) // version 01, dependent blocks, content checksum
	if independentFlag {
		flg |= 0x20
	}
	f := binary.LittleEndian.AppendUint32(nil, lz4FrameMagic)
	f = append(f, flg, 0x40) // BD: 64 KiB blocks
	f = append(f, byte(xxh32(f[4:6])>>8))
	f = binary.LittleEndian.AppendUint32(f, uint32(len(first))|lz4Uncompressed)
	f = append(f, first...)
	// token: 0 literals, match length 15 (+ 4 + extension 981 = 1000).
	off := n - 1
	block := []byte{0x0F, byte(off), byte(off >> 8), 255, 255, 255, 216, 0x50, '1', '2', '3', '4', '5'}
	f = binary.LittleEndian.AppendUint32(f, uint32(len(block)))
	f = append(f, block...)
	f = append(f, 0, 0, 0, 0)
	f = binary.LittleEndian.AppendUint32(f, xxh32(content))
	return f, content
}

func TestLZ4DecodesLinkedBlocks(t *testing.T) {
	for _, n := range []int{1001, 4096, 64 << 10} {
		frame, content := linkedLZ4Frame(n, false)
		out, err := Decompress(nil, CompressionLZ4, frame, len(content))
		if err != nil || !bytes.Equal(out, content) {
			t.Fatalf("linked frame, window %d: %v", n, err)
		}
	}
	// The same block in an independent-blocks frame references nothing.
	frame, content := linkedLZ4Frame(64<<10, true)
	_, err := Decompress(nil, CompressionLZ4, frame, len(content))
	wantCode(t, err, errcode.InvalidCompressedPayload, "corrupt")
}

func TestXXH32KnownValues(t *testing.T) {
	for in, want := range map[string]uint32{
		"":    0x02CC5D05,
		"a":   0x550D7456,
		"abc": 0x32D153FF,
		"Nobody inspects the spammish repetition": 0xE2293B2F,
	} {
		if got := xxh32([]byte(in)); got != want {
			t.Errorf("xxh32(%q) = %#x, want %#x", in, got, want)
		}
	}
}

func TestDecompressRejectsBombs(t *testing.T) {
	zeros := make([]byte, 1<<20)
	gz, _ := Compress(nil, CompressionGzip, zeros)
	sn, _ := Compress(nil, CompressionSnappy, zeros)
	lz, _ := Compress(nil, CompressionLZ4, zeros)
	xe := xerial.Encode(nil, zeros)
	var sized bytes.Buffer
	w := lz4.NewWriter(&sized)
	w.Apply(lz4.SizeOption(uint64(len(zeros))))
	w.Write(zeros)
	w.Close()
	stored := lz4Compress(nil, []byte("abcdefgh")) // too short to compress: stored raw
	cases := []struct {
		name     string
		c        Compression
		src      []byte
		declared int
	}{
		{"Gzip", CompressionGzip, gz, 1000},
		{"GzipOneByteMore", CompressionGzip, gz, len(zeros) - 1},
		{"SnappyRaw", CompressionSnappy, sn, 1000},
		{"SnappyXerial", CompressionSnappy, xe, 40_000},
		{"LZ4", CompressionLZ4, lz, 1000},
		{"LZ4ContentSize", CompressionLZ4, sized.Bytes(), 1000},
		{"LZ4StoredBlock", CompressionLZ4, stored, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decompress(nil, tc.c, tc.src, tc.declared)
			wantCode(t, err, errcode.DecompressedSizeExceeded, "")
		})
	}
}

func TestDecompressNeverWritesPastDeclaredLength(t *testing.T) {
	zeros := make([]byte, 1<<20)
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4} {
		enc, _ := Compress(nil, c, zeros)
		dst := bytes.Repeat([]byte{0xAA}, 2000)
		_, err := Decompress(dst[:0:1000], c, enc, 1000)
		wantCode(t, err, errcode.DecompressedSizeExceeded, "")
		for i := 1000; i < len(dst); i++ {
			if dst[i] != 0xAA {
				t.Fatalf("%v wrote byte %d beyond the declared length", c, i)
			}
		}
	}
}

func TestDecompressRejectsCorruptOrShortInput(t *testing.T) {
	in := []byte(compressionPhrase)
	gz, _ := Compress(nil, CompressionGzip, in)
	sn, _ := Compress(nil, CompressionSnappy, in)
	lz, _ := Compress(nil, CompressionLZ4, in)
	xe := xerial.Encode(nil, in)
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x40; return b }
	set := func(b []byte, i int, v byte) []byte { b = bytes.Clone(b); b[i] = v; return b }
	var withBlockSum bytes.Buffer
	w := lz4.NewWriter(&withBlockSum)
	w.Apply(lz4.BlockChecksumOption(true))
	w.Write(in)
	w.Close()
	bs := withBlockSum.Bytes()
	cases := []struct {
		name     string
		c        Compression
		src      []byte
		declared int
		reason   string
	}{
		{"NoneLengthMismatch", CompressionNone, in, len(in) + 1, "length_mismatch"},
		{"UnknownCompression", Compression(4), gz, len(in), "unknown_compression"},
		{"NegativeLength", CompressionGzip, gz, -1, "bad_length"},
		{"UnreachableGzip", CompressionGzip, gz, len(gz)*1032 + 1, "unreachable_length"},
		{"UnreachableSnappy", CompressionSnappy, sn, len(sn)*22 + 1, "unreachable_length"},
		{"UnreachableLZ4", CompressionLZ4, lz, len(lz)*255 + 1, "unreachable_length"},
		{"GzipShort", CompressionGzip, gz, len(in) + 1, "short"},
		{"GzipBadHeader", CompressionGzip, flip(gz, 0), len(in), "corrupt"},
		{"GzipBadTrailerCRC", CompressionGzip, flip(gz, len(gz)-6), len(in), "corrupt"},
		{"GzipBadTrailerSize", CompressionGzip, flip(gz, len(gz)-2), len(in), "corrupt"},
		{"GzipTruncated", CompressionGzip, gz[:len(gz)-3], len(in), "corrupt"},
		{"GzipTrailingGarbage", CompressionGzip, append(bytes.Clone(gz), 1, 2, 3), len(in), "corrupt"},
		{"SnappyShort", CompressionSnappy, sn, len(in) + 1, "short"},
		{"SnappyCopyBeforeStart", CompressionSnappy, set(set(sn, len(sn)-2, 0xFF), len(sn)-1, 0xFF), len(in), "corrupt"},
		{"SnappyTruncated", CompressionSnappy, sn[:len(sn)-1], len(in), "corrupt"},
		{"SnappyBadVarint", CompressionSnappy, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, 1, "corrupt"},
		{"XerialShort", CompressionSnappy, xe, len(in) + 1, "short"},
		{"XerialHeaderOnlyTruncated", CompressionSnappy, xe[:12], 0, "corrupt"},
		{"XerialChunkTooLong", CompressionSnappy, set(xe, 16, 0x7F), len(in), "corrupt"},
		{"XerialLengthTruncated", CompressionSnappy, append(bytes.Clone(xe), 0, 0), len(in), "corrupt"},
		{"LZ4Short", CompressionLZ4, lz, len(in) + 1, "short"},
		{"LZ4BadMagic", CompressionLZ4, set(lz, 0, 0x05), len(in), "corrupt"},
		{"LZ4LegacyMagic", CompressionLZ4, append([]byte{0x02, 0x21, 0x4C, 0x18}, lz[4:]...), len(in), "corrupt"},
		{"LZ4BadVersion", CompressionLZ4, set(lz, 4, 0xA4), len(in), "corrupt"},
		{"LZ4ReservedFLG", CompressionLZ4, set(lz, 4, 0x66), len(in), "corrupt"},
		{"LZ4DictID", CompressionLZ4, set(lz, 4, 0x65), len(in), "corrupt"},
		{"LZ4BadBD", CompressionLZ4, set(lz, 5, 0x30), len(in), "corrupt"},
		{"LZ4BadHeaderChecksum", CompressionLZ4, flip(lz, 6), len(in), "corrupt"},
		{"LZ4BadContentChecksum", CompressionLZ4, flip(lz, len(lz)-1), len(in), "corrupt"},
		{"LZ4BadBlockChecksum", CompressionLZ4, flip(bs, len(bs)-9), len(in), "corrupt"},
		{"LZ4CorruptBlock", CompressionLZ4, flip(lz, 12), len(in), "corrupt"},
		{"LZ4Truncated", CompressionLZ4, lz[:len(lz)-6], len(in), "corrupt"},
		{"LZ4TrailingData", CompressionLZ4, append(bytes.Clone(lz), 0), len(in), "corrupt"},
		{"LZ4SecondFrame", CompressionLZ4, append(bytes.Clone(lz), lz...), len(in), "corrupt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decompress(nil, tc.c, tc.src, tc.declared)
			wantCode(t, err, errcode.InvalidCompressedPayload, tc.reason)
		})
	}
}

func TestExpansionBoundsHoldForMaximallyCompressibleData(t *testing.T) {
	// The ratio bounds refuse impossible declarations; legitimate extreme
	// ratios must stay inside them.
	zeros := make([]byte, 4<<20)
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4} {
		enc, _ := Compress(nil, c, zeros)
		if int64(len(zeros)) > MaxDecodedLength(c, len(enc)) {
			t.Fatalf("%v: %d bytes from %d exceeds the bound", c, len(zeros), len(enc))
		}
		if _, err := Decompress(nil, c, enc, len(zeros)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompressRefusesAbovePublicBound(t *testing.T) {
	_, err := Compress(nil, CompressionNone, make([]byte, PublicMaxPayload+1))
	wantCode(t, err, errcode.MalformedInput, "too_large")
}

func TestDecompressReusesDestination(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	in := testInputs()["text64K"]
	for _, c := range []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4} {
		enc, _ := Compress(nil, c, in)
		dst := make([]byte, len(in))
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := Decompress(dst, c, enc, len(in)); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: Decompress into a large enough dst allocates %.1f times", c, allocs)
		}
	}
}
