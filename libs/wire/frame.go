package wire

import "slices"

// Frame is a decoded frame: its header and its decoded payload.
type Frame struct {
	Header  Header
	Payload []byte
}

// Codec holds the per-connection rules frames are checked against. The zero
// value uses TableA, compression none and ServerLimits. A connection starts
// with the table chosen by TableForNegotiate and NegotiationLimits, and sets
// Compression (and wider Limits) once negotiation succeeded.
type Codec struct {
	// Table maps command ids; nil means TableA.
	Table *CommandTable
	// Compression is the negotiated compression every non-negotiation frame
	// must carry, and the one AppendFrame writes.
	Compression Compression
	// Limits bounds incoming header lengths; the zero value means ServerLimits.
	Limits Limits
}

func (c *Codec) table() *CommandTable {
	if c.Table == nil {
		return TableA
	}
	return c.Table
}

// CheckHeader applies every header rule of WIRE-V2 section 10 that ParseHeader
// does not: the compression flags (explicit bit, valid id equal to the
// negotiated one; flags 0 on negotiation frames), the length limits, equal
// lengths for uncompressed payloads, a decoded length the encoded bytes can
// reach, the kind/status/request-id combinations of table 1.2, and a command
// id known to the table (NEGOTIATE on negotiation frames). It allocates
// nothing on success.
func (c *Codec) CheckHeader(h Header) error {
	if err := c.checkFraming(h); err != nil {
		return err
	}
	lim := c.Limits.orDefault()
	if h.EncodedLength > lim.MaxEncodedLength || h.DecodedLength > lim.MaxDecodedLength {
		return frameError("too_large", "frame length above the limit",
			"encoded_length", u32toa(h.EncodedLength), "decoded_length", u32toa(h.DecodedLength),
			"max_encoded_length", u32toa(lim.MaxEncodedLength), "max_decoded_length", u32toa(lim.MaxDecodedLength))
	}
	return c.checkLengths(h)
}

// kindStatuses are the statuses each frame kind may carry (WIRE-V2 tables
// 1.2 and 1.3), with the words refusing any other.
var kindStatuses = [...]struct {
	allowed []Status
	refusal string
}{
	KindNegotiationRequest:  {[]Status{StatusNone}, "negotiation request status must be NONE"},
	KindNegotiationResponse: {[]Status{StatusOK, StatusError}, "negotiation response status must be OK or ERROR"},
	KindRequest:             {[]Status{StatusNone}, "request status must be NONE"},
	KindResponse:            {[]Status{StatusOK, StatusError}, "response status must be OK or ERROR"},
	KindStream:              {[]Status{StatusOK, StatusError, StatusStreamEnd}, "stream status must be OK, ERROR or STREAM_END"},
}

// checkFraming checks flags, kind/status/request id and command id.
func (c *Codec) checkFraming(h Header) error {
	if !h.Kind.Valid() {
		return frameError("bad_kind", "unknown frame kind", "kind", itoa(int(h.Kind)))
	}
	if h.Flags&flagsReserved != 0 {
		return frameError("bad_flags", "reserved flag bits set", "flags", hex32(uint32(h.Flags)))
	}
	if h.Kind.IsNegotiation() {
		if h.Flags != 0 {
			return frameError("bad_flags", "negotiation frames carry flags 0", "flags", hex32(uint32(h.Flags)))
		}
	} else {
		if h.Flags&FlagCompressionExplicit == 0 {
			return frameError("bad_flags", "compression-explicit flag bit missing", "flags", hex32(uint32(h.Flags)))
		}
		if got := h.Compression(); !got.Valid() || got != c.Compression {
			return frameError("compression_mismatch", "frame compression differs from the negotiated one",
				"compression", itoa(int(got)), "negotiated", c.Compression.String())
		}
	}
	if ks := kindStatuses[h.Kind]; !slices.Contains(ks.allowed, h.Status) {
		return frameError("bad_status", ks.refusal, "status", itoa(int(h.Status)))
	}
	if !h.Kind.IsNegotiation() && h.RequestID == 0 {
		return frameError("zero_request_id", "request, response and stream frames need a non-zero request id",
			"kind", h.Kind.String())
	}
	cmd, ok := c.table().ByID(h.Command)
	if !ok {
		return frameError("unknown_command", "command id not in the connection's command table",
			"command", itoa(int(h.Command)), "table", c.table().Name())
	}
	if h.Kind.IsNegotiation() != (cmd == CmdNegotiate) {
		return frameError("bad_command", "NEGOTIATE is carried by negotiation frames only, and they carry nothing else",
			"command", cmd.String(), "kind", h.Kind.String())
	}
	return nil
}

func (c *Codec) checkLengths(h Header) error {
	comp := h.Compression()
	if h.Kind.IsNegotiation() {
		comp = CompressionNone
	}
	if comp == CompressionNone && h.EncodedLength != h.DecodedLength {
		return frameError("length_mismatch", "uncompressed payload with different encoded and decoded lengths",
			"encoded_length", u32toa(h.EncodedLength), "decoded_length", u32toa(h.DecodedLength))
	}
	if int64(h.DecodedLength) > MaxDecodedLength(comp, int(h.EncodedLength)) {
		return compressedError(comp, "unreachable_length", "declared decoded length exceeds what the encoded bytes can produce")
	}
	return nil
}

// DecodePayload verifies the CRC32C of the encoded payload and decompresses it
// to exactly h.DecodedLength bytes, reusing dst's storage when it is large
// enough. h must have passed CheckHeader. With compression none the result is
// encoded itself.
func (c *Codec) DecodePayload(h Header, encoded, dst []byte) ([]byte, error) {
	if len(encoded) != int(h.EncodedLength) {
		return nil, frameError("length_mismatch", "payload length differs from encoded_length",
			"encoded_length", u32toa(h.EncodedLength), "actual", itoa(len(encoded)))
	}
	if sum := Checksum(encoded); sum != h.Checksum {
		return nil, frameError("checksum_mismatch", "CRC32C of the payload does not match the header",
			"checksum", hex32(h.Checksum), "actual", hex32(sum))
	}
	comp := h.Compression()
	if h.Kind.IsNegotiation() {
		comp = CompressionNone
	}
	return Decompress(dst, comp, encoded, int(h.DecodedLength))
}

// DecodeFrame decodes one complete frame (header and exactly encoded_length
// payload bytes). The payload reuses dst when compressed, or aliases b when
// not. On a failure after the header parsed, the returned Frame still carries
// the header so a server can name the request in its answer.
func (c *Codec) DecodeFrame(b, dst []byte) (Frame, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Frame{}, err
	}
	if err := c.CheckHeader(h); err != nil {
		return Frame{Header: h}, err
	}
	if len(b)-HeaderSize != int(h.EncodedLength) {
		return Frame{Header: h}, frameError("length_mismatch", "frame length differs from 32 + encoded_length",
			"encoded_length", u32toa(h.EncodedLength), "actual", itoa(len(b)-HeaderSize))
	}
	p, err := c.DecodePayload(h, b[HeaderSize:], dst)
	if err != nil {
		return Frame{Header: h}, err
	}
	return Frame{Header: h, Payload: p}, nil
}

// AppendFrame appends a complete frame to dst: it takes Kind, Command, Status
// and RequestID from h, compresses payload with the codec's compression
// (never for negotiation frames), and fills flags, lengths and CRC32C. The
// frame is checked against the same rules as incoming frames, and neither
// length may exceed PublicMaxPayload. With enough capacity in dst it does not
// allocate (gzip and lz4 use pooled state).
func (c *Codec) AppendFrame(dst []byte, h Header, payload []byte) ([]byte, error) {
	comp := c.Compression
	if h.Kind.IsNegotiation() {
		comp = CompressionNone
	}
	if len(payload) > PublicMaxPayload {
		return dst, frameError("too_large", "payload above the public 64 MiB bound", "decoded_length", itoa(len(payload)))
	}
	h.Flags = flagsFor(h.Kind, comp)
	h.DecodedLength = uint32(len(payload))
	if err := c.checkFraming(h); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, HeaderSize+len(payload))
	dst = dst[:start+HeaderSize]
	out, err := Compress(dst, comp, payload)
	if err != nil {
		return dst[:start], err
	}
	enc := out[start+HeaderSize:]
	if len(enc) > PublicMaxPayload {
		return out[:start], frameError("too_large", "encoded payload above the public 64 MiB bound", "encoded_length", itoa(len(enc)))
	}
	h.EncodedLength = uint32(len(enc))
	h.Checksum = Checksum(enc)
	h.Put(out[start:])
	return out, nil
}

// AppendHeader appends the header of a frame whose payload the caller already
// encoded with the codec's compression (or not at all, for compression none
// and negotiation frames), so the payload can be written next to it without
// a copy (net.Buffers / writev). decodedLen is the payload's length before
// compression.
func (c *Codec) AppendHeader(dst []byte, h Header, encoded []byte, decodedLen int) ([]byte, error) {
	comp := c.Compression
	if h.Kind.IsNegotiation() {
		comp = CompressionNone
	}
	if len(encoded) > PublicMaxPayload || decodedLen > PublicMaxPayload || decodedLen < 0 {
		return dst, frameError("too_large", "payload above the public 64 MiB bound",
			"encoded_length", itoa(len(encoded)), "decoded_length", itoa(decodedLen))
	}
	h.Flags = flagsFor(h.Kind, comp)
	h.EncodedLength = uint32(len(encoded))
	h.DecodedLength = uint32(decodedLen)
	if err := c.checkFraming(h); err != nil {
		return dst, err
	}
	if err := c.checkLengths(h); err != nil {
		return dst, err
	}
	h.Checksum = Checksum(encoded)
	return h.AppendTo(dst), nil
}
