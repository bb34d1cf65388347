package wire

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/strataio/strata/libs/errcode"
)

func TestFrameReaderReadsAStreamOfFrames(t *testing.T) {
	neg := &Codec{Limits: NegotiationLimits}
	var stream []byte
	req, _ := NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: []Compression{CompressionLZ4}}.AppendTo(nil)
	stream, err := neg.AppendFrame(stream, Header{Kind: KindNegotiationRequest, Command: 46}, req)
	if err != nil {
		t.Fatal(err)
	}
	after := &Codec{Compression: CompressionLZ4}
	payloads := [][]byte{[]byte("one"), bytes.Repeat([]byte("two"), 100_000), {}}
	for i, p := range payloads {
		if stream, err = after.AppendFrame(stream, Header{Kind: KindRequest, Command: 10, RequestID: uint64(i + 1)}, p); err != nil {
			t.Fatal(err)
		}
	}
	fr := NewFrameReader(bytes.NewReader(stream))
	f, err := fr.ReadFrame(neg)
	if err != nil || f.Header.Kind != KindNegotiationRequest {
		t.Fatalf("%+v, %v", f.Header, err)
	}
	if _, err := DecodeNegotiationRequest(f.Payload); err != nil {
		t.Fatal(err)
	}
	for i, p := range payloads {
		f, err := fr.ReadFrame(after)
		if err != nil || !bytes.Equal(f.Payload, p) || f.Header.RequestID != uint64(i+1) {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if _, err := fr.ReadFrame(after); err != io.EOF {
		t.Fatalf("clean end: %v, want io.EOF", err)
	}
}

func TestFrameReaderReportsTruncation(t *testing.T) {
	c := &Codec{}
	frame, _ := c.AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: 1}, []byte("hello"))
	for _, n := range []int{1, 31, 32, 36} {
		_, err := NewFrameReader(bytes.NewReader(frame[:n])).ReadFrame(c)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}

// failReader fails the test if anything reads past limit bytes.
type failReader struct {
	t     *testing.T
	r     io.Reader
	limit int
	read  int
}

func (f *failReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	f.read += n
	if f.read > f.limit {
		f.t.Fatalf("read %d bytes, more than the %d-byte header", f.read, f.limit)
	}
	return n, err
}

func TestFrameReaderRefusesLargeFramesBeforeReadingThem(t *testing.T) {
	h := goodRequest()
	h.enc, h.dec = 1<<20, 1<<20
	stream := append(h.bytes(), make([]byte, 1<<20)...)
	fr := NewFrameReader(&failReader{t: t, r: bytes.NewReader(stream), limit: HeaderSize})
	_, err := fr.ReadFrame(&Codec{Limits: PreAuthLimits})
	wantCode(t, err, errcode.InvalidFrame, "too_large")
}

func TestFrameReaderGrowsWithTheBytesThatArrive(t *testing.T) {
	// A header declaring 200 MB followed by 10 bytes must not allocate 200 MB.
	h := goodRequest()
	h.enc, h.dec = 200<<20, 200<<20
	stream := append(h.bytes(), make([]byte, 10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewFrameReader(bytes.NewReader(stream)).ReadFrame(&Codec{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("allocated %d bytes for 10 received", grew)
	}
}

func TestFrameReaderStaysAlignedAfterPayloadErrors(t *testing.T) {
	c := &Codec{}
	bad, _ := c.AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: 5}, []byte("corrupt me"))
	bad[len(bad)-1] ^= 0xFF
	stream, _ := c.AppendFrame(bad, Header{Kind: KindRequest, Command: 10, RequestID: 6}, []byte("fine"))
	fr := NewFrameReader(bytes.NewReader(stream))
	f, err := fr.ReadFrame(c)
	wantCode(t, err, errcode.InvalidFrame, "checksum_mismatch")
	if f.Header.RequestID != 5 {
		t.Fatalf("header of the failed frame: %+v", f.Header)
	}
	f, err = fr.ReadFrame(c)
	if err != nil || string(f.Payload) != "fine" {
		t.Fatalf("next frame: %v", err)
	}
}

func TestFrameReaderReusesBuffers(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for _, comp := range AllCompressions {
		c := &Codec{Compression: comp}
		frame, _ := c.AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: 1}, bytes.Repeat([]byte("payload "), 4096))
		r := bytes.NewReader(frame)
		fr := NewFrameReader(r)
		fr.ReadFrame(c)
		allocs := testing.AllocsPerRun(50, func() {
			r.Reset(frame)
			if _, err := fr.ReadFrame(c); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: ReadFrame allocates %.1f times per frame in steady state", comp, allocs)
		}
	}
}

// ReadFrameOwned reads what ReadFrame reads, each payload in a buffer of its
// own that later frames do not overwrite.
func TestFrameReaderOwnedPayloads(t *testing.T) {
	for _, comp := range AllCompressions {
		c := &Codec{Compression: comp}
		payloads := [][]byte{[]byte("one"), bytes.Repeat([]byte("two "), 300_000), {}, []byte("four")}
		var stream []byte
		for i, p := range payloads {
			stream, _ = c.AppendFrame(stream, Header{Kind: KindRequest, Command: 10, RequestID: uint64(i + 1)}, p)
		}
		fr := NewFrameReader(bytes.NewReader(stream))
		var got [][]byte
		for i := range payloads {
			f, err := fr.ReadFrameOwned(c)
			if err != nil || f.Header.RequestID != uint64(i+1) {
				t.Fatalf("%v frame %d: %v", comp, i, err)
			}
			got = append(got, f.Payload)
		}
		for i, p := range payloads {
			if !bytes.Equal(got[i], p) {
				t.Fatalf("%v payload %d changed after later reads", comp, i)
			}
		}
		if _, err := fr.ReadFrameOwned(c); err != io.EOF {
			t.Fatalf("clean end: %v, want io.EOF", err)
		}
		frame, _ := c.AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: 1}, []byte("hello"))
		frame[len(frame)-1] ^= 1
		if _, err := NewFrameReader(bytes.NewReader(frame)).ReadFrameOwned(c); err == nil {
			t.Fatalf("%v: corrupted payload accepted", comp)
		}
	}
}

// ReadFrameOwned allocates at most ownedUpFront before the bytes arrive.
func TestFrameReaderOwnedBoundsWhatItAllocatesAhead(t *testing.T) {
	h := goodRequest()
	h.enc, h.dec = 200<<20, 200<<20
	stream := append(h.bytes(), make([]byte, 10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewFrameReader(bytes.NewReader(stream)).ReadFrameOwned(&Codec{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > ownedUpFront+(4<<20) {
		t.Fatalf("allocated %d bytes for 10 received", grew)
	}
}

func TestReadFirstFrameSelectsTheCommandTable(t *testing.T) {
	req, _ := NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: []Compression{CompressionNone}}.AppendTo(nil)
	for _, table := range []*CommandTable{TableA, TableB} {
		frame, err := (&Codec{Table: table}).AppendFrame(nil, Header{Kind: KindNegotiationRequest, Command: table.NegotiateID()}, req)
		if err != nil {
			t.Fatal(err)
		}
		f, got, err := NewFrameReader(bytes.NewReader(frame)).ReadFirstFrame(NegotiationLimits)
		if err != nil || got != table || !bytes.Equal(f.Payload, req) {
			t.Fatalf("table %s: got %v, %v", table.Name(), got, err)
		}
	}
	// A request first is refused, as is a negotiation with another id.
	first, _ := (&Codec{}).AppendFrame(nil, Header{Kind: KindRequest, Command: 1, RequestID: 1}, nil)
	_, _, err := NewFrameReader(bytes.NewReader(first)).ReadFirstFrame(NegotiationLimits)
	wantCode(t, err, errcode.InvalidFrame, "not_negotiation")
	h := rawHeader{magic: FrameMagic, version: 2, kind: 1, command: 45, enc: 7, dec: 7}
	_, _, err = NewFrameReader(bytes.NewReader(append(h.bytes(), req...))).ReadFirstFrame(NegotiationLimits)
	wantCode(t, err, errcode.InvalidFrame, "unknown_command")
	h = rawHeader{magic: FrameMagic, version: 2, kind: 1, command: 46, enc: 1000, dec: 1000}
	_, _, err = NewFrameReader(bytes.NewReader(h.bytes())).ReadFirstFrame(NegotiationLimits)
	wantCode(t, err, errcode.InvalidFrame, "too_large")
	if _, _, err := NewFrameReader(bytes.NewReader(nil)).ReadFirstFrame(NegotiationLimits); err != io.EOF {
		t.Fatalf("empty stream: %v", err)
	}
}

func TestFrameReaderAdmitsBetweenHeaderAndPayload(t *testing.T) {
	c := &Codec{}
	stream, _ := c.AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: 1}, []byte("first"))
	stream, _ = c.AppendFrame(stream, Header{Kind: KindRequest, Command: 10, RequestID: 2}, []byte("second"))
	fr := NewFrameReader(bytes.NewReader(stream))
	for _, want := range []string{"first", "second"} {
		h, err := fr.ReadHeader(c)
		if err != nil || h.DecodedLength != uint32(len(want)) {
			t.Fatalf("header %+v, %v", h, err)
		}
		f, err := fr.ReadPayload(c, h)
		if err != nil || string(f.Payload) != want {
			t.Fatalf("payload %q, %v", f.Payload, err)
		}
	}
}
