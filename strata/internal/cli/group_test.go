package cli

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/client/fakebroker"
	"github.com/strataio/strata/libs/wire"
)

// lines splits output into the whitespace-separated fields of each line.
func lines(out string) [][]string {
	var l [][]string
	for _, s := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		l = append(l, strings.Fields(s))
	}
	return l
}

func TestGroupUsageListsEverySubcommand(t *testing.T) {
	code, out, _ := run(t, "group", "help")
	if code != 0 {
		t.Fatalf("group help: exit %d", code)
	}
	for _, sub := range []string{"group status GROUP", "group describe GROUP", "group list", "group delete GROUP",
		"group reset-offsets GROUP --topic T", "--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-current", "--execute"} {
		if !strings.Contains(out, sub) {
			t.Fatalf("group usage lacks %q:\n%s", sub, out)
		}
	}
	var summary strings.Builder
	Usage(&summary)
	if !strings.Contains(summary.String(), "delete, reset-offsets") {
		t.Fatalf("command summary:\n%s", summary.String())
	}
}

// Bad command lines exit 2 with the reason, before any connection is made
// (nothing listens on --addr).
func TestGroupAdminUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"reset without topic", []string{"reset-offsets", "g", "--to-earliest"}, "--topic is required"},
		{"reset without target", []string{"reset-offsets", "g", "--topic", "t"}, "exactly one of"},
		{"reset with two targets", []string{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"}, "exactly one of"},
		{"reset with target and shift", []string{"reset-offsets", "g", "--topic", "t", "--to-current", "--shift-by", "-2"}, "exactly one of"},
		{"reset with offset and shift", []string{"reset-offsets", "g", "--topic", "t", "--to-offset", "3", "--shift-by", "1"}, "exactly one of"},
		{"negative offset", []string{"reset-offsets", "g", "--topic", "t", "--to-offset", "-1"}, "invalid value"},
		{"bad partition list", []string{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--partitions", "0,x"}, `"x" is not a partition number`},
		{"negative partition", []string{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--partitions", "-1"}, "is not a partition number"},
		{"partition twice", []string{"reset-offsets", "g", "--topic", "t", "--to-earliest", "--partitions", "1,1"}, "partition 1 given twice"},
		{"reset without group", []string{"reset-offsets", "--topic", "t", "--to-earliest"}, "expected 1 argument(s), got 0"},
		{"delete without group", []string{"delete"}, "expected 1 argument(s), got 0"},
		{"delete with two groups", []string{"delete", "a", "b"}, "expected 1 argument(s), got 2"},
		{"unknown subcommand", []string{"purge", "g"}, `unknown subcommand "purge"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := run(t, append(append([]string{"group"}, tc.args...), "--addr", "127.0.0.1:1", "--timeout", "1s")...)
			if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit 2 and %q", code, out, errs, tc.want)
			}
		})
	}
}

func TestResetTargetsClampLikeKafka(t *testing.T) {
	o := client.PartitionOffsets{Partition: 3, Earliest: 10, HWM: 50}
	for _, tc := range []struct {
		name    string
		plan    resetPlan
		current uint64
		want    uint64
		note    string
	}{
		{name: "earliest", plan: resetPlan{target: resetEarliest}, current: 30, want: 10},
		{name: "latest is the high watermark", plan: resetPlan{target: resetLatest}, current: 30, want: 50},
		{name: "current", plan: resetPlan{target: resetCurrent}, current: 30, want: 30},
		{name: "current is not clamped", plan: resetPlan{target: resetCurrent}, current: 3, want: 3},
		{name: "offset inside", plan: resetPlan{target: resetOffset, offset: 20}, current: 30, want: 20},
		{name: "offset at the bounds", plan: resetPlan{target: resetOffset, offset: 50}, current: 30, want: 50},
		{name: "offset below earliest", plan: resetPlan{target: resetOffset, offset: 2}, current: 30, want: 10,
			note: "partition 3: offset 2 is below the earliest offset 10; using 10"},
		{name: "offset above hwm", plan: resetPlan{target: resetOffset, offset: 900}, current: 30, want: 50,
			note: "partition 3: offset 900 is above the high watermark 50; using 50"},
		{name: "shift back", plan: resetPlan{target: resetShift, shift: -5}, current: 30, want: 25},
		{name: "shift forward", plan: resetPlan{target: resetShift, shift: 20}, current: 30, want: 50},
		{name: "shift below zero", plan: resetPlan{target: resetShift, shift: -40}, current: 30, want: 10,
			note: "partition 3: committed offset 30 shifted by -40 is below the earliest offset 10; using 10"},
		{name: "shift past hwm", plan: resetPlan{target: resetShift, shift: 21}, current: 30, want: 50,
			note: "partition 3: committed offset 30 shifted by 21 is above the high watermark 50; using 50"},
		{name: "shift by the smallest int64", plan: resetPlan{target: resetShift, shift: math.MinInt64}, current: 30, want: 10,
			note: "partition 3: committed offset 30 shifted by -9223372036854775808 is below the earliest offset 10; using 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := tc.plan.newOffset(tc.current, o)
			if got != tc.want || note != tc.note {
				t.Fatalf("newOffset = %d %q, want %d %q", got, note, tc.want, tc.note)
			}
		})
	}
	for _, tc := range []struct {
		cur   uint64
		by    int64
		want  uint64
		below bool
	}{
		{cur: math.MaxUint64 - 1, by: 5, want: math.MaxUint64},
		{cur: 4, by: -4, want: 0},
		{cur: 4, by: -5, want: 0, below: true},
		{cur: 0, by: math.MinInt64, want: 0, below: true},
		{cur: math.MaxUint64, by: math.MinInt64, want: math.MaxUint64 - 1<<63},
	} {
		if got, below := shiftOffset(tc.cur, tc.by); got != tc.want || below != tc.below {
			t.Errorf("shiftOffset(%d, %d) = %d %v, want %d %v", tc.cur, tc.by, got, below, tc.want, tc.below)
		}
	}
	// Shifting below 0 is clamped (and noted) even when earliest is 0.
	if got, note := (resetPlan{target: resetShift, shift: -5}).newOffset(3, client.PartitionOffsets{HWM: 9}); got != 0 ||
		note != "partition 0: committed offset 3 shifted by -5 is below the earliest offset 0; using 0" {
		t.Fatalf("shift below 0: %d %q", got, note)
	}
}

// groupFixture is a fake broker with topic orders (P0: 10 records, P1: 6)
// and group readers that consumed and committed everything, then left.
func groupFixture(t *testing.T) (*fakebroker.Broker, string) {
	t.Helper()
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "orders", "--addr", a, "--partitions", "2")
	mustRun(t, "produce", "orders", "--addr", a, "--partition", "0", "--count", "10", "--size", "8")
	mustRun(t, "produce", "orders", "--addr", a, "--partition", "1", "--count", "6", "--size", "8")
	mustRun(t, "consume", "orders", "--addr", a, "--group", "readers", "--wait", "10ms")
	wantCommitted(t, b, "readers", 10, 6)
	return b, a
}

func wantCommitted(t *testing.T, b *fakebroker.Broker, group string, p0, p1 uint64) {
	t.Helper()
	for p, want := range []uint64{p0, p1} {
		if v, ok := b.Committed("orders", group, int32(p)); !ok || v != want {
			t.Fatalf("%s P%d committed %d (%v), want %d", group, p, v, ok, want)
		}
	}
}

func TestGroupResetOffsetsDryRunThenExecute(t *testing.T) {
	b, a := groupFixture(t)
	header := []string{"TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"}
	dry := []string{"dry", "run:", "nothing", "changed;", "add", "--execute", "to", "apply"}
	for _, tc := range []struct {
		name   string
		args   []string
		out    [][]string
		note   string
		p0, p1 uint64
	}{
		{name: "dry run by default", args: []string{"--to-earliest"},
			out: [][]string{header, {"orders", "0", "10", "0"}, {"orders", "1", "6", "0"}, dry}, p0: 10, p1: 6},
		{name: "to-offset on one partition", args: []string{"--to-offset", "3", "--partitions", "1", "--execute"},
			out: [][]string{header, {"orders", "1", "6", "3"}, strings.Fields("reset 1 offsets of group readers on topic orders")}, p0: 10, p1: 3},
		{name: "shift-by clamps at earliest", args: []string{"--shift-by", "-5", "--execute"},
			out:  [][]string{header, {"orders", "0", "10", "5"}, {"orders", "1", "3", "0"}, strings.Fields("reset 2 offsets of group readers on topic orders")},
			note: "note: partition 1: committed offset 3 shifted by -5 is below the earliest offset 0; using 0", p0: 5, p1: 0},
		{name: "to-offset clamps at the high watermark (dry run)", args: []string{"--to-offset", "100", "--partitions", "0"},
			out:  [][]string{header, {"orders", "0", "5", "10"}, dry},
			note: "note: partition 0: offset 100 is above the high watermark 10; using 10", p0: 5, p1: 0},
		{name: "to-latest", args: []string{"--to-latest", "--execute"},
			out: [][]string{header, {"orders", "0", "5", "10"}, {"orders", "1", "0", "6"}, strings.Fields("reset 2 offsets of group readers on topic orders")}, p0: 10, p1: 6},
		{name: "to-current keeps the offsets", args: []string{"--to-current", "--execute", "--partitions", "1,0"},
			out: [][]string{header, {"orders", "1", "6", "6"}, {"orders", "0", "10", "10"}, strings.Fields("reset 2 offsets of group readers on topic orders")}, p0: 10, p1: 6},
		{name: "to-earliest", args: []string{"--to-earliest", "--execute"},
			out: [][]string{header, {"orders", "0", "10", "0"}, {"orders", "1", "6", "0"}, strings.Fields("reset 2 offsets of group readers on topic orders")}, p0: 0, p1: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.Requests(wire.CmdResetOffsets)
			code, out, errs := run(t, append([]string{"group", "reset-offsets", "readers", "--topic", "orders", "--addr", a}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if got := lines(out); !slices.EqualFunc(got, tc.out, slices.Equal) {
				t.Fatalf("output:\n%s\nwant %v", out, tc.out)
			}
			if strings.TrimSpace(errs) != tc.note {
				t.Fatalf("stderr %q, want %q", errs, tc.note)
			}
			wantCommitted(t, b, "readers", tc.p0, tc.p1)
			sent := b.Requests(wire.CmdResetOffsets) - before
			if execute := slices.Contains(tc.args, "--execute"); (sent == 1) != execute || sent > 1 {
				t.Fatalf("%d RESET_OFFSETS sent (execute %v)", sent, execute)
			}
		})
	}
	// The group's next consumer starts at the reset offsets: all 16 again.
	if out := mustRun(t, "consume", "orders", "--addr", a, "--group", "readers", "--wait", "10ms"); strings.Count(out, "\n") != 16 {
		t.Fatalf("after the reset the group re-read %d records", strings.Count(out, "\n"))
	}
}

func TestGroupResetOffsetsErrors(t *testing.T) {
	b, a := groupFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown partition", []string{"readers", "--topic", "orders", "--to-earliest", "--partitions", "0,5"},
			"strata group reset-offsets: ERROR: partition_not_found class=not_found retryable=false"},
		{"unknown topic", []string{"readers", "--topic", "nope", "--to-earliest", "--execute"},
			"strata group reset-offsets: ERROR: topic_not_found class=not_found retryable=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := run(t, append([]string{"group", "reset-offsets", "--addr", a}, tc.args...)...)
			if code != 1 || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %s\nwant exit 1 and %q", code, errs, tc.want)
			}
		})
	}
	wantCommitted(t, b, "readers", 10, 6)

	// A member is active: the plan prints, the execution is refused.
	c := dialFake(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	jr, err := c.JoinGroup(ctx, "readers", "m", "orders")
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, "group", "reset-offsets", "readers", "--topic", "orders", "--to-earliest", "--addr", a)
	code, _, errs := run(t, "group", "reset-offsets", "readers", "--topic", "orders", "--to-earliest", "--execute", "--addr", a)
	if code != 1 || !strings.Contains(errs, "ERROR: group_not_empty class=conflict retryable=false") {
		t.Fatalf("reset of an active group: exit %d %s", code, errs)
	}
	wantCommitted(t, b, "readers", 10, 6)
	code, _, errs = run(t, "group", "delete", "readers", "--addr", a)
	if code != 1 || !strings.Contains(errs, "strata group delete: ERROR: group_not_empty class=conflict retryable=false") {
		t.Fatalf("delete of an active group: exit %d %s", code, errs)
	}
	if err := c.LeaveGroup(ctx, "orders", "readers", jr.Member); err != nil {
		t.Fatal(err)
	}

	// A group that does not exist yet is registered by the reset.
	out := mustRun(t, "group", "reset-offsets", "fresh", "--topic", "orders", "--to-latest", "--execute", "--addr", a)
	if !strings.Contains(out, "reset 2 offsets of group fresh on topic orders") {
		t.Fatalf("reset of a new group:\n%s", out)
	}
	wantCommitted(t, b, "fresh", 10, 6)
	if out := mustRun(t, "group", "list", "--addr", a); out != "fresh\nreaders\n" {
		t.Fatalf("group list %q", out)
	}
}

func TestGroupDelete(t *testing.T) {
	b, a := groupFixture(t)
	if out := mustRun(t, "group", "delete", "readers", "--addr", a); out != "group readers deleted\n" {
		t.Fatalf("delete output %q", out)
	}
	if _, ok := b.Committed("orders", "readers", 0); ok {
		t.Fatal("offsets survive the delete")
	}
	if out := mustRun(t, "group", "list", "--addr", a); out != "" {
		t.Fatalf("group list after delete %q", out)
	}
	code, _, errs := run(t, "group", "delete", "readers", "--addr", a)
	if code != 1 || !strings.Contains(errs, "strata group delete: ERROR: group_not_found class=not_found retryable=false") {
		t.Fatalf("second delete: exit %d %s", code, errs)
	}
}

func dialFake(t *testing.T, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
