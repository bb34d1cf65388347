package wire

import (
	"encoding/binary"
	"strconv"
)

// Frame constants (WIRE-V2 section 1).
const (
	// HeaderSize is the size of every frame header.
	HeaderSize = 32
	// FrameMagic is "CRS2", the first four bytes of every frame.
	FrameMagic uint32 = 0x43525332
	// ProtocolVersion is the only Wire version: 2.
	ProtocolVersion uint16 = 2
)

// Flag bits of header byte 7 (WIRE-V2 table 1.1).
const (
	// FlagCompressionExplicit must be set on every non-negotiation frame and
	// clear on negotiation frames.
	FlagCompressionExplicit uint8 = 0x01
	// FlagCompressionMask holds the compression id in bits 1-3.
	FlagCompressionMask uint8 = 0x0E
	// flagsReserved are the high bits that no frame may set.
	flagsReserved uint8 = 0xF0
)

// Kind is the frame kind (header byte 6, WIRE-V2 table 1.2).
type Kind uint8

// Frame kinds.
const (
	KindNegotiationRequest  Kind = 1
	KindNegotiationResponse Kind = 2
	KindRequest             Kind = 3
	KindResponse            Kind = 4
	KindStream              Kind = 5
)

// Valid reports whether k is one of the five kinds.
func (k Kind) Valid() bool { return k >= KindNegotiationRequest && k <= KindStream }

// IsNegotiation reports whether k is a negotiation request or response, the
// kinds that are never compressed and always carry command NEGOTIATE.
func (k Kind) IsNegotiation() bool {
	return k == KindNegotiationRequest || k == KindNegotiationResponse
}

var kindNames = [...]string{KindNegotiationRequest: "negotiation_request", KindNegotiationResponse: "negotiation_response",
	KindRequest: "request", KindResponse: "response", KindStream: "stream"}

// String returns a readable name of the kind.
func (k Kind) String() string { return nameOf(kindNames[:], k, "kind") }

// nameOf returns names[v], or "<what>(<v>)" for a value without a name.
func nameOf[T ~uint8 | ~uint16](names []string, v T, what string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return what + "(" + strconv.Itoa(int(v)) + ")"
}

// Status is the frame status (header bytes 10-11, WIRE-V2 table 1.3).
type Status uint16

// Frame statuses.
const (
	// StatusNone is carried by requests and negotiation requests.
	StatusNone Status = 0
	// StatusOK marks success, stream data and keepalives.
	StatusOK Status = 1
	// StatusError marks a typed error payload (AppendError / DecodeError).
	StatusError Status = 2
	// StatusStreamEnd marks the last frame of a STREAM (a close control frame).
	StatusStreamEnd Status = 3
)

var statusNames = [...]string{StatusNone: "NONE", StatusOK: "OK", StatusError: "ERROR", StatusStreamEnd: "STREAM_END"}

// String returns the spec name of the status.
func (s Status) String() string { return nameOf(statusNames[:], s, "status") }

// Header is the decoded 32-byte frame header. Command is the numeric wire id;
// map it to a Command through the connection's CommandTable.
type Header struct {
	Kind          Kind
	Flags         uint8
	Command       uint16
	Status        Status
	RequestID     uint64
	EncodedLength uint32
	DecodedLength uint32
	Checksum      uint32
}

// Compression returns the compression id carried in the flags (bits 1-3).
// It is meaningful only when FlagCompressionExplicit is set.
func (h Header) Compression() Compression {
	return Compression((h.Flags & FlagCompressionMask) >> 1)
}

// flagsFor returns the flags byte a frame of kind k carries under compression c.
func flagsFor(k Kind, c Compression) uint8 {
	if k.IsNegotiation() {
		return 0
	}
	return FlagCompressionExplicit | uint8(c)<<1
}

// Put writes the header into b[:HeaderSize]; b must be at least HeaderSize long.
func (h Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	binary.BigEndian.PutUint32(b[0:4], FrameMagic)
	binary.BigEndian.PutUint16(b[4:6], ProtocolVersion)
	b[6] = byte(h.Kind)
	b[7] = h.Flags
	binary.BigEndian.PutUint16(b[8:10], h.Command)
	binary.BigEndian.PutUint16(b[10:12], uint16(h.Status))
	binary.BigEndian.PutUint64(b[12:20], h.RequestID)
	binary.BigEndian.PutUint32(b[20:24], h.EncodedLength)
	binary.BigEndian.PutUint32(b[24:28], h.DecodedLength)
	binary.BigEndian.PutUint32(b[28:32], h.Checksum)
}

// AppendTo appends the 32 header bytes to dst.
func (h Header) AppendTo(dst []byte) []byte {
	var b [HeaderSize]byte
	h.Put(b[:])
	return append(dst, b[:]...)
}

// ParseHeader decodes the first HeaderSize bytes of b and checks the rules
// that need no connection state: magic, version, kind 1..5 and the reserved
// flag bits. Codec.CheckHeader applies the rest.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, frameError("short_header", "frame shorter than the 32-byte header", "length", itoa(len(b)))
	}
	if m := binary.BigEndian.Uint32(b[0:4]); m != FrameMagic {
		return Header{}, frameError("bad_magic", "frame magic is not CRS2", "magic", hex32(m))
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != ProtocolVersion {
		return Header{}, frameError("bad_version", "unsupported wire version", "version", itoa(int(v)))
	}
	h := Header{
		Kind:          Kind(b[6]),
		Flags:         b[7],
		Command:       binary.BigEndian.Uint16(b[8:10]),
		Status:        Status(binary.BigEndian.Uint16(b[10:12])),
		RequestID:     binary.BigEndian.Uint64(b[12:20]),
		EncodedLength: binary.BigEndian.Uint32(b[20:24]),
		DecodedLength: binary.BigEndian.Uint32(b[24:28]),
		Checksum:      binary.BigEndian.Uint32(b[28:32]),
	}
	if !h.Kind.Valid() {
		return Header{}, frameError("bad_kind", "unknown frame kind", "kind", itoa(int(h.Kind)))
	}
	if h.Flags&flagsReserved != 0 {
		return Header{}, frameError("bad_flags", "reserved flag bits set", "flags", hex32(uint32(h.Flags)))
	}
	return h, nil
}
