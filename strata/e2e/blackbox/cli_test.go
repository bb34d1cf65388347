package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/cli"
)

// cliCommands drives the user CLI (run in the test process) against a
// gateway: create, produce from stdin-like lines, group consume with commit,
// and group describe with per-partition lag.
func cliCommands(t *testing.T, c framework.Cluster) {
	gw := c.Gateways()[0].ClientAddr
	run := func(args ...string) string {
		t.Helper()
		code, out, errs := strataCLI(t.Context(), gw, args...)
		if code != 0 {
			t.Fatalf("strata %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}
	run("topic", "create", "cli-orders", "--partitions", "2")
	run("produce", "cli-orders", "--count", "40", "--size", "16", "--acks", "all")
	run("consume", "cli-orders", "--group", "cli-g", "--max", "40")
	out := run("group", "describe", "cli-g")
	for _, want := range []string{"CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "TOTAL-LAG 0"} {
		if !strings.Contains(out, want) {
			t.Fatalf("group describe output lacks %q:\n%s", want, out)
		}
	}

	// The reproduction: --max 5 commits the 5 records printed, so
	// describe shows CURRENT-OFFSET 5 and LAG 95 (it showed 100 and 0).
	run("topic", "create", "max-t2", "--partitions", "1")
	run("produce", "max-t2", "--count", "100", "--size", "8", "--acks", "all")
	run("consume", "max-t2", "--group", "maxg", "--max", "5")
	out = run("group", "describe", "maxg")
	if !regexp.MustCompile(`(?m)^max-t2\s+0\s+5\s+100\s+100\s+95\b`).MatchString(out) {
		t.Fatalf("after --max 5 describe must show offset 5, end 100, last stable 100, lag 95:\n%s", out)
	}

	// Issue 18's CLI surface against a real gateway: offsets as rpk and
	// kcat take them, the global --output, describe's offsets and lag in
	// JSON, binary values from a file surviving JSON output.
	if out := run("consume", "max-t2", "-o", "-3", "--wait", "10ms"); !strings.HasPrefix(out, "partition=0 offset=97 ") || strings.Count(out, "\n") != 3 {
		t.Fatalf("consume -o -3:\n%s", out)
	}
	if out := run("consume", "max-t2", "--from", "+98", "-n", "1", "--wait", "10ms"); !strings.HasPrefix(out, "partition=0 offset=98 ") {
		t.Fatalf("consume --from +98:\n%s", out)
	}
	// By time, through partitiond's time index (LIST_OFFSETS timestamp=):
	// before every record reads them all, after every record reads none.
	if out := run("consume", "max-t2", "--from", "@2020-01-01T00:00:00Z", "--wait", "10ms"); !strings.HasPrefix(out, "partition=0 offset=0 ") || strings.Count(out, "\n") != 100 {
		t.Fatalf("consume --from @2020 printed %d lines:\n%.300s", strings.Count(out, "\n"), out)
	}
	if out := run("consume", "max-t2", "--from", "@"+time.Now().Add(time.Hour).Format(time.RFC3339), "--wait", "10ms"); out != "" {
		t.Fatalf("consume --from an hour ahead:\n%s", out)
	}
	var desc struct {
		Offsets []struct {
			Partition                   int32
			CurrentOffset, LogEndOffset uint64
			Lag                         uint64
		} `json:"offsets"`
		TotalLag uint64 `json:"total_lag"`
	}
	raw := run("--output", "json", "group", "describe", "maxg")
	if err := json.Unmarshal([]byte(strings.NewReplacer("current_offset", "CurrentOffset", "log_end_offset", "LogEndOffset").Replace(raw)), &desc); err != nil ||
		len(desc.Offsets) != 1 || desc.Offsets[0].CurrentOffset != 5 || desc.Offsets[0].LogEndOffset != 100 || desc.TotalLag != 95 {
		t.Fatalf("group describe --output json: %v\n%s", err, raw)
	}
	if out := run("topic", "list", "--output", "yaml"); !strings.Contains(out, "- max-t2\n") {
		t.Fatalf("topic list --output yaml:\n%s", out)
	}
	bin := filepath.Join(t.TempDir(), "v.bin")
	if err := os.WriteFile(bin, []byte{0xff, 0, 0xfe}, 0o600); err != nil {
		t.Fatal(err)
	}
	run("topic", "create", "bin-cli", "--partitions", "1")
	run("produce", "bin-cli", "--value-file", bin, "--acks", "all")
	if out := run("consume", "bin-cli", "--output", "json", "--wait", "10ms"); !strings.Contains(out, `"value":"/wD+","value_encoding":"base64"`) {
		t.Fatalf("binary value in json:\n%s", out)
	}

	// Multi-topic and pattern groups: describe covers every selected topic
	// (nothing committed yet, so the lag is every record).
	// No other scenario's topic starts with cli-.
	run("topic", "create", "cli-extra", "--partitions", "1")
	run("produce", "cli-extra", "--count", "5", "--size", "16", "--acks", "all")
	ctx, cl := framework.Connect(t, c, 30*time.Second)
	for _, reg := range []struct{ group, topics, pattern string }{{"cli-multi", "cli-orders,cli-extra", ""}, {"cli-pat", "", "cli-*"}} {
		if _, err := cl.RegisterGroup(ctx, reg.group, "", reg.topics, reg.pattern); err != nil {
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

// strataCLI runs the user CLI (in the test process) against the gateway at
// addr and returns its exit code, standard output and standard error.
func strataCLI(ctx context.Context, addr string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.MainContext(ctx, append(args, "--addr="+addr), &out, &errb)
	return code, out.String(), errb.String()
}
