package cli

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
)

func TestOffsetSpecsLikeRpkAndKcat(t *testing.T) {
	po := client.PartitionOffsets{Earliest: 10, Latest: 50, HWM: 50}
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"earliest", 10}, {"start", 10}, {"oldest", 10}, {"beginning", 10},
		{"latest", 50}, {"end", 50}, {"newest", 50},
		{"7", 7}, {"0", 0},
		{"-5", 45}, {"-40", 10}, {"-41", 10}, {"-0", 50},
		{"+5", 15}, {"+40", 50}, {"+99", 50}, {"+0", 10},
	} {
		o, err := parseOffsetSpec(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := o.resolve(po); got != c.want {
			t.Errorf("%q resolved to %d, want %d", c.in, got, c.want)
		}
	}
	for _, in := range []string{"@1700000000123", "@2026-11-24T21:00:00Z", "@2026-11-24T21:00:00.5+01:00"} {
		o, err := parseOffsetSpec(in)
		if err != nil || o.kind != offAtTime || o.at.IsZero() {
			t.Fatalf("%q: %+v %v", in, o, err)
		}
	}
	if o, _ := parseOffsetSpec("@1700000000123"); !o.at.Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("unix ms parsed as %v", o.at)
	}
	for _, bad := range []string{"", "x", "--5", "+-1", "@", "@yesterday", "1.5", "-x"} {
		if _, err := parseOffsetSpec(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConsumeFromRelativeOffsets(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "rel", "--addr", a, "--partitions", "1")
	mustRun(t, "produce", "rel", "--addr", a, "--count", "10", "--size", "4")
	firstLast := func(out string) (string, string, int) {
		l := strings.Split(strings.TrimSpace(out), "\n")
		return strings.Fields(l[0])[1], strings.Fields(l[len(l)-1])[1], len(l)
	}
	for _, c := range []struct {
		from, first, last string
		n                 int
	}{
		{"-3", "offset=7", "offset=9", 3},
		{"+8", "offset=8", "offset=9", 2},
		{"4", "offset=4", "offset=9", 6},
		{"start", "offset=0", "offset=9", 10},
	} {
		out := mustRun(t, "consume", "rel", "--addr", a, "--from", c.from, "--wait", "10ms")
		if f, l, n := firstLast(out); f != c.first || l != c.last || n != c.n {
			t.Errorf("--from %s printed %s..%s (%d records), want %s..%s (%d)", c.from, f, l, n, c.first, c.last, c.n)
		}
	}
	if out := mustRun(t, "consume", "rel", "--addr", a, "--from", "end", "--wait", "10ms"); out != "" {
		t.Fatalf("--from end printed %q", out)
	}
	// By time (LIST_OFFSETS timestamp=): records written after a moment
	// are read from that moment on; a time before every record reads all,
	// one after every record reads nothing.
	mid := time.Now()
	time.Sleep(5 * time.Millisecond) // the records below carry later timestamps
	mustRun(t, "produce", "rel", "--addr", a, "--count", "3", "--size", "4")
	if f, l, n := firstLast(mustRun(t, "consume", "rel", "--addr", a, "--from", "@"+strconv.FormatInt(mid.UnixMilli(), 10), "--wait", "10ms")); f != "offset=10" || l != "offset=12" || n != 3 {
		t.Fatalf("--from @mid printed %s..%s (%d records), want offset=10..offset=12 (3)", f, l, n)
	}
	if _, _, n := firstLast(mustRun(t, "consume", "rel", "--addr", a, "--from", "@2020-01-01T00:00:00Z", "--wait", "10ms")); n != 13 {
		t.Fatalf("--from @2020 printed %d records, want 13", n)
	}
	if out := mustRun(t, "consume", "rel", "--addr", a, "--from", "@"+time.Now().Add(time.Hour).Format(time.RFC3339), "--wait", "10ms"); out != "" {
		t.Fatalf("--from an hour ahead printed %q", out)
	}
	if code, _, _ := run(t, "consume", "rel", "--addr", a, "--from", "@someday"); code != 2 {
		t.Fatal("a bad time is a usage error")
	}
	if code, _, _ := run(t, "consume", "rel", "--addr", a, "--group", "g", "--from", "-3"); code != 2 {
		t.Fatal("-N with --group accepted")
	}
	out := mustRun(t, "consume", "rel", "--addr", a, "--group", "g", "--from", "end", "--wait", "10ms")
	if out != "" {
		t.Fatalf("group --from end printed %q", out)
	}
}

// TestResetOffsetsByTime: --to-datetime and --by-duration move to the
// first record at or after the time (LIST_OFFSETS timestamp=), the high
// watermark when nothing is that late; bad values are usage errors.
func TestResetOffsetsByTime(t *testing.T) {
	b, a := groupFixture(t)
	mustRun(t, "consume", "orders", "--addr", a, "--group", "later", "--wait", "10ms")
	for _, tc := range []struct {
		args   []string
		p0, p1 uint64
	}{
		{[]string{"--to-datetime", "2020-01-01T00:00:00Z"}, 0, 0},
		{[]string{"--to-datetime", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}, 10, 6},
		{[]string{"--by-duration", "240h"}, 0, 0},
	} {
		mustRun(t, append([]string{"group", "reset-offsets", "later", "--addr", a, "--topic", "orders", "--execute"}, tc.args...)...)
		wantCommitted(t, b, "later", tc.p0, tc.p1)
	}
	for _, args := range [][]string{
		{"--to-datetime", "noon"},
		{"--by-duration", "-1h"},
		{"--by-duration", "1h", "--to-earliest"},
	} {
		if code, _, _ := run(t, append([]string{"group", "reset-offsets", "g", "--addr", a, "--topic", "orders"}, args...)...); code != 2 {
			t.Fatalf("%v: want a usage error, got %d", args, code)
		}
	}
}

// FuzzOffsetSpec: any --from text is parsed or refused without panicking,
// and a parsed relative or named spec resolves inside the partition's range.
func FuzzOffsetSpec(f *testing.F) {
	for _, s := range []string{"earliest", "latest", "-5", "+5", "42", "@1700000000000", "@2026-11-24T21:00:00Z", "-", "+", "@", "-18446744073709551615"} {
		f.Add(s, uint64(10), uint64(50))
	}
	f.Fuzz(func(t *testing.T, s string, earliest, latest uint64) {
		o, err := parseOffsetSpec(s)
		if err != nil {
			return
		}
		if latest < earliest {
			earliest, latest = latest, earliest
		}
		got := o.resolve(client.PartitionOffsets{Earliest: earliest, Latest: latest, HWM: latest})
		if o.kind != offAbsolute && o.kind != offAtTime && (got < earliest || got > latest) {
			t.Fatalf("%q resolved to %d outside [%d, %d]", s, got, earliest, latest)
		}
	})
}
