package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strataio/strata/libs/client"
)

// offsetKind is how a start offset is given on the command line.
type offsetKind int

const (
	offEarliest  offsetKind = iota // earliest retained offset
	offLatest                      // the end: only records produced from now on
	offAbsolute                    // offset N
	offFromEnd                     // -N: N records before the end
	offFromStart                   // +N: N records after the earliest retained offset
	offAtTime                      // @T: the first record at or after time T
)

// offsetSpec is a start offset as rpk and kcat users type it (--from / -o):
// earliest (also start, oldest, beginning), latest (also end, newest), N,
// -N, +N, or @T with T in RFC 3339 or unix milliseconds.
type offsetSpec struct {
	kind offsetKind
	n    uint64
	at   time.Time
	text string
}

const offsetHelp = "start: earliest, latest, OFFSET, -N (N before the end), +N (N after the earliest), @TIME (RFC 3339 or unix ms)"

func parseOffsetSpec(s string) (offsetSpec, error) {
	o := offsetSpec{text: s}
	switch strings.ToLower(s) {
	case "earliest", "start", "oldest", "beginning":
		o.kind = offEarliest
		return o, nil
	case "latest", "end", "newest":
		o.kind = offLatest
		return o, nil
	}
	if t, ok := strings.CutPrefix(s, "@"); ok {
		at, err := parseTime(t)
		if err != nil {
			return o, err
		}
		o.kind, o.at = offAtTime, at
		return o, nil
	}
	num := s
	switch {
	case strings.HasPrefix(s, "-"):
		o.kind, num = offFromEnd, s[1:]
	case strings.HasPrefix(s, "+"):
		o.kind, num = offFromStart, s[1:]
	default:
		o.kind = offAbsolute
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return o, fmt.Errorf("offset %q: want earliest, latest, N, -N, +N or @TIME", s)
	}
	o.n = n
	return o, nil
}

// parseTime reads an RFC 3339 time or a unix time in milliseconds.
func parseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2006-01-02T15:04:05Z) or unix milliseconds", s)
	}
	return t, nil
}

// needsOffsets says whether the spec is resolved against LIST_OFFSETS.
func (o offsetSpec) needsOffsets() bool { return o.kind != offAbsolute }

// resolve returns the first offset to read of a partition whose range is
// po. -N and +N are clamped into [earliest, end] as rpk does.
func (o offsetSpec) resolve(po client.PartitionOffsets) uint64 {
	switch o.kind {
	case offEarliest:
		return po.Earliest
	case offLatest:
		return po.Latest
	case offFromEnd:
		if po.Latest-po.Earliest < o.n || po.Latest < po.Earliest {
			return po.Earliest
		}
		return po.Latest - o.n
	case offAtTime:
		return po.Time // the server's time-index lookup (ListOffsetsAt)
	case offFromStart:
		if po.Latest-po.Earliest < o.n || po.Latest < po.Earliest {
			return po.Latest
		}
		return po.Earliest + o.n
	}
	return o.n
}
