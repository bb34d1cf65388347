package records

import (
	"regexp"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// FuzzReadArgs drives the data path's parameter parsing (CONSUME and STREAM
// arguments, acks) with arbitrary command texts: no panic, every failure a
// typed error, parsed arguments within their caps, and the wildcard matcher
// agreeing with a regexp reference on ASCII input.
func FuzzReadArgs(f *testing.F) {
	for _, s := range []string{
		"CONSUME topic=t* partition=0 offset=5 member=m group=g autoOffsetReset=latest isolation=read_uncommitted batch=10 wait_ms=100",
		"STREAM topic=t partition=1 group=g member=m",
		"PUBLISH topic=t acks=all producerId=p seqNum=1 epoch=-1 isIdempotent=true partition=2 message=hello world",
		"CONSUME topic=?? partition=99999999999 offset=-1 member=",
	} {
		f.Add(s, "t?x*", "tax")
	}
	f.Fuzz(func(t *testing.T, text, pattern, name string) {
		checkTyped := func(err error) {
			if _, ok := errcode.As(err); err != nil && !ok {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
		if _, r, err := wire.ParseText(text); err == nil {
			for _, stream := range []bool{false, true} {
				a, err := parseReadArgs(&r, wire.CmdConsume, stream)
				checkTyped(err)
				if err == nil && (a.batch == 0 || a.batch > maxFetchRecords || a.wait > MaxFetchWait || a.partition < 0 || a.group == "") {
					t.Fatalf("parsed args out of bounds: %+v", a)
				}
			}
			_, err := parseAcks(r.Value("acks"))
			checkTyped(err)
		}
		got := matchPattern(pattern, name)
		if isASCII(pattern) && isASCII(name) && len(pattern) < 64 {
			re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
			if want := regexp.MustCompile("(?s)" + re).MatchString(name); got != want {
				t.Fatalf("matchPattern(%q, %q) = %v, regexp says %v", pattern, name, got, want)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
