package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
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

	// Multi-topic and pattern groups: describe covers every selected topic
	// (nothing committed yet, so the lag is every record).
	run("topic", "create", "cli-extra", "--partitions", "1")
	run("produce", "cli-extra", "--count", "5", "--size", "16")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.ClientAddr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, reg := range []struct{ group, topics, pattern string }{{"cli-multi", "cli-orders,cli-extra", ""}, {"cli-pat", "", "cli-*"}} {
		if _, err := c.RegisterGroup(ctx, reg.group, "", reg.topics, reg.pattern); err != nil {
			t.Fatal(err)
		}
		out := run("group", "describe", reg.group)
		for _, want := range []string{"cli-orders  0", "cli-orders  1", "cli-extra   0", "TOTAL-LAG 45"} {
			if !strings.Contains(out, want) {
				t.Fatalf("describe %s lacks %q:\n%s", reg.group, want, out)
			}
		}
	}
}
