package e2e

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strataio/strata/strata/internal/cli"
)

// TestCLIAgainstAllInOne drives the user CLI against the all-in-one: create,
// produce from stdin-like lines, group consume with commit, and group
// describe with per-partition lag.
func TestCLIAgainstAllInOne(t *testing.T) {
	srv := startAllInOne(t)
	addr := "--addr=" + srv.ClientAddr()
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := cli.Main(append(args, addr), &out, &errb); code != 0 {
			t.Fatalf("strata %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		return out.String()
	}
	run("topic", "create", "cli-orders", "--partitions", "2")
	run("produce", "cli-orders", "--count", "40", "--size", "16")
	run("consume", "cli-orders", "--group", "cli-g", "--max", "40")
	out := run("group", "describe", "cli-g")
	for _, want := range []string{"CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "TOTAL-LAG 0"} {
		if !strings.Contains(out, want) {
			t.Fatalf("group describe output lacks %q:\n%s", want, out)
		}
	}
}
