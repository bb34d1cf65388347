package server

import (
	"strconv"
	"strings"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Parameter parsing shared by the command handlers. Every failure is a typed
// validation error naming the parameter; nothing here panics on any input
// (FuzzParams).

// required returns a non-empty parameter or missing_<name> (the reference
// broker's codes: missing_topic, missing_partition, ...).
func required(r *wire.Request, key string) (string, error) {
	v, ok := r.Get(key)
	if !ok || v == "" {
		return "", errcode.Lookup("missing_"+snake(key)).New(key+" is required", "param", key)
	}
	return v, nil
}

func invalid(key, v, why string) error {
	return errcode.InvalidParameter.New(key+" "+why, "param", key, "value", clip(v))
}

// clip bounds a client value echoed in an error.
func clip(v string) string {
	if len(v) > 64 {
		return v[:64]
	}
	return v
}

// optInt parses an optional integer within [lo, hi].
func optInt(r *wire.Request, key string, def, lo, hi int64) (int64, error) {
	v, ok := r.Get(key)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid(key, v, "must be an integer in ["+strconv.FormatInt(lo, 10)+", "+strconv.FormatInt(hi, 10)+"]")
	}
	return n, nil
}

// reqInt parses a required integer within [lo, hi].
func reqInt(r *wire.Request, key string, lo, hi int64) (int64, error) {
	if _, err := required(r, key); err != nil {
		return 0, err
	}
	return optInt(r, key, 0, lo, hi)
}

// optUint parses an optional unsigned integer.
func optUint(r *wire.Request, key string, def uint64) (uint64, bool, error) {
	v, ok := r.Get(key)
	if !ok || v == "" {
		return def, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, invalid(key, v, "must be a non-negative integer")
	}
	return n, true, nil
}

// optBool parses an optional boolean (true/false, 1/0, any case).
func optBool(r *wire.Request, key string, def bool) (bool, bool, error) {
	v, ok := r.Get(key)
	if !ok || v == "" {
		return def, false, nil
	}
	b, err := strconv.ParseBool(strings.ToLower(v))
	if err != nil {
		return false, false, invalid(key, v, "must be true or false")
	}
	return b, true, nil
}

// partitionParam parses a partition id: a missing value is missing_partition,
// a bad one invalid_partition (LIST_OFFSETS' codes, used everywhere).
func partitionParam(r *wire.Request, cmd string) (int32, bool, error) {
	v, ok := r.Get("partition")
	if !ok || v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false, errcode.InvalidPartition.New("partition must be a non-negative integer", "command", cmd, "partition", clip(v))
	}
	return int32(n), true, nil
}

// ackMode is a normalised acks setting.
type ackMode int32

const (
	acksNone   ackMode = 0
	acksLeader ackMode = 1
	acksAll    ackMode = -1
)

// parseAcks normalises an acks value: "" is the default 1; "none" is the Go
// SDK's alias of 0; "all" is -1.
func parseAcks(v string) (ackMode, error) {
	switch strings.ToLower(v) {
	case "", "1":
		return acksLeader, nil
	case "0", "none":
		return acksNone, nil
	case "-1", "all":
		return acksAll, nil
	}
	return 0, invalid("acks", v, "must be 0, 1, -1 or all")
}

func (a ackMode) label() string {
	switch a {
	case acksNone:
		return "0"
	case acksAll:
		return "all"
	}
	return "1"
}

// validTopicName applies the portable name contract of spec 2.1.
func validTopicName(s string) bool {
	if len(s) == 0 || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '=') {
			return false
		}
	}
	return true
}

// isPattern reports whether a topic parameter is a wildcard pattern.
func isPattern(s string) bool { return strings.ContainsAny(s, "*?") }

// matchPattern matches name against a glob where '*' is any run and '?' one
// byte (every other byte literal, unlike path.Match's classes and escapes).
func matchPattern(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// snake turns a camelCase parameter name (producerId, seqNum) into the
// snake_case of an error code (producer_id, seq_num).
func snake(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}
