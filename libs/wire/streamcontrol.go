package wire

import (
	"bytes"
	"strconv"
	"strings"
)

// StreamControlPrefix opens every STREAM_CONTROL text frame.
const StreamControlPrefix = "STREAM_CONTROL"

// Stream control type and close reasons (WIRE-V2 section 9.2).
const (
	StreamControlClose    = "CLOSE"
	CloseStopped          = "stopped"
	CloseRemoved          = "removed"
	CloseTimeout          = "timeout"
	CloseError            = "error"
	CloseOffsetOutOfRange = "offset_out_of_range"
)

// StreamControl is a STREAM_CONTROL text frame: "STREAM_CONTROL type=CLOSE
// reason=<r> offset=<n>", plus requested/earliest/latest when the reason is
// offset_out_of_range.
type StreamControl struct {
	// Type is the control type, upper case; CLOSE is the only one defined.
	Type string
	// Reason is why the stream closed.
	Reason string
	// Offset is the next stream offset at close, when HasOffset.
	Offset    uint64
	HasOffset bool
	// Requested, Earliest and Latest describe an offset_out_of_range close,
	// when HasRange.
	Requested, Earliest, Latest uint64
	HasRange                    bool
	// Extra holds tokens this version does not know, in order (kept so a
	// newer broker's additions are not lost).
	Extra []Field
}

// IsStreamControl reports whether a stream payload is a control frame: its
// trimmed text starts with STREAM_CONTROL. Clients test this before trying to
// decode a batch.
func IsStreamControl(payload []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(payload, " \t\r\n"), []byte(StreamControlPrefix))
}

func validCloseReason(r string) bool {
	switch r {
	case CloseStopped, CloseRemoved, CloseTimeout, CloseError, CloseOffsetOutOfRange:
		return true
	}
	return false
}

// AppendTo appends the frame text. A CLOSE needs one of the five reasons; a
// range is written only with offset_out_of_range.
func (s *StreamControl) AppendTo(dst []byte) ([]byte, error) {
	typ := s.Type
	if typ == "" {
		typ = StreamControlClose
	}
	if strings.EqualFold(typ, StreamControlClose) && !validCloseReason(s.Reason) {
		return dst, encodeError(payloadStream, "bad_reason", "unknown close reason", "reason", s.Reason)
	}
	if s.HasRange && s.Reason != CloseOffsetOutOfRange {
		return dst, encodeError(payloadStream, "unexpected_range", "requested/earliest/latest only with offset_out_of_range")
	}
	if !tokenSafe(typ) || !tokenSafe(s.Reason) {
		return dst, encodeError(payloadStream, "bad_token", "type and reason must be non-empty without whitespace or '='")
	}
	dst = append(dst, StreamControlPrefix...)
	dst = append(dst, " type="...)
	dst = append(dst, strings.ToUpper(typ)...)
	dst = append(dst, " reason="...)
	dst = append(dst, s.Reason...)
	if s.HasOffset {
		dst = strconv.AppendUint(append(dst, " offset="...), s.Offset, 10)
	}
	if s.HasRange {
		dst = strconv.AppendUint(append(dst, " requested="...), s.Requested, 10)
		dst = strconv.AppendUint(append(dst, " earliest="...), s.Earliest, 10)
		dst = strconv.AppendUint(append(dst, " latest="...), s.Latest, 10)
	}
	for _, f := range s.Extra {
		if !ValidKey(f.Key) || !tokenSafe(f.Value) {
			return dst, encodeError(payloadStream, "bad_token", "extra token invalid", "key", f.Key)
		}
		dst = append(dst, ' ')
		dst = append(dst, f.Key...)
		dst = append(dst, '=')
		dst = append(dst, f.Value...)
	}
	return dst, nil
}

// tokenSafe: non-empty, no whitespace, no '='.
func tokenSafe(s string) bool { return s != "" && !strings.ContainsAny(s, " \t\r\n\v\f=") }

// ParseStreamControl parses a control frame's text. Tokens after the prefix
// are key=value in any order (as the SDKs parse them); type and, for CLOSE,
// reason are required; numbers are unsigned decimals; a key may appear once.
// Unknown keys go to Extra.
func ParseStreamControl(b []byte) (StreamControl, error) {
	fail := func(reason, msg string, kv ...string) (StreamControl, error) {
		return StreamControl{}, decodeError(payloadStream, reason, msg, kv...)
	}
	toks := strings.Fields(string(b))
	if len(toks) == 0 || toks[0] != StreamControlPrefix {
		return fail("bad_prefix", "text does not start with STREAM_CONTROL")
	}
	var sc StreamControl
	var seen [6]bool
	num := func(v string, dst *uint64) bool {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || v[0] == '+' {
			return false
		}
		*dst = n
		return true
	}
	for _, t := range toks[1:] {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" || v == "" {
			return fail("bad_token", "token is not key=value", "token", t)
		}
		idx := -1
		var okv bool
		switch k {
		case "type":
			idx, okv, sc.Type = 0, true, strings.ToUpper(v)
		case "reason":
			idx, okv, sc.Reason = 1, true, v
		case "offset":
			idx, okv, sc.HasOffset = 2, num(v, &sc.Offset), true
		case "requested":
			idx, okv, sc.HasRange = 3, num(v, &sc.Requested), true
		case "earliest":
			idx, okv, sc.HasRange = 4, num(v, &sc.Earliest), true
		case "latest":
			idx, okv, sc.HasRange = 5, num(v, &sc.Latest), true
		default:
			for _, f := range sc.Extra {
				if f.Key == k {
					return fail("duplicate_key", "key repeated", "key", k)
				}
			}
			sc.Extra = append(sc.Extra, Field{Key: k, Value: v})
			continue
		}
		if !okv {
			return fail("bad_number", "value is not an unsigned decimal", "key", k, "value", v)
		}
		if seen[idx] {
			return fail("duplicate_key", "key repeated", "key", k)
		}
		seen[idx] = true
	}
	if !seen[0] {
		return fail("missing_type", "type missing")
	}
	if sc.Type == StreamControlClose && !seen[1] {
		return fail("missing_reason", "CLOSE without a reason")
	}
	if sc.HasRange && !(seen[3] && seen[4] && seen[5]) {
		return fail("partial_range", "requested, earliest and latest come together")
	}
	return sc, nil
}
