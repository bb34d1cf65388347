package coordinatord

import (
	"fmt"
	"testing"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/coordinatord/internal/offsetlog"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/looptest"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// TestHandoverKeepsEveryAcknowledgedCommit moves groups between two
// coordinators (a node joins, then its lease expires) and checks that every
// acknowledged commit is visible on the new owner and no lower offset
// appears; coordinator_up follows the owner (1) on both nodes (0 on the
// other).
func TestHandoverKeepsEveryAcknowledgedCommit(t *testing.T) {
	c, c1 := startSingle(t, "t", 1)
	ctx := ctxT(t)
	const n = 40
	committed := map[string]uint64{}
	commit := func(co *coord, g string, off uint64) {
		t.Helper()
		j, err := co.client.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: g, Member: "m", Topic: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := co.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: g, Topic: "t", Partition: 0, Offset: off,
			Member: j.GetMember(), Generation: u64(j.GetGeneration())}); err != nil {
			t.Fatal(err)
		}
		committed[g] = off
		if _, err := co.client.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: g, Member: j.GetMember(), Topic: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		commit(c1, fmt.Sprintf("g%d", i), uint64(100+i))
	}
	// c2 joins the ring: groups of the partitions it now owns move there.
	c2 := startCoord(t, c, "c2", testConfig(c))
	c2.waitReady(t)
	c1.waitReady(t)
	owners := map[string]*coord{}
	looptest.Eventually(t, "both views agree", func() error {
		moved := 0
		for i := range n {
			g := fmt.Sprintf("g%d", i)
			n1, _, ok1 := groups.Coordinator(c1.r.meta.Cache().View(), g, 0)
			n2, _, ok2 := groups.Coordinator(c2.r.meta.Cache().View(), g, 0)
			if !ok1 || !ok2 || n1.GetId() != n2.GetId() {
				return fmt.Errorf("views differ on %s", g)
			}
			owners[g] = map[string]*coord{"c1": c1, "c2": c2}[n1.GetId()]
			if n1.GetId() == "c2" {
				moved++
			}
		}
		if moved == 0 {
			return fmt.Errorf("nothing moved to c2")
		}
		return nil
	})
	// Every group has coordinator_up on both nodes: 1 on its owner, 0 on the
	// other (the old owner of a moved group).
	looptest.Eventually(t, "coordinator_up 1 on the owner and 0 on the other", func() error {
		s1, s2 := scrape(t, c1), scrape(t, c2)
		for g, o := range owners {
			v1, ok1 := s1[coordUpName][gt(g, "t")]
			v2, ok2 := s2[coordUpName][gt(g, "t")]
			if !ok1 || !ok2 || v1 != b2f(o == c1) || v2 != b2f(o == c2) {
				return fmt.Errorf("%s (owner %s): c1 %v (present %v), c2 %v (present %v)", g, o.env.NodeID, v1, ok1, v2, ok2)
			}
		}
		return nil
	})
	check := func() {
		t.Helper()
		for g, want := range committed {
			fo, err := owners[g].client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: g, Topic: "t", Partition: 0})
			if err != nil || fo.GetOffset() != want {
				t.Fatalf("%s on its owner: %v %v, want %d", g, fo, err, want)
			}
		}
	}
	check()
	// The new owners take further commits (members rejoin after the move).
	for g, co := range owners {
		commit(co, g, committed[g]+1000)
	}
	// c2 disappears (its lease expires): c1 takes everything back and sees
	// c2's commits; a regression below them is refused.
	c2.stop()
	c.meta.SetLive("c2", false)
	for g := range owners {
		owners[g] = c1
	}
	looptest.Eventually(t, "c1 owns everything again", func() error {
		if err := c1.r.checkReady(ctx); err != nil {
			return err
		}
		c1.r.mu.Lock()
		defer c1.r.mu.Unlock()
		if len(c1.r.shards) != groups.DefaultOffsetsPartitions {
			return fmt.Errorf("c1 holds %d partitions", len(c1.r.shards))
		}
		return nil
	})
	check()
	s1 := scrape(t, c1)
	for g := range owners {
		if v := s1[coordUpName][gt(g, "t")]; v != 1 {
			t.Fatalf("%s back on c1: coordinator_up %v", g, v)
		}
	}
	g := "g0"
	j, err := c1.client.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: g, Member: "m2", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c1.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: g, Topic: "t", Partition: 0,
		Offset: committed[g] - 1, Member: j.GetMember(), Generation: u64(j.GetGeneration())})
	if code(err) != "offset_regression" {
		t.Fatalf("lower offset after handover: %v", err)
	}
}

// TestDeposedOwnerWithAStaleViewRefusesReads: a newer owner took a group's
// partition (its view moved on) and acknowledged a commit, while the old
// owner's view still names the old owner. The old owner must not answer
// FETCH_OFFSET from memory below that commit.
func TestDeposedOwnerWithAStaleViewRefusesReads(t *testing.T) {
	_, c1 := startSingle(t, "t", 1)
	ctx := ctxT(t)
	const g = "g"
	j, err := c1.client.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: g, Member: "m", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: g, Topic: "t", Partition: 0, Offset: 10,
		Member: j.GetMember(), Generation: u64(j.GetGeneration())}); err != nil {
		t.Fatal(err)
	}
	if fo, err := c1.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: g, Topic: "t", Partition: 0}); err != nil || fo.GetOffset() != 10 {
		t.Fatalf("owner read: %v %v", fo, err)
	}

	// The newer owner of g's partition, as a coordinator whose view c1 has
	// not seen yet would act: fence with a higher epoch, replay, commit.
	p := groups.Partition(g, groups.DefaultOffsetsPartitions)
	newer, rep, err := offsetlog.Takeover(ctx, c1.r.logClient(p), offsetlog.Options{Topic: groups.OffsetsTopic, Partition: p,
		Epoch: 1 << 40, Node: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	inc := rep.Groups[g].Incarnation
	if err := newer.Append(ctx, []offsetlog.Value{offsetlog.Offset(g, inc, group.TP{Topic: "t", Partition: 0}, 20)}); err != nil {
		t.Fatal(err)
	}

	_, err = c1.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: g, Topic: "t", Partition: 0})
	if e := errcode.From(err); e.Code != errcode.CoordinatorNotAvailable.Name() || !e.Retryable {
		t.Fatalf("deposed owner answered a read: %v", err)
	}
	// Unknown groups of that partition are no different: "nothing committed"
	// would be just as stale.
	other := ""
	for i := 0; other == ""; i++ {
		if n := fmt.Sprintf("x%d", i); groups.Partition(n, groups.DefaultOffsetsPartitions) == p {
			other = n
		}
	}
	if _, err := c1.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: other, Topic: "t", Partition: 0}); code(err) != errcode.CoordinatorNotAvailable.Name() {
		t.Fatalf("deposed owner answered for an unknown group: %v", err)
	}
	// Groups of partitions nobody took keep being served.
	for i := 0; ; i++ {
		n := fmt.Sprintf("y%d", i)
		if groups.Partition(n, groups.DefaultOffsetsPartitions) == p {
			continue
		}
		if fo, err := c1.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: n, Topic: "t", Partition: 0}); err != nil || fo.GetOffset() != 0 {
			t.Fatalf("other partition: %v %v", fo, err)
		}
		break
	}
}
