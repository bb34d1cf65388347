package wire

// Payload length bounds (WIRE-V2 section 3).
const (
	// PublicMaxPayload (64 MiB) is the bound every published Wire v2 SDK
	// enforces on both encoded_length and decoded_length. Strata's encoders
	// never write a payload above it, so every public peer accepts our frames.
	PublicMaxPayload = 64 << 20

	// ServerMaxPayload (267,108,864, SERVICE-SPEC section 8) is the default
	// bound a Strata server applies to incoming encoded and decoded lengths.
	// It is not a power of two; it is the spec's number, kept as is.
	ServerMaxPayload = 267_108_864

	// NegotiationMaxPayload bounds a frame read before negotiation: a valid
	// negotiation request is at most 10 bytes, so anything near this size is
	// garbage and is refused before a byte of payload is buffered.
	NegotiationMaxPayload = 64

	// PreAuthMaxPayload bounds frames read after negotiation but before the
	// connection authenticated (when auth is on): an AUTH command with a
	// principal and a token fits comfortably.
	PreAuthMaxPayload = 64 << 10
)

// Limits bounds the lengths a Codec accepts in frame headers. Both lengths are
// checked on the 32-byte header, before any payload byte is read or any buffer
// is allocated.
type Limits struct {
	// MaxEncodedLength bounds encoded_length (the bytes on the wire).
	MaxEncodedLength uint32
	// MaxDecodedLength bounds decoded_length (the payload after decompression).
	MaxDecodedLength uint32
}

// Predefined limits. A gateway moves a connection from NegotiationLimits to
// PreAuthLimits to ServerLimits as it negotiates and authenticates; a client
// reads with PublicLimits.
var (
	ServerLimits      = Limits{MaxEncodedLength: ServerMaxPayload, MaxDecodedLength: ServerMaxPayload}
	PublicLimits      = Limits{MaxEncodedLength: PublicMaxPayload, MaxDecodedLength: PublicMaxPayload}
	NegotiationLimits = Limits{MaxEncodedLength: NegotiationMaxPayload, MaxDecodedLength: NegotiationMaxPayload}
	PreAuthLimits     = Limits{MaxEncodedLength: PreAuthMaxPayload, MaxDecodedLength: PreAuthMaxPayload}
)

// orDefault returns l, or ServerLimits for the zero value, so a zero Codec is
// usable.
func (l Limits) orDefault() Limits {
	if l == (Limits{}) {
		return ServerLimits
	}
	return l
}
