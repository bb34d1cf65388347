package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/strataio/strata/libs/errcode"
)

// AckResponse is the PUBLISH acknowledgement JSON (WIRE-V2 section 9.3), in
// the key order the Go broker marshals: status, last_offset, producer_epoch,
// producer_id, seq_start, seq_end, leader and error (the last two omitted
// when empty).
type AckResponse struct {
	Status        string
	LastOffset    uint64
	ProducerEpoch int64
	ProducerID    string
	SeqStart      uint64
	SeqEnd        uint64
	Leader        string
	Error         string
}

// AppendJSON appends the JSON object, byte-identical to encoding/json's
// Marshal of the same struct (HTML-safe escaping, invalid UTF-8 as U+FFFD),
// without reflection or allocation.
func (a *AckResponse) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"status":`...)
	dst = appendJSONString(dst, a.Status)
	dst = strconv.AppendUint(append(dst, `,"last_offset":`...), a.LastOffset, 10)
	dst = strconv.AppendInt(append(dst, `,"producer_epoch":`...), a.ProducerEpoch, 10)
	dst = appendJSONString(append(dst, `,"producer_id":`...), a.ProducerID)
	dst = strconv.AppendUint(append(dst, `,"seq_start":`...), a.SeqStart, 10)
	dst = strconv.AppendUint(append(dst, `,"seq_end":`...), a.SeqEnd, 10)
	if a.Leader != "" {
		dst = appendJSONString(append(dst, `,"leader":`...), a.Leader)
	}
	if a.Error != "" {
		dst = appendJSONString(append(dst, `,"error":`...), a.Error)
	}
	return append(dst, '}')
}

// Failure returns the broker's error carried by the ack (status other than
// OK, or a non-empty error), as a typed error; nil for a success.
func (a *AckResponse) Failure() *errcode.Error {
	if a.Status == "OK" && a.Error == "" {
		return nil
	}
	text := strings.TrimSpace(a.Error)
	if !strings.HasPrefix(text, "ERROR") {
		text = "ERROR: " + text
	}
	if e, ok := errcode.ParseText(text); ok {
		return e
	}
	return errcode.Internal.New("acknowledgement status " + a.Status)
}

// ParseAck decodes an acknowledgement. Like the Python and Java SDKs it also
// accepts an "ERROR: ..." (or "ERROR ...") text, returned as Status "ERROR"
// with the text in Error; Failure turns either form into a typed error. The
// JSON is parsed without reflection: keys are matched exactly, unknown keys
// are skipped, null leaves a field zero, integer fields must be integers in
// range. Malformed input is errcode.DecodeFailed.
func ParseAck(b []byte) (AckResponse, error) {
	fail := func(reason, msg string, kv ...string) (AckResponse, error) {
		return AckResponse{}, decodeError(payloadAck, reason, msg, kv...)
	}
	text := strings.TrimSpace(string(b))
	if strings.HasPrefix(text, "ERROR:") || strings.HasPrefix(text, "ERROR ") {
		return AckResponse{Status: "ERROR", Error: text}, nil
	}
	if !json.Valid(b) {
		return fail("bad_json", "acknowledgement is not valid JSON")
	}
	var a AckResponse
	p := jsonParser{b: b}
	p.ws()
	if !p.consume('{') {
		return fail("not_object", "acknowledgement is not a JSON object")
	}
	p.ws()
	if p.consume('}') {
		return a, nil
	}
	for {
		p.ws()
		key := p.str()
		p.ws()
		p.consume(':')
		p.ws()
		var ok bool
		switch key {
		case "status":
			ok = jsonField(&p, &a.Status, p.stringValue)
		case "producer_id":
			ok = jsonField(&p, &a.ProducerID, p.stringValue)
		case "leader":
			ok = jsonField(&p, &a.Leader, p.stringValue)
		case "error":
			ok = jsonField(&p, &a.Error, p.stringValue)
		case "last_offset":
			ok = jsonField(&p, &a.LastOffset, p.uintValue)
		case "seq_start":
			ok = jsonField(&p, &a.SeqStart, p.uintValue)
		case "seq_end":
			ok = jsonField(&p, &a.SeqEnd, p.uintValue)
		case "producer_epoch":
			ok = jsonField(&p, &a.ProducerEpoch, p.intValue)
		default:
			p.skip()
			ok = true
		}
		if !ok {
			return fail("bad_field", "acknowledgement field has the wrong type or range", "key", key)
		}
		p.ws()
		if p.consume('}') {
			break
		}
		p.consume(',')
	}
	return a, nil
}

// jsonParser reads a document already checked by json.Valid, so it only
// needs to tell values apart, not to report syntax errors.
type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\r' || p.b[p.i] == '\n') {
		p.i++
	}
}

func (p *jsonParser) consume(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonParser) isNull() bool {
	if strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+4)]), "null") {
		p.i += 4
		return true
	}
	return false
}

// jsonField reads the value at p.i into *dst with read, which reports
// false for a value of the wrong type or range (the value is then skipped
// and *dst left alone); null leaves *dst alone too.
func jsonField[T any](p *jsonParser, dst *T, read func() (T, bool)) bool {
	if p.isNull() {
		return true
	}
	v, ok := read()
	if !ok {
		p.skip()
		return false
	}
	*dst = v
	return true
}

// stringValue reads a string value.
func (p *jsonParser) stringValue() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	return p.str(), true
}

func (p *jsonParser) number() string {
	start := p.i
	for p.i < len(p.b) && strings.IndexByte("+-0123456789.eE", p.b[p.i]) >= 0 {
		p.i++
	}
	return string(p.b[start:p.i])
}

// uintValue reads an integer value in the range of uint64.
func (p *jsonParser) uintValue() (uint64, bool) {
	n, err := strconv.ParseUint(p.number(), 10, 64)
	return n, err == nil
}

// intValue reads an integer value in the range of int64.
func (p *jsonParser) intValue() (int64, bool) {
	n, err := strconv.ParseInt(p.number(), 10, 64)
	return n, err == nil
}

// str reads a JSON string at p.i and returns its value, decoded as
// encoding/json decodes it (invalid UTF-8 and lone surrogates become U+FFFD).
func (p *jsonParser) str() string {
	if !p.consume('"') {
		return ""
	}
	start := p.i
	plain := true
	for p.i < len(p.b) && p.b[p.i] != '"' {
		c := p.b[p.i]
		if c == '\\' {
			plain = false
			p.i += 2
			continue
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
		p.i++
	}
	raw := p.b[start:p.i]
	p.i++ // closing quote
	if plain {
		return string(raw)
	}
	var out []byte
	for j := 0; j < len(raw); {
		c := raw[j]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(raw[j:])
			out = utf8.AppendRune(out, r) // RuneError for invalid bytes, one per byte
			j += size
			continue
		}
		if c != '\\' {
			out = append(out, c)
			j++
			continue
		}
		esc := raw[j+1]
		j += 2
		switch k := strings.IndexByte(jsonShortEscapes, esc); {
		case k >= 0:
			out = append(out, jsonShortEscaped[k])
		case esc == 'u':
			r := hex4(raw[j:])
			j += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if j+6 <= len(raw) && raw[j] == '\\' && raw[j+1] == 'u' {
					r2 = hex4(raw[j+2:])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					j += 6
					r = dec
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, esc)
		}
	}
	return string(out)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// skip moves past one value of any type.
func (p *jsonParser) skip() {
	depth := 0
	for p.i < len(p.b) {
		switch c := p.b[p.i]; c {
		case '"':
			p.str()
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return
			}
			depth--
			if depth == 0 {
				p.i++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		}
		p.i++
	}
}

const jsonHex = "0123456789abcdef"

// The control characters JSON escapes with one letter: jsonShortEscaped[i]
// is written as a backslash and jsonShortEscapes[i].
const (
	jsonShortEscaped = "\b\f\n\r\t"
	jsonShortEscapes = "bfnrt"
)

// appendJSONString writes s as encoding/json does with HTML escaping on.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch k := strings.IndexByte(jsonShortEscaped, c); {
			case c == '\\' || c == '"':
				dst = append(dst, '\\', c)
			case k >= 0:
				dst = append(dst, '\\', jsonShortEscapes[k])
			default:
				dst = append(dst, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
