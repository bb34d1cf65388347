package wire

import (
	"encoding/binary"
	"iter"
	"strings"

	"github.com/strataio/strata/libs/errcode"
)

// Command-schema payload constants (WIRE-V2 section 6).
const (
	// RequestMagic is "CRQ2".
	RequestMagic uint32 = 0x43525132
	// RequestVersion is the schema version, 2.
	RequestVersion uint16 = 2
	// MaxRequestArgs bounds the positional count and the field count.
	MaxRequestArgs = 1024
)

// Field is one key=value parameter of a Request.
type Field struct {
	Key   string
	Value string
}

// Request is a decoded command-schema (CRQ2) payload: positional arguments
// and key=value fields in the order they appeared. A server reads parameters
// with Get/Has/Value directly; no text is built.
type Request struct {
	Positionals []string
	Fields      []Field
}

// Get returns the value of key and whether it is present.
func (r *Request) Get(key string) (string, bool) {
	for i := range r.Fields {
		if r.Fields[i].Key == key {
			return r.Fields[i].Value, true
		}
	}
	return "", false
}

// Value returns the value of key, or "" when absent.
func (r *Request) Value(key string) string {
	v, _ := r.Get(key)
	return v
}

// Has reports whether key is present (possibly with an empty value).
func (r *Request) Has(key string) bool {
	_, ok := r.Get(key)
	return ok
}

// All iterates over the fields in order of appearance.
func (r *Request) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, f := range r.Fields {
			if !yield(f.Key, f.Value) {
				return
			}
		}
	}
}

// Add appends a field (AppendTo checks the key rules and uniqueness).
func (r *Request) Add(key, value string) { r.Fields = append(r.Fields, Field{Key: key, Value: value}) }

// Reset empties r, keeping its slices for reuse.
func (r *Request) Reset() {
	clear(r.Positionals)
	clear(r.Fields)
	r.Positionals = r.Positionals[:0]
	r.Fields = r.Fields[:0]
}

// ValidKey reports whether s is a valid field name: a first character a-z or
// '_' (the Go broker's rule, a superset of the SDKs' a-z), then a-z, A-Z, 0-9
// or '_'.
func ValidKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case i > 0 && (c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'):
		default:
			return false
		}
	}
	return true
}

// validPositional: non-empty, no space, tab, CR or LF.
func validPositional(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\r\n")
}

// duplicateKey returns a key that occurs twice in fs, or "". Small field sets
// (the common case) are compared pairwise without allocating.
func duplicateKey(fs []Field) (string, bool) {
	if len(fs) <= 16 {
		for i := 1; i < len(fs); i++ {
			for j := 0; j < i; j++ {
				if fs[i].Key == fs[j].Key {
					return fs[i].Key, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(fs))
	for _, f := range fs {
		if _, dup := seen[f.Key]; dup {
			return f.Key, true
		}
		seen[f.Key] = struct{}{}
	}
	return "", false
}

// IsRequestPayload reports whether b starts with the CRQ2 magic and version.
func IsRequestPayload(b []byte) bool {
	return len(b) >= 6 && binary.BigEndian.Uint32(b) == RequestMagic && binary.BigEndian.Uint16(b[4:]) == RequestVersion
}

// DecodeRequest decodes a CRQ2 payload. See Request.Decode.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	err := r.Decode(b)
	return r, err
}

// Decode replaces r's contents with the CRQ2 payload b, reusing r's slices.
// All strings share one copy of b, so decoding costs one string allocation
// plus the two slices however many fields there are, and r stays valid after
// b is reused. Every WIRE-V2 section 6 rule is enforced: magic, version 2,
// counts at most 1,024 and backed by enough remaining bytes before anything
// is allocated, positionals non-empty without whitespace, valid unique keys,
// no trailing bytes.
func (r *Request) Decode(b []byte) error {
	r.Reset()
	fail := func(reason, msg string, kv ...string) error { return decodeError(payloadCRQ2, reason, msg, kv...) }
	d := decoder{b: b}
	magic, version := d.u32(), d.u16()
	if d.short {
		return fail("truncated", "command payload shorter than its header")
	}
	if magic != RequestMagic {
		return fail("bad_magic", "command payload magic is not CRQ2", "magic", hex32(magic))
	}
	if version != RequestVersion {
		return fail("bad_version", "unsupported command payload version", "version", itoa(int(version)))
	}
	s := string(b) // one copy; every string below is a substring of it
	str := func() (string, bool) {
		n := d.u32()
		if d.short || uint64(n) > uint64(d.remaining()) {
			d.short = true
			return "", false
		}
		start := d.off
		d.off += int(n)
		return s[start:d.off], true
	}
	// count reads the u16 count of a section whose entries take at least
	// minSize bytes each, bounded before anything is allocated.
	count := func(what, tooMany string, minSize int) (int, error) {
		n := int(d.u16())
		switch {
		case d.short:
			return 0, fail("truncated", what+" count truncated")
		case n > MaxRequestArgs:
			return 0, fail(tooMany, what+" count above 1,024", "count", itoa(n))
		case n*minSize > d.remaining():
			return 0, fail("truncated", what+" count exceeds the payload", "count", itoa(n))
		}
		return n, nil
	}
	np, err := count("positional", "too_many_positionals", 4)
	if err != nil {
		return err
	}
	for range np {
		p, ok := str()
		if !ok {
			return fail("truncated", "positional argument truncated")
		}
		if !validPositional(p) {
			return fail("bad_positional", "positional argument empty or containing whitespace")
		}
		r.Positionals = append(r.Positionals, p)
	}
	nf, err := count("field", "too_many_fields", 8)
	if err != nil {
		return err
	}
	for range nf {
		k, ok1 := str()
		v, ok2 := str()
		if !ok1 || !ok2 {
			return fail("truncated", "field truncated")
		}
		if !ValidKey(k) {
			return fail("bad_key", "invalid field name", "key", k)
		}
		r.Fields = append(r.Fields, Field{Key: k, Value: v})
	}
	if k, dup := duplicateKey(r.Fields); dup {
		return fail("duplicate_key", "field name repeated", "key", k)
	}
	if d.remaining() != 0 {
		return fail("trailing_bytes", "bytes after the last field", "trailing", itoa(d.remaining()))
	}
	return nil
}

// AppendTo appends r as a CRQ2 payload, checking the same rules Decode
// enforces (and the public 64 MiB bound).
func (r *Request) AppendTo(dst []byte) ([]byte, error) {
	fail := func(reason, msg string, kv ...string) *errcode.Error {
		return encodeError(payloadCRQ2, reason, msg, kv...)
	}
	if len(r.Positionals) > MaxRequestArgs || len(r.Fields) > MaxRequestArgs {
		return dst, fail("too_many_args", "more than 1,024 positionals or fields")
	}
	size := 10
	for _, p := range r.Positionals {
		if !validPositional(p) {
			return dst, fail("bad_positional", "positional argument empty or containing whitespace", "positional", p)
		}
		size += 4 + len(p)
	}
	for _, f := range r.Fields {
		if !ValidKey(f.Key) {
			return dst, fail("bad_key", "invalid field name", "key", f.Key)
		}
		size += 8 + len(f.Key) + len(f.Value)
	}
	if k, dup := duplicateKey(r.Fields); dup {
		return dst, fail("duplicate_key", "field name repeated", "key", k)
	}
	if size > PublicMaxPayload {
		return dst, fail("too_large", "command payload above the public 64 MiB bound", "length", itoa(size))
	}
	dst = appendU32(dst, RequestMagic)
	dst = appendU16(dst, RequestVersion)
	dst = appendU16(dst, uint16(len(r.Positionals)))
	for _, p := range r.Positionals {
		dst = appendString(dst, p)
	}
	dst = appendU16(dst, uint16(len(r.Fields)))
	for _, f := range r.Fields {
		dst = appendString(dst, f.Key)
		dst = appendString(dst, f.Value)
	}
	return dst, nil
}

// AppendText appends the canonical text form used in logs and by the public
// broker's text handlers: "NAME pos1 ... posN key1=value1 ...", positionals
// first, fields in order, values verbatim.
func (r *Request) AppendText(dst []byte, name string) []byte {
	dst = append(dst, name...)
	for _, p := range r.Positionals {
		dst = append(dst, ' ')
		dst = append(dst, p...)
	}
	for _, f := range r.Fields {
		dst = append(dst, ' ')
		dst = append(dst, f.Key...)
		dst = append(dst, '=')
		dst = append(dst, f.Value...)
	}
	return dst
}

// Text returns the canonical text form of r as command c.
func (r *Request) Text(c Command) string { return string(r.AppendText(nil, c.String())) }

func isTextSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// captureIndex returns the index of the first occurrence of key that is at
// the start of s or after whitespace (the Python/Java SDK rule; the Go SDK
// looks only at the first occurrence), or -1.
func captureIndex(s, key string) int {
	for from := 0; from <= len(s)-len(key); {
		i := strings.Index(s[from:], key)
		if i < 0 {
			return -1
		}
		i += from
		if i == 0 || isTextSpace(s[i-1]) {
			return i
		}
		from = i + 1
	}
	return -1
}

// ParseText turns an SDK text command into its Command and CRQ2 Request,
// with the algorithm all three SDKs share (WIRE-V2 section 6): the first
// token names the command; a "message=" at the start of the rest or after
// whitespace captures everything after it (trimmed), and inside the part
// before it "metadata=" captures up to "message="; otherwise "payload="
// captures the rest; the remaining whitespace-separated tokens with '=' are
// fields (split at the first '='), the others positionals; captured fields
// come last (metadata, message, or payload). Strings in the result are
// substrings of text. Errors: unknown_command, malformed_input.
func ParseText(text string) (Command, Request, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return CmdUnknown, Request{}, errcode.MalformedInput.New("empty command", "payload", payloadCRQ2, "reason", "empty")
	}
	end := 0
	for end < len(text) && !isTextSpace(text[end]) {
		end++
	}
	name, rest := text[:end], text[end:]
	cmd, ok := CommandByName(name)
	if !ok {
		return CmdUnknown, Request{}, errcode.UnknownCommand.New("unknown command", "command", name)
	}
	var tail []Field
	if i := captureIndex(rest, "message="); i >= 0 {
		msg := strings.TrimSpace(rest[i+len("message="):])
		rest = rest[:i]
		if j := captureIndex(rest, "metadata="); j >= 0 {
			tail = append(tail, Field{Key: "metadata", Value: strings.TrimSpace(rest[j+len("metadata="):])})
			rest = rest[:j]
		}
		tail = append(tail, Field{Key: "message", Value: msg})
	} else if i := captureIndex(rest, "payload="); i >= 0 {
		tail = append(tail, Field{Key: "payload", Value: strings.TrimSpace(rest[i+len("payload="):])})
		rest = rest[:i]
	}
	var req Request
	for tok := range strings.FieldsFuncSeq(rest, func(r rune) bool { return r < 0x80 && isTextSpace(byte(r)) }) {
		k, v, isField := strings.Cut(tok, "=")
		if !isField {
			req.Positionals = append(req.Positionals, tok)
			continue
		}
		if !ValidKey(k) {
			return CmdUnknown, Request{}, errcode.MalformedInput.New("invalid field name", "payload", payloadCRQ2, "reason", "bad_key", "key", k)
		}
		req.Fields = append(req.Fields, Field{Key: k, Value: v})
	}
	req.Fields = append(req.Fields, tail...)
	if k, dup := duplicateKey(req.Fields); dup {
		return CmdUnknown, Request{}, errcode.MalformedInput.New("field name repeated", "payload", payloadCRQ2, "reason", "duplicate_key", "key", k)
	}
	if len(req.Positionals) > MaxRequestArgs || len(req.Fields) > MaxRequestArgs {
		return CmdUnknown, Request{}, errcode.MalformedInput.New("more than 1,024 positionals or fields", "payload", payloadCRQ2, "reason", "too_many_args")
	}
	return cmd, req, nil
}
