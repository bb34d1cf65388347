package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

var t0 = time.Unix(1_700_000_000, 0)

func seq() func() int {
	n := 0
	return func() int { n++; return n }
}

func u64(v uint64) *uint64 { return &v }

func newTopicGroup(parts int32) *Group {
	tps, err := Expand(Selector{Topic: "orders"}, map[string]int32{"orders": parts})
	if err != nil {
		panic(err)
	}
	return New("g", Selector{Topic: "orders"}, tps, 1)
}

func wantCode(t *testing.T, err error, code string) *errcode.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got nil", code)
	}
	e, ok := errcode.As(err)
	if !ok || e.Code != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	return e
}

func join(t *testing.T, g *Group, client string, now time.Time, sfx func() int) JoinResult {
	t.Helper()
	r, err := g.Join(client, "orders", now, sfx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkAssignment verifies the invariants of every generation: each
// partition to at most one member, all assigned when there are members, and
// quotas differing by at most one.
func checkAssignment(t *testing.T, g *Group) {
	t.Helper()
	seen := map[TP]string{}
	minN, maxN := len(g.Partitions)+1, -1
	for id, m := range g.Members {
		for _, tp := range m.Assigned {
			if other, dup := seen[tp]; dup {
				t.Fatalf("%v assigned to %s and %s", tp, other, id)
			}
			if !g.HasPartition(tp) {
				t.Fatalf("%v assigned but not in the expansion", tp)
			}
			seen[tp] = id
		}
		minN, maxN = min(minN, len(m.Assigned)), max(maxN, len(m.Assigned))
	}
	if len(g.Members) > 0 {
		if len(seen) != len(g.Partitions) {
			t.Fatalf("%d of %d partitions assigned", len(seen), len(g.Partitions))
		}
		if maxN-minN > 1 {
			t.Fatalf("unbalanced: min %d max %d", minN, maxN)
		}
	}
}

func TestJoinSuffixGenerationsAndResume(t *testing.T) {
	g := newTopicGroup(4)
	sfx := seq()
	a := join(t, g, "c", t0, sfx)
	if ok, _ := regexp.MatchString(`^c-\d{4}$`, a.Member); !ok {
		t.Fatalf("member id %q is not client id + 4-digit suffix", a.Member)
	}
	if a.Generation != 1 || len(a.Assigned) != 4 || a.Resumed {
		t.Fatalf("first join %+v", a)
	}
	b := join(t, g, "c", t0, sfx) // same client id again: a second member
	if b.Member == a.Member || b.Generation != 2 {
		t.Fatalf("second join %+v", b)
	}
	checkAssignment(t, g)
	r := join(t, g, a.Member, t0.Add(time.Second), sfx)
	if !r.Resumed || r.Generation != 2 || r.Member != a.Member {
		t.Fatalf("rejoin with the actual id must resume: %+v", r)
	}
	if g.State() != StateStable {
		t.Fatal(g.State())
	}
	// Colliding suffixes are retried.
	fixed := func() int { return 7 }
	c1 := join(t, g, "x", t0, fixed)
	if _, err := g.Join("x", "orders", t0, fixed); err == nil {
		t.Fatal("a suffix source that only collides must fail, not overwrite")
	}
	if c1.Member != "x-0007" {
		t.Fatal(c1.Member)
	}
}

func TestTopicMismatchAndMissingMember(t *testing.T) {
	g := newTopicGroup(2)
	_, err := g.Join("c", "payments", t0, seq())
	wantCode(t, err, "topic_not_assigned_to_group")
	_, err = g.Join("", "orders", t0, seq())
	wantCode(t, err, "missing_parameter")
	_, err = g.Heartbeat("nobody", "orders", nil, t0)
	e := wantCode(t, err, "member_not_found")
	if e.Field("member") != "nobody" || e.Field("group") != "g" || e.Class != errcode.ClassFencing {
		t.Fatalf("fields %v", e)
	}
	wantCode(t, g.Leave("nobody", "orders", t0), "member_not_found")
	wantCode(t, g.Leave("", "orders", t0), "missing_parameter")
	_, err = g.Sync("", 1, "orders", t0)
	wantCode(t, err, "missing_parameter")
}

func TestHeartbeatAndSyncGeneration(t *testing.T) {
	g := newTopicGroup(3)
	sfx := seq()
	a := join(t, g, "a", t0, sfx)
	if gen, err := g.Heartbeat(a.Member, "orders", nil, t0); err != nil || gen != 1 {
		t.Fatalf("heartbeat without generation: %d %v", gen, err)
	}
	join(t, g, "b", t0, sfx) // generation 2
	_, err := g.Heartbeat(a.Member, "orders", u64(1), t0)
	e := wantCode(t, err, "GEN_MISMATCH")
	if e.Field("current") != "2" || e.Field("requested") != "1" || e.Field("member") != a.Member || e.Field("group") != "g" {
		t.Fatalf("GEN_MISMATCH fields %v", e)
	}
	_, err = g.Sync(a.Member, 1, "orders", t0)
	wantCode(t, err, "GEN_MISMATCH")
	as, err := g.Sync(a.Member, 2, "orders", t0)
	if err != nil || len(as) == 0 {
		t.Fatalf("sync %v %v", as, err)
	}
	if gen, err := g.Heartbeat(a.Member, "orders", u64(2), t0); err != nil || gen != 2 {
		t.Fatal(gen, err)
	}
}

func TestLeaveAndExpiryHandPartitionsOver(t *testing.T) {
	g := newTopicGroup(6)
	sfx := seq()
	a := join(t, g, "a", t0, sfx)
	b := join(t, g, "b", t0, sfx)
	c := join(t, g, "c", t0, sfx)
	checkAssignment(t, g)
	if err := g.Leave(b.Member, "orders", t0); err != nil {
		t.Fatal(err)
	}
	if g.Generation != 4 || len(g.Members) != 2 {
		t.Fatalf("after leave gen %d members %d", g.Generation, len(g.Members))
	}
	checkAssignment(t, g)
	// c heartbeats, a goes silent: only a expires.
	session := 30 * time.Second
	if _, err := g.Heartbeat(c.Member, "orders", nil, t0.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if gone := g.Expire(t0.Add(29*time.Second), session); gone != nil {
		t.Fatalf("nobody is past the session yet: %v", gone)
	}
	gone := g.Expire(t0.Add(31*time.Second), session)
	if !slices.Equal(gone, []string{a.Member}) {
		t.Fatalf("expired %v", gone)
	}
	if len(g.Members[c.Member].Assigned) != 6 || g.Generation != 5 {
		t.Fatalf("survivor holds %v at gen %d", g.Members[c.Member].Assigned, g.Generation)
	}
	_, err := g.Heartbeat(a.Member, "orders", nil, t0.Add(32*time.Second))
	wantCode(t, err, "member_not_found")
	g.Expire(t0.Add(time.Hour), session)
	if g.State() != StateEmpty || g.AssignedCount() != 0 {
		t.Fatal("group must be empty")
	}
}

func TestAssignmentIsSticky(t *testing.T) {
	g := newTopicGroup(6)
	sfx := seq()
	a := join(t, g, "a", t0, sfx)
	b := join(t, g, "b", t0, sfx)
	before := map[string][]TP{a.Member: slices.Clone(g.Members[a.Member].Assigned), b.Member: slices.Clone(g.Members[b.Member].Assigned)}
	join(t, g, "c", t0, sfx)
	checkAssignment(t, g)
	for id, old := range before {
		kept := 0
		for _, tp := range g.Members[id].Assigned {
			if slices.Contains(old, tp) {
				kept++
			}
		}
		if kept != 2 {
			t.Fatalf("%s kept %d of its partitions, want 2 (moves only what the newcomer needs)", id, kept)
		}
	}
}

func TestAssignmentInvariantsUnderChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, parts := range []int32{1, 3, 8, 17} {
		g := newTopicGroup(parts)
		sfx := seq()
		now := t0
		for step := range 300 {
			now = now.Add(time.Second)
			ids := slices.Sorted(func(yield func(string) bool) {
				for id := range g.Members {
					if !yield(id) {
						return
					}
				}
			})
			gen := g.Generation
			switch op := rng.IntN(3); {
			case op == 0 || len(ids) == 0:
				join(t, g, fmt.Sprintf("m%d", step), now, sfx)
			case op == 1:
				if err := g.Leave(ids[rng.IntN(len(ids))], "orders", now); err != nil {
					t.Fatal(err)
				}
			default:
				g.Expire(now.Add(time.Hour), time.Minute)
			}
			if len(g.Members) != len(ids) && g.Generation <= gen {
				t.Fatal("membership changed without a new generation")
			}
			checkAssignment(t, g)
		}
	}
}

func TestSelectorsAndExpansion(t *testing.T) {
	topics := map[string]int32{"orders": 2, "orders-eu": 1, "payments": 1, "__consumer_offsets": 16}
	for _, tc := range []struct {
		sel  Selector
		want string
		code string
	}{
		{sel: Selector{Topic: "orders"}, want: "orders:0 orders:1"},
		{sel: Selector{Topics: []string{"payments", "orders", "payments"}}, want: "orders:0 orders:1 payments:0"},
		{sel: Selector{Pattern: "orders*"}, want: "orders:0 orders:1 orders-eu:0"},
		{sel: Selector{Pattern: "*"}, want: "orders:0 orders:1 orders-eu:0 payments:0"},
		{sel: Selector{Pattern: "nothing*"}, want: ""},
		{sel: Selector{Topic: "missing"}, code: "topic_not_found"},
		{sel: Selector{Topics: []string{"orders", "missing"}}, code: "topic_not_found"},
	} {
		if err := tc.sel.Validate(); err != nil {
			t.Fatal(err)
		}
		got, err := Expand(tc.sel, topics)
		if tc.code != "" {
			wantCode(t, err, tc.code)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, tp := range got {
			s = append(s, fmt.Sprintf("%s:%d", tp.Topic, tp.Partition))
		}
		if strings.Join(s, " ") != tc.want {
			t.Fatalf("%+v expands to %q, want %q", tc.sel, strings.Join(s, " "), tc.want)
		}
	}
	for _, bad := range []Selector{{}, {Topic: "a", Pattern: "b"}, {Topic: "a", Topics: []string{"b"}}, {Pattern: "[x"}, {Topics: []string{""}}} {
		if err := bad.Validate(); err == nil {
			t.Fatalf("%+v must be rejected", bad)
		}
	}
}

func TestSetPartitionsRebalances(t *testing.T) {
	g := newTopicGroup(2)
	sfx := seq()
	join(t, g, "a", t0, sfx)
	join(t, g, "b", t0, sfx)
	gen := g.Generation
	grown, _ := Expand(Selector{Topic: "orders"}, map[string]int32{"orders": 5})
	if !g.SetPartitions(grown, t0) || g.Generation != gen+1 {
		t.Fatal("growth must rebalance")
	}
	checkAssignment(t, g)
	if g.SetPartitions(grown, t0) {
		t.Fatal("same expansion is no change")
	}
}

func commitSetup(t *testing.T) (*Group, string, string) {
	g := newTopicGroup(4)
	sfx := seq()
	a := join(t, g, "a", t0, sfx)
	b := join(t, g, "b", t0, sfx)
	return g, a.Member, b.Member
}

func TestCommitRules(t *testing.T) {
	g, a, _ := commitSetup(t)
	own := g.Members[a].Assigned[0].Partition
	var notOwn int32 = -1
	for p := int32(0); p < 4; p++ {
		if g.Owner(TP{"orders", p}) != a {
			notOwn = p
			break
		}
	}
	gen := u64(g.Generation)
	g.SetOffset(TP{"orders", own}, 10)
	for _, tc := range []struct {
		name      string
		topic     string
		part      int32
		off       uint64
		member    string
		gen       *uint64
		code      string
		wantWrite bool
	}{
		{name: "forward", topic: "orders", part: own, off: 11, member: a, gen: gen, wantWrite: true},
		{name: "same value is idempotent", topic: "orders", part: own, off: 10, member: a, gen: gen},
		{name: "regression", topic: "orders", part: own, off: 9, member: a, gen: gen, code: "offset_regression"},
		{name: "missing member", topic: "orders", part: own, off: 11, gen: gen, code: "missing_parameter"},
		{name: "missing generation", topic: "orders", part: own, off: 11, member: a, code: "missing_generation"},
		{name: "unknown member", topic: "orders", part: own, off: 11, member: "zz-0001", gen: gen, code: "member_not_found"},
		{name: "stale generation", topic: "orders", part: own, off: 11, member: a, gen: u64(1), code: "GEN_MISMATCH"},
		{name: "not owner", topic: "orders", part: notOwn, off: 11, member: a, gen: gen, code: "NOT_OWNER"},
		{name: "partition outside topic", topic: "orders", part: 99, off: 1, member: a, gen: gen, code: "NOT_OWNER"},
		{name: "other topic", topic: "payments", part: own, off: 11, member: a, gen: gen, code: "topic_not_assigned_to_group"},
		{name: "topic defaults to the group's", part: own, off: 12, member: a, gen: gen, wantWrite: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, write, err := g.CheckCommit(tc.topic, tc.part, tc.off, tc.member, tc.gen)
			if tc.code != "" {
				e := wantCode(t, err, tc.code)
				if tc.code == "NOT_OWNER" && (e.Field("partition") == "" || e.Field("member") != a || e.Field("generation") == "") {
					t.Fatalf("NOT_OWNER fields %v", e)
				}
				if tc.code == "offset_regression" && e.Field("reason") == "" {
					t.Fatal("offset_regression needs a reason")
				}
				return
			}
			if err != nil || write != tc.wantWrite {
				t.Fatalf("write %v err %v", write, err)
			}
		})
	}
	if o, _ := g.Committed(TP{"orders", own}); o != 10 {
		t.Fatalf("checks must not change the stored offset: %d", o)
	}
}

func TestBatchCommitRules(t *testing.T) {
	g, a, b := commitSetup(t)
	mine := g.Members[a].Assigned // two partitions
	theirs := g.Members[b].Assigned
	gen := u64(g.Generation)
	p0, p1 := mine[0].Partition, mine[1].Partition
	g.SetOffset(mine[1], 50)
	list := func(kv ...any) string {
		var s []string
		for i := 0; i < len(kv); i += 2 {
			s = append(s, fmt.Sprintf("P%d:%d", kv[i], kv[i+1]))
		}
		return strings.Join(s, ",")
	}
	many := make([]string, 1025)
	for i := range many {
		many[i] = fmt.Sprintf("P%d:1", i)
	}
	for _, tc := range []struct {
		name    string
		member  string
		gen     *uint64
		entries []wire.PartitionOffset
		raw     string
		code    string
		batched int
		writes  int
	}{
		{name: "raw list", member: a, gen: gen, raw: list(p0, 5, p1, 60), batched: 2, writes: 2},
		{name: "structured entries", member: a, gen: gen, entries: []wire.PartitionOffset{{Partition: p0, Offset: 5}}, batched: 1, writes: 1},
		{name: "equal entry counts, not written", member: a, gen: gen, raw: list(p0, 5, p1, 50), batched: 2, writes: 1},
		{name: "regressed entry skipped", member: a, gen: gen, raw: list(p0, 5, p1, 40), batched: 1, writes: 1},
		{name: "all regressed", member: a, gen: gen, raw: list(p1, 40), code: "no_valid_offsets"},
		{name: "missing generation first", member: a, raw: "garbage", code: "missing_generation"},
		{name: "unknown member first", member: "nobody-0001", gen: gen, raw: "garbage", code: "member_not_found"},
		{name: "stale generation first", member: a, gen: u64(1), raw: "garbage", code: "GEN_MISMATCH"},
		{name: "missing member", gen: gen, raw: list(p0, 1), code: "missing_parameter"},
		{name: "malformed entry", member: a, gen: gen, raw: fmt.Sprintf("P%d:5,%d:6", p0, p1), code: "invalid_batch_commit_entry"},
		{name: "P prefix required", member: a, gen: gen, raw: fmt.Sprintf("%d:5", p0), code: "invalid_batch_commit_entry"},
		{name: "over 1024 entries", member: a, gen: gen, raw: strings.Join(many, ","), code: "invalid_batch_commit_entry"},
		{name: "duplicate partition", member: a, gen: gen, raw: list(p0, 5, p0, 6), code: "duplicate_partition"},
		{name: "any foreign partition rejects all", member: a, gen: gen, raw: list(p0, 5, theirs[0].Partition, 6), code: "NOT_OWNER"},
		{name: "empty", member: a, gen: gen, code: "no_valid_offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.CheckBatch("orders", tc.member, tc.gen, tc.entries, tc.raw)
			if tc.code != "" {
				e := wantCode(t, err, tc.code)
				if tc.code == "duplicate_partition" && (e.Field("partition") == "" || e.Field("group") != "g" || e.Field("topic") != "orders") {
					t.Fatalf("duplicate_partition fields %v", e)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Batched != tc.batched || len(res.Write) != tc.writes {
				t.Fatalf("batched %d writes %d, want %d %d", res.Batched, len(res.Write), tc.batched, tc.writes)
			}
		})
	}
	if o, _ := g.Committed(mine[1]); o != 50 {
		t.Fatal("CheckBatch must not change state")
	}
}

func TestMultiTopicGroup(t *testing.T) {
	topics := map[string]int32{"a": 2, "b": 2}
	sel := Selector{Topics: []string{"a", "b"}}
	parts, err := Expand(sel, topics)
	if err != nil {
		t.Fatal(err)
	}
	g := New("m", sel, parts, 1)
	if !g.Selector.MultiTopic() {
		t.Fatal("topics selector is multi-topic")
	}
	r, err := g.Join("c", "", t0, seq())
	if err != nil || len(r.Assigned) != 4 {
		t.Fatalf("%+v %v", r, err)
	}
	_, _, err = g.CheckCommit("", 0, 1, r.Member, u64(r.Generation))
	wantCode(t, err, "missing_topic")
	if _, w, err := g.CheckCommit("b", 1, 1, r.Member, u64(r.Generation)); err != nil || !w {
		t.Fatal(err)
	}
	if got := g.Topics(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatal(got)
	}
}

func TestResetRules(t *testing.T) {
	idle := newTopicGroup(4)
	idle.SetOffset(TP{"orders", 1}, 50)
	idle.SetOffset(TP{"orders", 2}, 7)
	active := newTopicGroup(4)
	join(t, active, "a", t0, seq())
	sel := Selector{Topics: []string{"orders", "payments"}}
	parts, err := Expand(sel, map[string]int32{"orders": 2, "payments": 3})
	if err != nil {
		t.Fatal(err)
	}
	multi := New("m", sel, parts, 1)
	many := make([]string, 1025)
	manyEntries := make([]wire.PartitionOffset, 1025)
	for i := range many {
		many[i] = fmt.Sprintf("P%d:1", i)
		manyEntries[i] = wire.PartitionOffset{Partition: int32(i), Offset: 1}
	}
	for _, tc := range []struct {
		name    string
		g       *Group
		topic   string
		entries []wire.PartitionOffset
		raw     string
		code    string
		fields  map[string]string
		want    map[TP]uint64
	}{
		{name: "lowers an offset", g: idle, topic: "orders", raw: "P1:5", want: map[TP]uint64{{"orders", 1}: 5}},
		{name: "raises an offset", g: idle, topic: "orders", raw: "P2:900", want: map[TP]uint64{{"orders", 2}: 900}},
		{name: "equal offset is written too", g: idle, topic: "orders", raw: "P1:50", want: map[TP]uint64{{"orders", 1}: 50}},
		{name: "partition without an offset", g: idle, topic: "orders", raw: "P0:0,P3:12",
			want: map[TP]uint64{{"orders", 0}: 0, {"orders", 3}: 12}},
		{name: "structured entries win over raw", g: idle, topic: "orders", entries: []wire.PartitionOffset{{Partition: 3, Offset: 4}}, raw: "garbage",
			want: map[TP]uint64{{"orders", 3}: 4}},
		{name: "second topic of a multi-topic group", g: multi, topic: "payments", raw: "P2:3", want: map[TP]uint64{{"payments", 2}: 3}},
		{name: "topic required", g: idle, raw: "P1:5", code: "missing_topic", fields: map[string]string{"param": "topic", "command": "RESET_OFFSETS"}},
		{name: "topic required for a multi-topic group", g: multi, raw: "P1:5", code: "missing_topic"},
		{name: "active members refuse", g: active, topic: "orders", raw: "P1:5", code: "group_not_empty",
			fields: map[string]string{"group": "g", "members": "1"}},
		{name: "active members refuse before the entries are read", g: active, topic: "orders", raw: "garbage", code: "group_not_empty"},
		{name: "topic not selected", g: idle, topic: "payments", raw: "P1:5", code: "topic_not_assigned_to_group",
			fields: map[string]string{"group": "g", "topic": "payments"}},
		{name: "partition outside the expansion", g: idle, topic: "orders", raw: "P1:5,P4:1", code: "partition_not_found",
			fields: map[string]string{"topic": "orders", "partition": "4"}},
		{name: "partition of the other topic's range", g: multi, topic: "orders", raw: "P2:1", code: "partition_not_found",
			fields: map[string]string{"topic": "orders", "partition": "2"}},
		{name: "malformed entry", g: idle, topic: "orders", raw: "P1:5,2:6", code: "invalid_batch_commit_entry",
			fields: map[string]string{"reason": "bad_entry", "entry": "2:6"}},
		{name: "signed offset", g: idle, topic: "orders", raw: "P1:-5", code: "invalid_batch_commit_entry",
			fields: map[string]string{"reason": "bad_number"}},
		{name: "over 1024 raw entries", g: idle, topic: "orders", raw: strings.Join(many, ","), code: "invalid_batch_commit_entry",
			fields: map[string]string{"reason": "too_many_entries"}},
		{name: "over 1024 structured entries", g: idle, topic: "orders", entries: manyEntries, code: "invalid_batch_commit_entry",
			fields: map[string]string{"reason": "too_many_entries"}},
		{name: "negative structured partition", g: idle, topic: "orders", entries: []wire.PartitionOffset{{Partition: -1, Offset: 1}},
			code: "invalid_batch_commit_entry", fields: map[string]string{"reason": "bad_partition"}},
		{name: "duplicate partition", g: idle, topic: "orders", raw: "P1:5,P1:6", code: "duplicate_partition",
			fields: map[string]string{"partition": "1", "group": "g", "topic": "orders"}},
		{name: "empty", g: idle, topic: "orders", code: "no_valid_offsets"},
		{name: "blank list", g: idle, topic: "orders", raw: "  ", code: "no_valid_offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.g.CheckReset(tc.topic, tc.entries, tc.raw)
			if tc.code != "" {
				e := wantCode(t, err, tc.code)
				for k, v := range tc.fields {
					if e.Field(k) != v {
						t.Fatalf("field %s = %q, want %q (%v)", k, e.Field(k), v, e)
					}
				}
				if got != nil {
					t.Fatalf("a rejected reset returned entries %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("entries %v, want %v", got, tc.want)
			}
		})
	}
	if len(idle.Offsets) != 2 || idle.Offsets[TP{"orders", 1}] != 50 || idle.Offsets[TP{"orders", 2}] != 7 {
		t.Fatalf("CheckReset must not change state: %v", idle.Offsets)
	}
}

func TestTxnMarkMerge(t *testing.T) {
	tp := func(p int32) TP { return TP{Topic: "t", Partition: p} }
	at := time.Unix(100, 0)
	cur := TxnMark{ProducerID: "p", Epoch: 2, Partitions: []TP{tp(1), tp(3)}, Marked: at}
	for _, tc := range []struct {
		name    string
		m       TxnMark
		had     bool
		want    []TP
		changed bool
		marked  time.Time
	}{
		{"first staging, unsorted with a repeat", TxnMark{ProducerID: "p", Epoch: 2, Partitions: []TP{tp(2), tp(0), tp(2)}, Marked: at.Add(time.Second)}, false,
			[]TP{tp(0), tp(2)}, true, at.Add(time.Second)},
		{"same transaction, covered", TxnMark{ProducerID: "p", Epoch: 2, Partitions: []TP{tp(3)}, Marked: at.Add(time.Second)}, true,
			[]TP{tp(1), tp(3)}, false, at},
		{"same transaction widens, keeps its first time", TxnMark{ProducerID: "p", Epoch: 2, Partitions: []TP{tp(2)}, Marked: at.Add(time.Second)}, true,
			[]TP{tp(1), tp(2), tp(3)}, true, at},
		{"a later epoch replaces", TxnMark{ProducerID: "p", Epoch: 3, Partitions: []TP{tp(0)}, Marked: at.Add(time.Second)}, true,
			[]TP{tp(0)}, true, at.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, changed := tc.m.Merge(cur, tc.had)
			if changed != tc.changed || !slices.Equal(next.Partitions, tc.want) || !next.Marked.Equal(tc.marked) {
				t.Fatalf("Merge = %+v changed=%v", next, changed)
			}
			if !slices.Equal(cur.Partitions, []TP{tp(1), tp(3)}) {
				t.Fatalf("Merge changed the current mark: %+v", cur)
			}
		})
	}
}
