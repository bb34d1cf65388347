package load

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

func TestGroupsAgainstFakeBroker(t *testing.T) {
	b, ctx := startBroker(t)
	// 400 operations over 2 connections in equal parts; the topic is
	// created with max(3, 8) partitions for BATCH_COMMITs of 8 entries.
	res, err := Run(ctx, Config{Mode: ModeGroups, Addr: b.Addr(), Topic: "gbench", Partitions: 3, Conns: 2,
		BatchEntries: 8, Count: 400, Rejoins: 3, KeepGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Groups
	if g == nil || g.Partitions != 8 || len(g.Groups) != 2 || g.Mix != DefaultMix.String() {
		t.Fatalf("report %+v", g)
	}
	var mixed int64
	for _, name := range gcNames {
		c := g.Command(name)
		if c == nil || c.Count == 0 || c.Errors != 0 || c.Latency.Count != uint64(c.Count) || c.Latency.P50 <= 0 || c.OpsPerSec <= 0 {
			t.Fatalf("%s: %+v", name, c)
		}
		if name == "COMMIT_OFFSET" || name == "BATCH_COMMIT" || name == "HEARTBEAT" || name == "FETCH_OFFSET" {
			mixed += c.Count
			// Equal parts: each connection cycles through the four.
			if c.Count < 98 || c.Count > 102 {
				t.Fatalf("%s count %d, want about 100 of 400", name, c.Count)
			}
		}
	}
	// 3 cycles per connection, plus the LEAVE of the member that ran the loop.
	if mixed != 400 || g.LoopRequests != 400 || g.LoopOpsPerSec <= 0 || g.Command("JOIN+SYNC+LEAVE").Count != 6 || g.Command("LEAVE_GROUP").Count != 8 {
		t.Fatalf("mixed %d, cycles %d, leaves %d", mixed, g.Command("JOIN+SYNC+LEAVE").Count, g.Command("LEAVE_GROUP").Count)
	}
	batches := g.Command("BATCH_COMMIT").Count
	if g.BatchCommitEntries != 8*batches || g.BatchCommitEntriesPerSec <= 0 {
		t.Fatalf("entries %d for %d batches", g.BatchCommitEntries, batches)
	}
	// The tool compared every FETCH_OFFSET answer and the final read-back
	// (8 partitions per group) with its last commits.
	if g.OffsetsChecked < g.Command("FETCH_OFFSET").Count+16 || g.OffsetMismatches != 0 || g.Rejoins != 0 {
		t.Fatalf("checked %d, mismatches %d (%s), rejoins %d", g.OffsetsChecked, g.OffsetMismatches, g.FirstMismatch, g.Rejoins)
	}
	// Independently: every acknowledged commit raised one partition by
	// one, so the committed offsets read back sum to the commits.
	c, err := client.Dial(ctx, b.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum uint64
	for _, grp := range g.Groups {
		for p := range int32(8) {
			off, err := c.FetchOffset(ctx, "gbench", p, grp)
			if err != nil {
				t.Fatal(err)
			}
			if fake, _ := b.Committed("gbench", grp, p); fake != off || off == 0 {
				t.Fatalf("%s P%d: FETCH_OFFSET %d, broker holds %d", grp, p, off, fake)
			}
			sum += off
		}
		st, err := c.GroupStatus(ctx, grp)
		if err != nil || st.MemberCount != 0 {
			t.Fatalf("%s after the run: %+v %v", grp, st, err)
		}
	}
	if want := uint64(g.Command("COMMIT_OFFSET").Count + g.BatchCommitEntries); sum != want {
		t.Fatalf("committed offsets sum to %d, want %d", sum, want)
	}
	var out bytes.Buffer
	WriteText(&out, res)
	for _, s := range []string{"strata bench groups:", "BATCH_COMMIT", "JOIN+SYNC+LEAVE", "batch-commit entries/s", "0 mismatches"} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("text report lacks %q:\n%s", s, out.String())
		}
	}
	// Without KeepGroups a run deletes its groups at the end.
	res, err = Run(ctx, Config{Mode: ModeGroups, Addr: b.Addr(), Topic: "gbench", Conns: 2, BatchEntries: 8, Count: 40})
	if err != nil || len(res.Groups.Cleanup) != 0 {
		t.Fatalf("second run: %v %v", err, res.Groups.Cleanup)
	}
	for _, grp := range res.Groups.Groups {
		if _, err := c.GroupStatus(ctx, grp); errcode.CodeOf(err) != errcode.GroupNotFound.Name() {
			t.Fatalf("%s still there after the run: %v", grp, err)
		}
	}
}

func TestGroupsMixFencingAndFlags(t *testing.T) {
	b, ctx := startBroker(t)
	// One GEN_MISMATCH: the connection counts the error, rejoins and goes
	// on; the failed request makes the run exit 1.
	b.Inject(wire.CmdCommitOffset, errcode.GenMismatch.New("stale generation"), 1)
	res, report := mainJSONExit(t, ctx, 1, "groups", "--addr", b.Addr(), "--conns", "1", "--count", "300", "--mix", "commit=2,fetch=1",
		"--rejoins", "0")
	g := res.Groups
	if res.Topic != "strata-bench-groups" || res.RecordSize != 0 || g.Partitions != 4 || g.Command("BATCH_COMMIT") != nil ||
		g.Command("HEARTBEAT") != nil || g.Command("JOIN+SYNC+LEAVE") != nil {
		t.Fatalf("report: %s", report)
	}
	commit, fetch := g.Command("COMMIT_OFFSET"), g.Command("FETCH_OFFSET")
	if commit.Errors != 1 || len(commit.FirstErrors) != 1 || !strings.Contains(commit.FirstErrors[0], "GEN_MISMATCH") ||
		g.Rejoins != 1 || commit.Count+fetch.Count != 299 || commit.Count < 2*fetch.Count-3 || g.OffsetMismatches != 0 {
		t.Fatalf("commit %+v fetch %+v rejoins %d mismatches %d", commit, fetch, g.Rejoins, g.OffsetMismatches)
	}

	var out, errb bytes.Buffer
	for _, bad := range [][]string{{"--mix", "bogus=1"}, {"--mix", "commit=0"}, {"--mix", "commit=-1"}} {
		if code := Main(ctx, append([]string{"groups", "--addr", b.Addr()}, bad...), &out, &errb); code != 2 {
			t.Fatalf("%v: exit %d", bad, code)
		}
	}
	// An existing topic with fewer partitions than --batch-entries is refused.
	errb.Reset()
	if code := Main(ctx, []string{"groups", "--addr", b.Addr(), "--batch-entries", "16", "--count", "10"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "fewer than --batch-entries 16") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if code := Main(ctx, []string{"groups", "--addr", b.Addr(), "--batch-entries", "2000"}, &out, &errb); code != 1 {
		t.Fatalf("batch-entries 2000: exit %d", code)
	}
}
