package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/strataio/strata/libs/errcode"
)

// rawHeader builds header bytes field by field, bypassing every check.
type rawHeader struct {
	magic   uint32
	version uint16
	kind    uint8
	flags   uint8
	command uint16
	status  uint16
	reqID   uint64
	enc     uint32
	dec     uint32
	crc     uint32
}

func (r rawHeader) bytes() []byte {
	b := make([]byte, HeaderSize)
	binary.BigEndian.PutUint32(b[0:], r.magic)
	binary.BigEndian.PutUint16(b[4:], r.version)
	b[6], b[7] = r.kind, r.flags
	binary.BigEndian.PutUint16(b[8:], r.command)
	binary.BigEndian.PutUint16(b[10:], r.status)
	binary.BigEndian.PutUint64(b[12:], r.reqID)
	binary.BigEndian.PutUint32(b[20:], r.enc)
	binary.BigEndian.PutUint32(b[24:], r.dec)
	binary.BigEndian.PutUint32(b[28:], r.crc)
	return b
}

// goodRequest is a valid uncompressed PUBLISH request header with 5 bytes.
func goodRequest() rawHeader {
	return rawHeader{magic: FrameMagic, version: 2, kind: 3, flags: 0x01, command: 10, reqID: 1, enc: 5, dec: 5}
}

func TestHeaderRulesRejectInvalidFrames(t *testing.T) {
	mod := func(f func(*rawHeader)) rawHeader { h := goodRequest(); f(&h); return h }
	none := &Codec{}
	gz := &Codec{Compression: CompressionGzip}
	small := &Codec{Limits: Limits{MaxEncodedLength: 4, MaxDecodedLength: 100}}
	cases := []struct {
		name   string
		codec  *Codec
		h      rawHeader
		code   errcode.Code
		reason string
	}{
		{"BadMagic", none, mod(func(h *rawHeader) { h.magic = 0x43525331 }), errcode.InvalidFrame, "bad_magic"},
		{"Version1", none, mod(func(h *rawHeader) { h.version = 1 }), errcode.InvalidFrame, "bad_version"},
		{"Version3", none, mod(func(h *rawHeader) { h.version = 3 }), errcode.InvalidFrame, "bad_version"},
		{"Kind0", none, mod(func(h *rawHeader) { h.kind = 0 }), errcode.InvalidFrame, "bad_kind"},
		{"Kind6", none, mod(func(h *rawHeader) { h.kind = 6 }), errcode.InvalidFrame, "bad_kind"},
		{"ReservedFlagBit", none, mod(func(h *rawHeader) { h.flags = 0x11 }), errcode.InvalidFrame, "bad_flags"},
		{"HighNibbleFlags", none, mod(func(h *rawHeader) { h.flags = 0x81 }), errcode.InvalidFrame, "bad_flags"},
		{"MissingExplicitBit", none, mod(func(h *rawHeader) { h.flags = 0x00 }), errcode.InvalidFrame, "bad_flags"},
		{"CompressionID4", none, mod(func(h *rawHeader) { h.flags = 0x09 }), errcode.InvalidFrame, "compression_mismatch"},
		{"CompressionID7", none, mod(func(h *rawHeader) { h.flags = 0x0F }), errcode.InvalidFrame, "compression_mismatch"},
		{"GzipWhenNoneNegotiated", none, mod(func(h *rawHeader) { h.flags = 0x03 }), errcode.InvalidFrame, "compression_mismatch"},
		{"NoneWhenGzipNegotiated", gz, goodRequest(), errcode.InvalidFrame, "compression_mismatch"},
		{"NegotiationWithFlags", none, rawHeader{magic: FrameMagic, version: 2, kind: 1, flags: 0x01, command: 46, enc: 10, dec: 10}, errcode.InvalidFrame, "bad_flags"},
		{"NegotiationWrongCommand", none, rawHeader{magic: FrameMagic, version: 2, kind: 1, command: 10, enc: 10, dec: 10}, errcode.InvalidFrame, "bad_command"},
		{"NegotiationWithTableBIDUnderTableA", none, rawHeader{magic: FrameMagic, version: 2, kind: 1, command: 47, enc: 10, dec: 10}, errcode.InvalidFrame, "bad_command"},
		{"RequestCarryingNegotiate", none, mod(func(h *rawHeader) { h.command = 46 }), errcode.InvalidFrame, "bad_command"},
		{"NegotiationRequestStatusOK", none, rawHeader{magic: FrameMagic, version: 2, kind: 1, command: 46, status: 1, enc: 10, dec: 10}, errcode.InvalidFrame, "bad_status"},
		{"NegotiationResponseStatusNone", none, rawHeader{magic: FrameMagic, version: 2, kind: 2, command: 46, status: 0, enc: 3, dec: 3}, errcode.InvalidFrame, "bad_status"},
		{"NegotiationResponseStatusStreamEnd", none, rawHeader{magic: FrameMagic, version: 2, kind: 2, command: 46, status: 3, enc: 3, dec: 3}, errcode.InvalidFrame, "bad_status"},
		{"RequestStatusOK", none, mod(func(h *rawHeader) { h.status = 1 }), errcode.InvalidFrame, "bad_status"},
		{"RequestZeroID", none, mod(func(h *rawHeader) { h.reqID = 0 }), errcode.InvalidFrame, "zero_request_id"},
		{"ResponseStatusNone", none, mod(func(h *rawHeader) { h.kind = 4 }), errcode.InvalidFrame, "bad_status"},
		{"ResponseStatusStreamEnd", none, mod(func(h *rawHeader) { h.kind, h.status = 4, 3 }), errcode.InvalidFrame, "bad_status"},
		{"ResponseZeroID", none, mod(func(h *rawHeader) { h.kind, h.status, h.reqID = 4, 1, 0 }), errcode.InvalidFrame, "zero_request_id"},
		{"StreamStatusNone", none, mod(func(h *rawHeader) { h.kind = 5 }), errcode.InvalidFrame, "bad_status"},
		{"StreamStatus4", none, mod(func(h *rawHeader) { h.kind, h.status = 5, 4 }), errcode.InvalidFrame, "bad_status"},
		{"StreamZeroID", none, mod(func(h *rawHeader) { h.kind, h.status, h.reqID = 5, 1, 0 }), errcode.InvalidFrame, "zero_request_id"},
		{"CommandZero", none, mod(func(h *rawHeader) { h.command = 0 }), errcode.InvalidFrame, "unknown_command"},
		{"CommandAboveTableA", none, mod(func(h *rawHeader) { h.command = 57 }), errcode.InvalidFrame, "unknown_command"},
		{"BrowseIDUnderTableB", &Codec{Table: TableB}, mod(func(h *rawHeader) { h.command = 55 }), errcode.InvalidFrame, "unknown_command"},
		{"EncodedAboveLimit", small, mod(func(h *rawHeader) { h.enc, h.dec = 5, 5 }), errcode.InvalidFrame, "too_large"},
		{"DecodedAboveLimit", &Codec{Limits: Limits{MaxEncodedLength: 100, MaxDecodedLength: 4}}, goodRequest(), errcode.InvalidFrame, "too_large"},
		{"EncodedAboveServerDefault", none, mod(func(h *rawHeader) { h.enc, h.dec = ServerMaxPayload+1, ServerMaxPayload+1 }), errcode.InvalidFrame, "too_large"},
		{"DecodedAboveServerDefault", gz, mod(func(h *rawHeader) { h.flags, h.enc, h.dec = 0x03, 1<<20, ServerMaxPayload+1 }), errcode.InvalidFrame, "too_large"},
		{"UncompressedLengthsDiffer", none, mod(func(h *rawHeader) { h.dec = 6 }), errcode.InvalidFrame, "length_mismatch"},
		{"NegotiationLengthsDiffer", none, rawHeader{magic: FrameMagic, version: 2, kind: 1, command: 46, enc: 10, dec: 11}, errcode.InvalidFrame, "length_mismatch"},
		{"UnreachableDecodedLength", gz, mod(func(h *rawHeader) { h.flags, h.enc, h.dec = 0x03, 20, 20*1032+1 }), errcode.InvalidCompressedPayload, "unreachable_length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.h.bytes()
			h, err := ParseHeader(b)
			if err == nil {
				err = tc.codec.CheckHeader(h)
			}
			wantCode(t, err, tc.code, tc.reason)
			// DecodeFrame reports the same rule.
			_, err = tc.codec.DecodeFrame(append(b, make([]byte, min(int(tc.h.enc), 64))...), nil)
			wantCode(t, err, tc.code, tc.reason)
		})
	}
}

func TestHeaderRulesAcceptValidCombinations(t *testing.T) {
	cases := []struct {
		name  string
		codec *Codec
		h     rawHeader
	}{
		{"NegotiationRequestAnyID", &Codec{}, rawHeader{kind: 1, command: 46, reqID: 9, enc: 10, dec: 10}},
		{"NegotiationResponseZeroID", &Codec{}, rawHeader{kind: 2, command: 46, status: 1, enc: 3, dec: 3}},
		{"NegotiationResponseError", &Codec{}, rawHeader{kind: 2, command: 46, status: 2, reqID: 5, enc: 3, dec: 3}},
		{"NegotiationTableB", &Codec{Table: TableB}, rawHeader{kind: 1, command: 47, enc: 10, dec: 10}},
		{"RequestTableBTxnAppendStream", &Codec{Table: TableB}, rawHeader{kind: 3, flags: 1, command: 29, reqID: 1}},
		{"ResponseError", &Codec{}, rawHeader{kind: 4, flags: 1, command: 10, status: 2, reqID: 3}},
		{"StreamEnd", &Codec{}, rawHeader{kind: 5, flags: 1, command: 12, status: 3, reqID: 3}},
		{"StreamError", &Codec{}, rawHeader{kind: 5, flags: 1, command: 12, status: 2, reqID: 3}},
		{"LZ4Negotiated", &Codec{Compression: CompressionLZ4}, rawHeader{kind: 3, flags: 0x07, command: 56, reqID: 3, enc: 10, dec: 2000}},
		{"AtServerLimit", &Codec{}, rawHeader{kind: 3, flags: 1, command: 1, reqID: 3, enc: ServerMaxPayload, dec: ServerMaxPayload}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.h.magic, tc.h.version = FrameMagic, 2
			h, err := ParseHeader(tc.h.bytes())
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.codec.CheckHeader(h); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDecodeFrameRejectsBadPayloads(t *testing.T) {
	c := &Codec{}
	frame, err := c.AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: 1}, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ShortHeader", func(t *testing.T) {
		_, err := c.DecodeFrame(frame[:31], nil)
		wantCode(t, err, errcode.InvalidFrame, "short_header")
	})
	t.Run("MissingPayloadByte", func(t *testing.T) {
		_, err := c.DecodeFrame(frame[:len(frame)-1], nil)
		wantCode(t, err, errcode.InvalidFrame, "length_mismatch")
	})
	t.Run("ExtraByte", func(t *testing.T) {
		_, err := c.DecodeFrame(append(bytes.Clone(frame), 0), nil)
		wantCode(t, err, errcode.InvalidFrame, "length_mismatch")
	})
	t.Run("ChecksumMismatch", func(t *testing.T) {
		bad := bytes.Clone(frame)
		bad[len(bad)-1] ^= 1
		f, err := c.DecodeFrame(bad, nil)
		wantCode(t, err, errcode.InvalidFrame, "checksum_mismatch")
		if f.Header.RequestID != 1 {
			t.Fatalf("header not returned with the payload error: %+v", f.Header)
		}
	})
	t.Run("ChecksumFieldWrong", func(t *testing.T) {
		bad := bytes.Clone(frame)
		bad[28] ^= 0x80
		_, err := c.DecodeFrame(bad, nil)
		wantCode(t, err, errcode.InvalidFrame, "checksum_mismatch")
	})
	t.Run("GzipBombInValidFrame", func(t *testing.T) {
		gz := &Codec{Compression: CompressionGzip}
		big, _ := Compress(nil, CompressionGzip, make([]byte, 10000))
		h := Header{Kind: KindRequest, Flags: 0x03, Command: 10, RequestID: 1, EncodedLength: uint32(len(big)),
			DecodedLength: 100, Checksum: Checksum(big)}
		_, err := gz.DecodeFrame(append(h.AppendTo(nil), big...), nil)
		wantCode(t, err, errcode.DecompressedSizeExceeded, "")
	})
}

func TestAppendFrameRefusesWhatDecodersRefuse(t *testing.T) {
	c := &Codec{}
	cases := []struct {
		name string
		h    Header
	}{
		{"ZeroRequestID", Header{Kind: KindRequest, Command: 10}},
		{"UnknownCommand", Header{Kind: KindRequest, Command: 99, RequestID: 1}},
		{"RequestWithStatus", Header{Kind: KindRequest, Command: 10, RequestID: 1, Status: StatusOK}},
		{"NegotiationOtherCommand", Header{Kind: KindNegotiationRequest, Command: 10}},
		{"BadKind", Header{Kind: 9, Command: 10, RequestID: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.AppendFrame([]byte("keep"), tc.h, []byte("x"))
			wantCode(t, err, errcode.InvalidFrame, "")
			if string(out) != "keep" {
				t.Fatalf("dst modified: %q", out)
			}
		})
	}
	t.Run("AbovePublicBound", func(t *testing.T) {
		_, err := c.AppendFrame(nil, Header{Kind: KindRequest, Command: 10, RequestID: 1}, make([]byte, PublicMaxPayload+1))
		wantCode(t, err, errcode.InvalidFrame, "too_large")
	})
}

func TestAppendFrameRoundTripsEveryCompression(t *testing.T) {
	payload := bytes.Repeat([]byte("strata wire v2 "), 1000)
	for _, comp := range AllCompressions {
		for _, table := range []*CommandTable{TableA, TableB} {
			c := &Codec{Table: table, Compression: comp}
			id, _ := table.ID(CmdConsume)
			frame, err := c.AppendFrame(nil, Header{Kind: KindResponse, Status: StatusOK, Command: id, RequestID: 7}, payload)
			if err != nil {
				t.Fatal(err)
			}
			if frame[7] != 1|byte(comp)<<1 {
				t.Fatalf("%v flags %#x", comp, frame[7])
			}
			f, err := c.DecodeFrame(frame, nil)
			if err != nil || !bytes.Equal(f.Payload, payload) {
				t.Fatalf("%v/%s: %v", comp, table.Name(), err)
			}
			// Negotiation frames are never compressed, whatever was negotiated.
			neg, err := c.AppendFrame(nil, Header{Kind: KindNegotiationResponse, Status: StatusOK, Command: table.NegotiateID()},
				NegotiationResponse{Version: 2, Compression: comp}.AppendTo(nil))
			if err != nil || neg[7] != 0 || len(neg) != HeaderSize+3 {
				t.Fatalf("negotiation frame %x, %v", neg, err)
			}
			if _, err := c.DecodeFrame(neg, nil); err != nil {
				t.Fatal(err)
			}
			// AppendHeader + separately written payload equals AppendFrame.
			enc, _ := Compress(nil, comp, payload)
			hdr, err := c.AppendHeader(nil, Header{Kind: KindResponse, Status: StatusOK, Command: id, RequestID: 7}, enc, len(payload))
			if err != nil || !bytes.Equal(append(hdr, enc...), frame) {
				t.Fatalf("AppendHeader differs: %v", err)
			}
		}
	}
}

func TestAppendFrameReusesDestination(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	c := &Codec{Compression: CompressionLZ4}
	payload := bytes.Repeat([]byte("abc"), 10000)
	buf := make([]byte, 0, 1<<20)
	h := Header{Kind: KindRequest, Command: 10, RequestID: 1}
	allocs := testing.AllocsPerRun(50, func() {
		var err error
		if buf, err = c.AppendFrame(buf[:0], h, payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendFrame allocates %.1f times with a large enough dst", allocs)
	}
}
