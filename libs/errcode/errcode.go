package errcode

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Class is the broad handling class of an error. The numeric values are the
// Wire v2 class ids (WIRE-V2 section 8).
type Class uint8

// Classes in wire order.
const (
	ClassValidation    Class = 1
	ClassAuthorization Class = 2
	ClassRouting       Class = 3
	ClassAvailability  Class = 4
	ClassConflict      Class = 5
	ClassFencing       Class = 6
	ClassNotFound      Class = 7
	ClassInternal      Class = 8
)

var classNames = [...]string{
	ClassValidation:    "validation",
	ClassAuthorization: "authorization",
	ClassRouting:       "routing",
	ClassAvailability:  "availability",
	ClassConflict:      "conflict",
	ClassFencing:       "fencing",
	ClassNotFound:      "not_found",
	ClassInternal:      "internal",
}

// Valid reports whether c is one of the eight wire classes.
func (c Class) Valid() bool { return c >= ClassValidation && c <= ClassInternal }

// String returns the spec name of the class ("validation", ...).
func (c Class) String() string {
	if !c.Valid() {
		return fmt.Sprintf("class(%d)", uint8(c))
	}
	return classNames[c]
}

// ParseClass maps a spec class name back to its Class.
func ParseClass(s string) (Class, bool) {
	for c := ClassValidation; c <= ClassInternal; c++ {
		if classNames[c] == s {
			return c, true
		}
	}
	return 0, false
}

// Field is one key=value detail of an Error.
type Field struct {
	Key, Value string
}

// Error is a typed Strata error. Fields are kept sorted by key with unique
// keys, the order the wire encoding requires.
type Error struct {
	Code      string
	Class     Class
	Retryable bool
	Message   string
	Fields    []Field
}

// Error renders the readable form the SDKs show and match on:
//
//	ERROR: <code> class=<class> retryable=<bool> [k=v ...] [message]
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("ERROR: ")
	b.WriteString(e.Code)
	b.WriteString(" class=")
	b.WriteString(e.Class.String())
	b.WriteString(" retryable=")
	if e.Retryable {
		b.WriteString("true")
	} else {
		b.WriteString("false")
	}
	for _, f := range e.Fields {
		b.WriteByte(' ')
		b.WriteString(f.Key)
		b.WriteByte('=')
		b.WriteString(quoteIfNeeded(f.Value))
	}
	if e.Message != "" {
		b.WriteByte(' ')
		b.WriteString(e.Message)
	}
	return b.String()
}

func quoteIfNeeded(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\r\n\"") {
		return fmt.Sprintf("%q", v)
	}
	return v
}

// Is reports whether target is an *Error or a Code with the same code, so
// errors.Is(err, errcode.TopicNotFound) works through wrapping.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		return t.Code == e.Code
	case Code:
		return t.name == e.Code
	}
	return false
}

// Field returns the value of key, or "" when absent.
func (e *Error) Field(key string) string {
	for _, f := range e.Fields {
		if f.Key == key {
			return f.Value
		}
	}
	return ""
}

// With returns a copy of e with key set to value (replacing an existing key).
func (e *Error) With(key, value string) *Error {
	c := *e
	c.Fields = setField(slices.Clone(e.Fields), key, value)
	return &c
}

func setField(fs []Field, key, value string) []Field {
	i := sort.Search(len(fs), func(i int) bool { return fs[i].Key >= key })
	if i < len(fs) && fs[i].Key == key {
		fs[i].Value = value
		return fs
	}
	fs = append(fs, Field{})
	copy(fs[i+1:], fs[i:])
	fs[i] = Field{Key: key, Value: value}
	return fs
}

// Normalize sorts fields by key and drops earlier duplicates (last wins).
func (e *Error) Normalize() {
	fs := e.Fields
	e.Fields = nil
	for _, f := range fs {
		e.Fields = setField(e.Fields, f.Key, f.Value)
	}
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	var c Code
	if errors.As(err, &c) {
		return c.New(""), true
	}
	return nil, false
}

// From returns err as a typed error: the *Error in its chain; for an
// untyped context error request_timeout (deadline) or request_cancelled,
// both retryable unavailability (a client must never see a deadline or a
// shutdown as internal_error); otherwise an internal error carrying err's
// text. From(nil) is nil.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	return fromContextErr(err)
}

// CodeOf returns the code of err's typed error, or "" when err is untyped.
func CodeOf(err error) string {
	if e, ok := As(err); ok {
		return e.Code
	}
	return ""
}

// IsRetryable reports whether err is a typed error marked retryable.
func IsRetryable(err error) bool {
	e, ok := As(err)
	return ok && e.Retryable
}

// ParseText parses the readable form produced by Error (and by the public
// broker's handler texts): "ERROR: code class=... retryable=... k=v ... msg".
// Unknown classes fall back to the catalogue. ok is false when s does not
// start with "ERROR".
func ParseText(s string) (*Error, bool) {
	s = strings.TrimSpace(s)
	rest, found := strings.CutPrefix(s, "ERROR:")
	if !found {
		rest, found = strings.CutPrefix(s, "ERROR ")
		if !found {
			return nil, false
		}
	}
	toks := splitTokens(rest)
	if len(toks) == 0 {
		return nil, false
	}
	code := Lookup(toks[0])
	e := code.New("")
	var msg []string
	for _, t := range toks[1:] {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			msg = append(msg, t)
			continue
		}
		v = unquote(v)
		switch k {
		case "class":
			if c, ok := ParseClass(v); ok {
				e.Class = c
				continue
			}
		case "retryable":
			if v == "true" || v == "false" {
				e.Retryable = v == "true"
				continue
			}
		}
		e.Fields = setField(e.Fields, k, v)
	}
	e.Message = strings.Join(msg, " ")
	return e, true
}

// splitTokens splits on whitespace, keeping double-quoted values (with
// backslash escapes) inside one token.
func splitTokens(s string) []string {
	var toks []string
	var cur strings.Builder
	inQuote, escaped, started := false, false, false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case inQuote && r == '\\':
			cur.WriteRune(r)
			escaped = true
		case r == '"':
			cur.WriteRune(r)
			inQuote = !inQuote
			started = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			if started {
				toks = append(toks, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		toks = append(toks, cur.String())
	}
	return toks
}

func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var out strings.Builder
		esc := false
		for _, r := range v[1 : len(v)-1] {
			if esc {
				switch r {
				case 'n':
					out.WriteRune('\n')
				case 't':
					out.WriteRune('\t')
				case 'r':
					out.WriteRune('\r')
				default:
					out.WriteRune(r)
				}
				esc = false
				continue
			}
			if r == '\\' {
				esc = true
				continue
			}
			out.WriteRune(r)
		}
		return out.String()
	}
	return v
}
