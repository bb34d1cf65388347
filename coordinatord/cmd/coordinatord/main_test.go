package main

import (
	"bytes"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/node"
)

// childEnv makes the test binary run coordinatord's main instead of the
// tests, so the process test runs the binary's exact code path.
const childEnv = "STRATA_COORDINATORD_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(node.Main(coordinatordBinary(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if code := node.Main(coordinatordBinary(), []string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("--help exit %d: %s", code, out.String())
	}
	for _, want := range []string{"coordinatord", "-coordinatord.session-timeout", "-coordinatord.offsets-partitions", "-metad-addrs"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Fatalf("--help lacks %q:\n%s", want, out.String())
		}
	}
}
