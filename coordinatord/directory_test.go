package coordinatord

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/coordfake"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/metrictest"
	"github.com/strataio/strata/libs/pki"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

const (
	coordUpName  = "strata_consumer_group_coordinator_up"
	failuresName = "strata_consumer_group_observation_failures_total"
)

// scraped is one gather of a registry: metric name -> labels (name=value
// pairs joined by commas, in label-name order) -> value.
type scraped map[string]map[string]float64

func scrape(t testing.TB, co *coord) scraped {
	t.Helper()
	mfs, err := co.env.Process.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := scraped{}
	for _, mf := range mfs {
		series := map[string]float64{}
		for _, m := range mf.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
			}
			series[strings.Join(kv, ",")] = metrictest.Value(m)
		}
		out[mf.GetName()] = series
	}
	return out
}

// gt is the label key of a {group, topic} series.
func gt(group, topic string) string { return "group=" + group + ",topic=" + topic }

func failureKey(group, topic, reason string) string {
	return "group=" + group + ",reason=" + reason + ",topic=" + topic
}

// groupSeries returns the names of the gauges that have a series for group.
func (s scraped) groupSeries(group string) []string {
	var out []string
	for name, series := range s {
		if strings.HasSuffix(name, "_total") {
			continue
		}
		for labels := range series {
			if slices.Contains(strings.Split(labels, ","), "group="+group) {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func isSubset(sub, of []string) bool {
	for _, x := range sub {
		if !slices.Contains(of, x) {
			return false
		}
	}
	return true
}

// ownerOf routes group name as co's metadata view does.
func ownerOf(t testing.TB, co *coord, name string) string {
	t.Helper()
	n, _, ok := groups.Coordinator(co.r.meta.Cache().View(), name, 0)
	if !ok {
		t.Fatalf("no coordinator for %s", name)
	}
	return n.GetId()
}

// waitViews waits until the view of every coordinator in cos lists exactly
// ids as live coordinators, and each of them is ready.
func waitViews(t testing.TB, cos []*coord, ids ...string) {
	t.Helper()
	looptest.Eventually(t, "coordinator views", func() error {
		for _, co := range cos {
			var live []string
			for _, n := range co.r.meta.Cache().View().Nodes(metav1.NodeRole_NODE_ROLE_COORDINATORD, true) {
				live = append(live, n.GetId())
			}
			if !slices.Equal(live, ids) {
				return fmt.Errorf("%s sees %v", co.env.NodeID, live)
			}
			if err := co.r.checkReady(context.Background()); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestCoordinatorUpOnEveryCoordinator spreads groups over two
// coordinators: each emits coordinator_up for every group, exactly one of
// them 1, and the lifecycle gauges only on the owner. A deleted group
// leaves both scrapes at once, and a stopped peer turns into
// coordinator_lookup failures for its last-known groups.
func TestCoordinatorUpOnEveryCoordinator(t *testing.T) {
	c := newCluster(t)
	c.putTopic("t", 2, 0)
	c.putTopic("u", 1, 0)
	cfg := testConfig(c)
	cfg.SessionTimeout = time.Minute // members stay for the whole test
	c1 := startCoord(t, c, "c1", cfg)
	c2 := startCoord(t, c, "c2", cfg)
	cos := map[string]*coord{"c1": c1, "c2": c2}
	waitViews(t, []*coord{c1, c2}, "c1", "c2")
	ctx := ctxT(t)

	// Three kinds of group per owner: one with a member, a multi-topic one
	// registered without members, one whose member left.
	type grp struct {
		owner, kind, member string
		topics              []string
	}
	all := map[string]*grp{}
	perOwner := map[string]map[string]string{"c1": {}, "c2": {}} // owner -> kind -> group
	for i := 0; len(all) < 6 && i < 500; i++ {
		name := fmt.Sprintf("g%d", i)
		owner := ownerOf(t, c1, name)
		if o2 := ownerOf(t, c2, name); o2 != owner {
			t.Fatalf("views disagree on %s: %s and %s", name, owner, o2)
		}
		kind := ""
		for _, k := range []string{"member", "registered", "left"} {
			if _, taken := perOwner[owner][k]; !taken {
				kind = k
				break
			}
		}
		if kind == "" {
			continue
		}
		perOwner[owner][kind] = name
		g := &grp{owner: owner, kind: kind, topics: []string{"t"}}
		cl := cos[owner].client
		switch kind {
		case "registered":
			g.topics = []string{"t", "u"}
			if _, err := cl.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: name, Topics: g.topics}); err != nil {
				t.Fatal(err)
			}
		default:
			j, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: name, Member: "m", Topic: "t"})
			if err != nil {
				t.Fatal(err)
			}
			g.member = j.GetMember()
			if _, err := cl.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: name, Topic: "t", Partition: 0, Offset: 3,
				Member: g.member, Generation: u64(j.GetGeneration())}); err != nil {
				t.Fatal(err)
			}
			if kind == "left" {
				if _, err := cl.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: name, Member: g.member, Topic: "t"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		all[name] = g
	}
	if len(all) != 6 {
		t.Fatalf("groups %v", perOwner)
	}

	// 1. Every coordinator emits coordinator_up for every group; the owner
	// says 1, the other 0, and only the owner has the lifecycle gauges.
	// lagSeries appear once the owner read the partitions' HWMs.
	lagSeries := []string{"strata_consumer_group_lag", "strata_consumer_group_offset_out_of_range"}
	lifecycle := []string{"strata_consumer_group_assigned_partitions", "strata_consumer_group_committed_offset",
		coordUpName, "strata_consumer_group_generation", "strata_consumer_group_last_activity_timestamp_seconds",
		"strata_consumer_group_last_rebalance_timestamp_seconds", "strata_consumer_group_members", "strata_consumer_group_state"}
	s := map[string]scraped{"c1": scrape(t, c1), "c2": scrape(t, c2)}
	for name, g := range all {
		for _, topic := range g.topics {
			sum := 0.0
			for id, sc := range s {
				v, ok := sc[coordUpName][gt(name, topic)]
				if !ok {
					t.Fatalf("%s: no coordinator_up for %s/%s", id, name, topic)
				}
				if want := b2f(id == g.owner); v != want {
					t.Fatalf("%s: coordinator_up %s/%s = %v, want %v (owner %s)", id, name, topic, v, want, g.owner)
				}
				sum += v
			}
			if sum != 1 {
				t.Fatalf("sum of coordinator_up of %s/%s = %v", name, topic, sum)
			}
			members := map[bool]float64{true: 1, false: 0}[g.kind == "member"]
			if v, ok := s[g.owner]["strata_consumer_group_members"][gt(name, topic)]; !ok || v != members {
				t.Fatalf("members of %s/%s on its owner = %v (present %v), want %v", name, topic, v, ok, members)
			}
			if v := s[g.owner]["strata_consumer_group_state"]["group="+name+",state=stable,topic="+topic]; v != members {
				t.Fatalf("state stable of %s/%s = %v", name, topic, v)
			}
		}
		required := lifecycle
		if g.kind == "registered" {
			required = slices.DeleteFunc(slices.Clone(lifecycle), func(n string) bool { return n == "strata_consumer_group_committed_offset" })
		}
		if got := s[g.owner].groupSeries(name); !isSubset(required, got) || !isSubset(got, slices.Concat(lifecycle, lagSeries)) {
			t.Fatalf("owner %s: series of %s = %v, want %v (and maybe %v)", g.owner, name, got, required, lagSeries)
		}
		for id, sc := range s {
			if got := sc.groupSeries(name); id != g.owner && !slices.Equal(got, []string{coordUpName}) {
				t.Fatalf("%s: series of %s (owner %s) = %v, want only coordinator_up", id, name, g.owner, got)
			}
		}
	}
	for id, sc := range s {
		for labels := range sc[coordUpName] {
			if name := strings.TrimPrefix(strings.Split(labels, ",")[0], "group="); all[name] == nil {
				t.Fatalf("%s invents coordinator_up for %s", id, labels)
			}
		}
	}

	// 2. A group deleted on its owner (after its member left) is gone from
	// both nodes' next scrape.
	for _, owner := range []string{"c1", "c2"} {
		name := perOwner[owner]["member"]
		cl := cos[owner].client
		if _, err := cl.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: name, Member: all[name].member, Topic: "t"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: name}); err != nil {
			t.Fatal(err)
		}
		for id, co := range cos {
			if got := scrape(t, co).groupSeries(name); len(got) != 0 {
				t.Fatalf("%s still has series %v of %s deleted on %s", id, got, name, owner)
			}
		}
		delete(all, name)
	}

	// 3. c2 stops answering while metad still lists it live: c1 keeps
	// coordinator_up 0 for c2's last-known groups and counts one
	// coordinator_lookup failure per group and topic at every scrape.
	c2.stop()
	for scrapeNo := 1.0; scrapeNo <= 2; scrapeNo++ {
		start := time.Now()
		sc := scrape(t, c1)
		if d := time.Since(start); d > peerLookupTimeout+time.Second {
			t.Fatalf("scrape with a stopped peer took %v", d)
		}
		var wantFailures []string
		for name, g := range all {
			for _, topic := range g.topics {
				if v, ok := sc[coordUpName][gt(name, topic)]; !ok || v != b2f(g.owner == "c1") {
					t.Fatalf("after c2 stopped: coordinator_up %s/%s = %v (present %v)", name, topic, v, ok)
				}
				if g.owner == "c2" {
					wantFailures = append(wantFailures, failureKey(name, topic, "coordinator_lookup"))
				}
			}
		}
		slices.Sort(wantFailures)
		if got := slices.Sorted(maps.Keys(sc[failuresName])); !slices.Equal(got, wantFailures) {
			t.Fatalf("failure series %v, want %v", got, wantFailures)
		}
		for _, k := range wantFailures {
			if v := sc[failuresName][k]; v != scrapeNo {
				t.Fatalf("scrape %v: %s = %v", scrapeNo, k, v)
			}
		}
	}

	// Once c2's lease is gone c1 owns everything, forgets c2 and counts no
	// further failures.
	c.meta.SetLive("c2", false)
	waitViews(t, []*coord{c1}, "c1")
	sc := scrape(t, c1)
	for name, g := range all {
		for _, topic := range g.topics {
			if v := sc[coordUpName][gt(name, topic)]; v != 1 {
				t.Fatalf("c1 after taking over: coordinator_up %s/%s = %v", name, topic, v)
			}
			if g.owner == "c2" {
				if v := sc[failuresName][failureKey(name, topic, "coordinator_lookup")]; v != 2 {
					t.Fatalf("failures of %s/%s after c2 left = %v, want still 2", name, topic, v)
				}
			}
		}
	}
}

// TestPeerLookupFailures: a peer that answered once and then fails (an
// error, or no answer at all) costs a scrape at most the lookup bound; its
// last-known groups keep coordinator_up 0 (a group this node owns keeps 1)
// and count coordinator_lookup failures; a peer that is no longer live is
// forgotten, also when it comes back.
func TestPeerLookupFailures(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, tc := range []struct {
		mode    string
		fault   fakerpc.Hook  // how the peer's ListGroups fails
		minTook time.Duration // the bound itself when the peer hangs
	}{
		{"error", fakerpc.Fail(errcode.CoordinatorNotAvailable.New("offsets partitions not replayed yet")), 0},
		{"hang", fakerpc.Hang(), bound},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c := newCluster(t)
			c.putTopic("t", 1, 0)
			c.putTopic("u", 1, 0)
			c1 := startCoord(t, c, "c1", testConfig(c))
			c1.r.dir.timeout = bound
			peer := coordfake.Start(t, c.ca, coordfake.Options{ID: "p9"})
			addr := peer.Addr
			if _, err := c.meta.RegisterNode(context.Background(), &metav1.RegisterNodeRequest{Node: &metav1.Node{Id: "p9",
				Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: addr}}); err != nil {
				t.Fatal(err)
			}
			waitViews(t, []*coord{c1}, "c1", "p9")
			mine := ""
			for i := 0; mine == ""; i++ {
				if n := fmt.Sprintf("mine%d", i); ownerOf(t, c1, n) == "c1" {
					mine = n
				}
			}
			ctx := ctxT(t)
			if _, err := c1.client.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: mine, Topic: "t"}); err != nil {
				t.Fatal(err)
			}
			// The peer claims mine too (overlapping views): c1 keeps its 1.
			for _, g := range []*coordinatorv1.RegisterGroupRequest{{Group: "theirs", Topics: []string{"t", "u"}}, {Group: mine, Topic: "t"}} {
				if _, err := peer.RegisterGroup(ctx, g); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]float64{gt("theirs", "t"): 0, gt("theirs", "u"): 0, gt(mine, "t"): 1}

			sc := scrape(t, c1)
			if !maps.Equal(sc[coordUpName], want) {
				t.Fatalf("coordinator_up %v, want %v", sc[coordUpName], want)
			}
			if f := sc[failuresName]; len(f) != 0 {
				t.Fatalf("failures before any failure: %v", f)
			}

			peer.On("ListGroups", 0, tc.fault)
			for n := 1.0; n <= 2; n++ {
				start := time.Now()
				sc = scrape(t, c1)
				took := time.Since(start)
				if took < tc.minTook || took > bound+time.Second {
					t.Fatalf("scrape %v took %v (bound %v)", n, took, bound)
				}
				if !maps.Equal(sc[coordUpName], want) {
					t.Fatalf("scrape %v: coordinator_up %v, want %v", n, sc[coordUpName], want)
				}
				wantF := map[string]float64{failureKey("theirs", "t", "coordinator_lookup"): n,
					failureKey("theirs", "u", "coordinator_lookup"): n, failureKey(mine, "t", "coordinator_lookup"): n}
				if !maps.Equal(sc[failuresName], wantF) {
					t.Fatalf("scrape %v: failures %v, want %v", n, sc[failuresName], wantF)
				}
			}

			// The peer's lease expires: its groups vanish, failures stop.
			c.meta.SetLive("p9", false)
			waitViews(t, []*coord{c1}, "c1")
			sc = scrape(t, c1)
			if want := map[string]float64{gt(mine, "t"): 1}; !maps.Equal(sc[coordUpName], want) {
				t.Fatalf("after the peer left: coordinator_up %v, want %v", sc[coordUpName], want)
			}
			if v := sc[failuresName][failureKey("theirs", "t", "coordinator_lookup")]; v != 2 {
				t.Fatalf("after the peer left: failures %v", sc[failuresName])
			}

			// It comes back, still failing: its old answer was forgotten, so
			// nothing is emitted or counted for groups it never reported since.
			if _, err := c.meta.RegisterNode(context.Background(), &metav1.RegisterNodeRequest{Node: &metav1.Node{Id: "p9",
				Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: addr}}); err != nil {
				t.Fatal(err)
			}
			waitViews(t, []*coord{c1}, "c1", "p9")
			sc = scrape(t, c1)
			if want := map[string]float64{gt(mine, "t"): 1}; !maps.Equal(sc[coordUpName], want) {
				t.Fatalf("peer back, never answered: coordinator_up %v, want %v", sc[coordUpName], want)
			}
			if v := sc[failuresName][failureKey("theirs", "t", "coordinator_lookup")]; v != 2 {
				t.Fatalf("peer back, never answered: failures %v", sc[failuresName])
			}
		})
	}
}

// TestPolicyLetsCoordinatorsListGroupsOnly: a coordinatord may ask its
// peers ListGroups (the scrape fan-out) and nothing else.
func TestPolicyLetsCoordinatorsListGroupsOnly(t *testing.T) {
	svc := "/" + coordinatorv1.CoordinatorService_ServiceDesc.ServiceName + "/"
	pol := Policy()
	for _, m := range coordinatorv1.CoordinatorService_ServiceDesc.Methods {
		allowed := pol[svc+m.MethodName]
		if slices.Contains([]string{"ValidateTxnOffsets", "CommitTxnOffsets", "AbortTxnOffsets", "TxnOffsetsPending"}, m.MethodName) {
			// Between the transaction and the group coordinator only.
			if !slices.Equal(allowed, []pki.Role{pki.RoleCoordinatord, pki.RoleAdmin}) {
				t.Errorf("%s: allowed %v", m.MethodName, allowed)
			}
			continue
		}
		if want := m.MethodName == "ListGroups"; slices.Contains(allowed, pki.RoleCoordinatord) != want {
			t.Errorf("%s: coordinatord allowed = %v, want %v", m.MethodName, !want, want)
		}
		for _, r := range []pki.Role{pki.RoleGateway, pki.RoleAdmin} {
			if !slices.Contains(allowed, r) {
				t.Errorf("%s: %s no longer allowed", m.MethodName, r)
			}
		}
	}
}
