package server

import (
	"regexp"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// FuzzCommandParams drives the gateway's parameter parsing (everything it
// parses beyond libs/wire) with arbitrary command texts: no panic, every
// failure a typed error, and the wildcard matcher agreeing with a regexp
// reference on ASCII input.
func FuzzCommandParams(f *testing.F) {
	for _, s := range []string{
		"CONSUME topic=t* partition=0 offset=5 member=m group=g autoOffsetReset=latest isolation=read_uncommitted batch=10 wait_ms=100",
		"STREAM topic=t partition=1 group=g member=m",
		"PUBLISH topic=t acks=all producerId=p seqNum=1 epoch=-1 isIdempotent=true partition=2 message=hello world",
		"BATCH_COMMIT topic=t group=g member=m generation=3 offsets=P0:1,P1:2",
		"BATCH_COMMIT topic=t group=g member=m generation=x P0:1",
		"RESET_OFFSETS group=g topic=t offsets=P0:0,P3:18446744073709551615",
		"CREATE topic=a.b partitions=-1 retention_hours=99999999999999999999 idempotent=maybe",
		"CONSUME topic=?? partition=99999999999 offset=-1 member=",
	} {
		f.Add(s, "t?x*", "tax")
	}
	f.Fuzz(func(t *testing.T, text, pattern, name string) {
		checkTyped := func(err error) {
			if err == nil {
				return
			}
			if _, ok := errcode.As(err); !ok {
				t.Fatalf("untyped error %T: %v", err, err)
			}
		}
		if _, r, err := wire.ParseText(text); err == nil {
			for _, stream := range []bool{false, true} {
				a, err := parseReadArgs(&r, "CONSUME", stream)
				checkTyped(err)
				if err == nil && (a.batch == 0 || a.batch > maxFetchRecords || a.wait > maxFetchWait || a.partition < 0 || a.group == "") {
					t.Fatalf("parsed args out of bounds: %+v", a)
				}
			}
			_, err := parseAcks(r.Value("acks"))
			checkTyped(err)
			_, err = batchOffsets(&r)
			checkTyped(err)
			_, err = generationParam(&r, "COMMIT_OFFSET")
			checkTyped(err)
			_, _, err = optBool(&r, "idempotent", false)
			checkTyped(err)
			_, _, err = optIntParam(&r, "partitions", 1, 1<<20)
			checkTyped(err)
			_, _, err = partitionParam(&r, "PUBLISH")
			checkTyped(err)
			for k := range r.All() {
				_, err = required(&r, k)
				checkTyped(err)
			}
		}
		validTopicName(name)
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
