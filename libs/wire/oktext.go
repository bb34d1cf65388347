package wire

import (
	"strconv"
	"strings"
)

// OKReply is a parsed "OK key=value ..." text response (WIRE-V2 section 9.4),
// fields in order.
type OKReply struct {
	Fields []Field
}

// Get returns the value of key and whether it is present.
func (r *OKReply) Get(key string) (string, bool) {
	for _, f := range r.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Value returns the value of key, or "".
func (r *OKReply) Value(key string) string {
	v, _ := r.Get(key)
	return v
}

// ParseOK parses "OK" or "OK key=value ...". Values run to the next
// whitespace, except values that open with '[' or '{', which run to the
// matching bracket (JSON strings respected), so "assignments=[0 1 2]" and
// "cluster={...}" are one value each. Every token must be key=value with a
// valid, unique key. Anything else is errcode.DecodeFailed (an ERROR reply
// arrives as a typed error frame, not here).
func ParseOK(s string) (OKReply, error) {
	fail := func(reason, msg string, kv ...string) (OKReply, error) {
		return OKReply{}, decodeError(payloadOK, reason, msg, kv...)
	}
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, "OK")
	if !ok || (rest != "" && !isTextSpace(rest[0])) {
		return fail("not_ok", "reply does not start with OK")
	}
	var r OKReply
	i := 0
	for {
		for i < len(rest) && isTextSpace(rest[i]) {
			i++
		}
		if i == len(rest) {
			break
		}
		eq := strings.IndexByte(rest[i:], '=')
		ws := strings.IndexAny(rest[i:], " \t\r\n\v\f")
		if eq < 0 || (ws >= 0 && ws < eq) {
			return fail("bad_token", "token is not key=value")
		}
		key := rest[i : i+eq]
		if !ValidKey(key) {
			return fail("bad_key", "invalid key", "key", key)
		}
		i += eq + 1
		end := i
		if end < len(rest) && (rest[end] == '[' || rest[end] == '{') {
			n, ok := bracketEnd(rest[end:])
			if !ok {
				return fail("unbalanced", "bracketed value not closed", "key", key)
			}
			end += n
			if end < len(rest) && !isTextSpace(rest[end]) {
				return fail("bad_token", "text after a bracketed value", "key", key)
			}
		} else {
			for end < len(rest) && !isTextSpace(rest[end]) {
				end++
			}
		}
		if _, dup := r.Get(key); dup {
			return fail("duplicate_key", "key repeated", "key", key)
		}
		r.Fields = append(r.Fields, Field{Key: key, Value: rest[i:end]})
		i = end
	}
	return r, nil
}

// bracketEnd returns the length of the balanced [...] / {...} prefix of s.
func bracketEnd(s string) (int, bool) {
	depth, inStr := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// AppendOK appends "OK".
func AppendOK(dst []byte) []byte { return append(dst, "OK"...) }

// AppendOKField appends " key=value". The caller keeps value free of
// whitespace unless it is a bracketed or JSON value; reply texts have no
// quoting.
func AppendOKField(dst []byte, key, value string) []byte {
	dst = append(dst, ' ')
	dst = append(dst, key...)
	dst = append(dst, '=')
	return append(dst, value...)
}

// AppendOKInt appends " key=<decimal>".
func AppendOKInt(dst []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(append(append(dst, ' '), key...), '='), v, 10)
}

// AppendOKUint appends " key=<decimal>".
func AppendOKUint(dst []byte, key string, v uint64) []byte {
	return strconv.AppendUint(append(append(append(dst, ' '), key...), '='), v, 10)
}

// AppendOKBool appends " key=true" or " key=false".
func AppendOKBool(dst []byte, key string, v bool) []byte {
	return strconv.AppendBool(append(append(append(dst, ' '), key...), '='), v)
}

// AppendOKList appends " key=[0 1 2]": Go's %v formatting of an int slice,
// space-separated inside brackets, the exact shape JOIN_GROUP and SYNC_GROUP
// replies carry and the Java SDK's parser requires.
func AppendOKList(dst []byte, key string, vals []int32) []byte {
	dst = append(append(append(dst, ' '), key...), "=["...)
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = strconv.AppendInt(dst, int64(v), 10)
	}
	return append(dst, ']')
}

// ParseIntList parses a "[0 1 2]" value (also "[]") into its integers.
func ParseIntList(s string) ([]int32, error) {
	inner, ok := strings.CutPrefix(s, "[")
	if ok {
		inner, ok = strings.CutSuffix(inner, "]")
	}
	if !ok {
		return nil, decodeError(payloadOK, "bad_list", "list is not [n n ...]", "value", s)
	}
	toks := strings.Fields(inner)
	out := make([]int32, 0, len(toks))
	for _, t := range toks {
		if t[0] == '+' {
			return nil, decodeError(payloadOK, "bad_list", "list element is not an integer", "value", t)
		}
		n, err := strconv.ParseInt(t, 10, 32)
		if err != nil {
			return nil, decodeError(payloadOK, "bad_list", "list element is not an integer", "value", t)
		}
		out = append(out, int32(n))
	}
	return out, nil
}
