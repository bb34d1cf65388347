package wire

import "github.com/strataio/strata/libs/errcode"

// maxCompressionPreferences bounds the preference list of a negotiation
// request (one entry per compression id).
const maxCompressionPreferences = 4

// NegotiationRequest is the payload of a kind-1 frame (WIRE-V2 section 4):
// the version range the client speaks and its compressions in preference
// order.
type NegotiationRequest struct {
	MinVersion   uint16
	MaxVersion   uint16
	Compressions []Compression
}

// validate applies the request checks of WIRE-V2 section 4: min >= 1,
// max >= min, 1..4 preferences, each id 0..3, no duplicates.
func (r NegotiationRequest) validate(fail func(reason, msg string, kv ...string) *errcode.Error) error {
	if r.MinVersion < 1 || r.MaxVersion < r.MinVersion {
		return fail("bad_version_range", "negotiation version range invalid",
			"min_version", itoa(int(r.MinVersion)), "max_version", itoa(int(r.MaxVersion)))
	}
	if len(r.Compressions) < 1 || len(r.Compressions) > maxCompressionPreferences {
		return fail("bad_count", "negotiation needs 1 to 4 compression preferences", "count", itoa(len(r.Compressions)))
	}
	var seen [maxCompressionPreferences]bool
	for _, c := range r.Compressions {
		if !c.Valid() {
			return fail("bad_compression", "unknown compression id", "compression", itoa(int(c)))
		}
		if seen[c] {
			return fail("duplicate_compression", "compression listed twice", "compression", c.String())
		}
		seen[c] = true
	}
	return nil
}

// AppendTo appends the encoded request (min u16, max u16, count u16, ids u8).
func (r NegotiationRequest) AppendTo(dst []byte) ([]byte, error) {
	fail := func(reason, msg string, kv ...string) *errcode.Error {
		return encodeError(payloadNegotiation, reason, msg, kv...)
	}
	if err := r.validate(fail); err != nil {
		return dst, err
	}
	dst = appendU16(dst, r.MinVersion)
	dst = appendU16(dst, r.MaxVersion)
	dst = appendU16(dst, uint16(len(r.Compressions)))
	for _, c := range r.Compressions {
		dst = append(dst, byte(c))
	}
	return dst, nil
}

// DecodeNegotiationRequest decodes and validates a negotiation request
// payload; trailing bytes are refused.
func DecodeNegotiationRequest(b []byte) (NegotiationRequest, error) {
	fail := func(reason, msg string, kv ...string) *errcode.Error {
		return decodeError(payloadNegotiation, reason, msg, kv...)
	}
	d := decoder{b: b}
	r := NegotiationRequest{MinVersion: d.u16(), MaxVersion: d.u16()}
	count := int(d.u16())
	if d.short {
		return NegotiationRequest{}, fail("truncated", "negotiation request truncated")
	}
	if count < 1 || count > maxCompressionPreferences {
		return NegotiationRequest{}, fail("bad_count", "negotiation needs 1 to 4 compression preferences", "count", itoa(count))
	}
	if d.remaining() != count {
		return NegotiationRequest{}, fail("bad_length", "negotiation request length does not match its count",
			"count", itoa(count), "remaining", itoa(d.remaining()))
	}
	r.Compressions = make([]Compression, count)
	for i := range r.Compressions {
		r.Compressions[i] = Compression(d.u8())
	}
	if err := r.validate(fail); err != nil {
		return NegotiationRequest{}, err
	}
	return r, nil
}

// NegotiationResponse is the payload of a kind-2 frame: exactly 3 bytes,
// version u16 and compression u8.
type NegotiationResponse struct {
	Version     uint16
	Compression Compression
}

// NegotiationResponseSize is the exact length of a negotiation response.
const NegotiationResponseSize = 3

// AppendTo appends the 3-byte response.
func (r NegotiationResponse) AppendTo(dst []byte) []byte {
	dst = appendU16(dst, r.Version)
	return append(dst, byte(r.Compression))
}

// DecodeNegotiationResponse decodes a response: exactly 3 bytes, version 2,
// a known compression id (what the Python and Java SDKs enforce).
func DecodeNegotiationResponse(b []byte) (NegotiationResponse, error) {
	if len(b) != NegotiationResponseSize {
		return NegotiationResponse{}, decodeError(payloadNegotiation, "bad_length", "negotiation response must be 3 bytes",
			"length", itoa(len(b)))
	}
	r := NegotiationResponse{Version: uint16(b[0])<<8 | uint16(b[1]), Compression: Compression(b[2])}
	if r.Version != ProtocolVersion {
		return NegotiationResponse{}, decodeError(payloadNegotiation, "bad_version", "negotiated version is not 2",
			"version", itoa(int(r.Version)))
	}
	if !r.Compression.Valid() {
		return NegotiationResponse{}, decodeError(payloadNegotiation, "bad_compression", "unknown compression id",
			"compression", itoa(int(r.Compression)))
	}
	return r, nil
}

// Negotiate applies the broker's selection rule: version 2 must lie within
// the request's range, and the first client preference that supported holds
// wins. A failure is errcode.NegotiationFailed (the Go broker answers it by
// dropping the connection without a response frame).
func Negotiate(req NegotiationRequest, supported []Compression) (NegotiationResponse, error) {
	if err := req.validate(func(reason, msg string, kv ...string) *errcode.Error {
		return decodeError(payloadNegotiation, reason, msg, kv...)
	}); err != nil {
		return NegotiationResponse{}, err
	}
	if ProtocolVersion < req.MinVersion || ProtocolVersion > req.MaxVersion {
		return NegotiationResponse{}, errcode.NegotiationFailed.New("wire version 2 is outside the requested range",
			"reason", "no_common_version", "min_version", itoa(int(req.MinVersion)), "max_version", itoa(int(req.MaxVersion)))
	}
	for _, want := range req.Compressions {
		for _, have := range supported {
			if want == have {
				return NegotiationResponse{Version: ProtocolVersion, Compression: want}, nil
			}
		}
	}
	return NegotiationResponse{}, errcode.NegotiationFailed.New("no common compression", "reason", "no_common_compression")
}
