package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/authtoken"
)

func TestAuthHashToken(t *testing.T) {
	out := mustRun(t, "auth", "hash-token", "--token", "s3cret", "--iterations", "10000")
	h, err := authtoken.Parse(strings.TrimSpace(out))
	if err != nil || !h.Verify("s3cret") || h.Iterations != 10000 {
		t.Fatalf("hash-token printed %q (%v)", out, err)
	}
	var o, e bytes.Buffer
	if code := runAuthWith([]string{"hash-token", "--iterations", "10000"}, strings.NewReader("from-stdin\n"), &o, &e); code != 0 {
		t.Fatalf("stdin token: exit %d: %s", code, e.String())
	}
	if h, err := authtoken.Parse(strings.TrimSpace(o.String())); err != nil || !h.Verify("from-stdin") {
		t.Fatalf("stdin token hashed to %q (%v)", o.String(), err)
	}
	for _, args := range [][]string{
		{"auth", "hash-token", "--token", "x", "--iterations", "5"},
		{"auth", "hash-token", "extra", "--token", "x"},
		{"auth", "nope"},
	} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	o.Reset()
	if code := runAuthWith([]string{"hash-token"}, strings.NewReader(""), &o, &e); code != 2 {
		t.Errorf("empty stdin: exit %d, want 2", code)
	}
}
