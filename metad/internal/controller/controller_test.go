package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/metad/internal/fsm"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

type sim struct {
	t   *testing.T
	f   *fsm.FSM
	idx uint64
}

func (s *sim) apply(p proto.Message) *fsm.Result {
	s.t.Helper()
	s.idx++
	r := s.f.ApplyCommand(s.idx, fsm.MustEncode(p))
	if r.Err != nil {
		s.t.Fatalf("%T: %v", p, r.Err)
	}
	return r
}

func (s *sim) plan(now, since time.Time, cfg Config) []proto.Message {
	var out []proto.Message
	s.f.Read(func(st *fsm.State) { out = Plan(st, now, since, cfg) })
	return out
}

func types(cmds []proto.Message) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, string(c.ProtoReflect().Descriptor().Name()))
	}
	return out
}

func node(id string, inc uint64) *metav1.Node {
	return &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1", Incarnation: inc, LifecycleVersions: []uint32{1, 2}}
}

func TestPlanInitialisesTheClusterOnce(t *testing.T) {
	s := &sim{t: t, f: fsm.New(fsm.Options{})}
	now := time.UnixMilli(1_700_000_000_000)
	cmds := s.plan(now, now, Config{TxnShards: 64})
	if len(cmds) != 1 || cmds[0].(*metav1.InitClusterCommand).GetTransactionCoordinatorShards() != 64 {
		t.Fatalf("plan = %v", cmds)
	}
	s.apply(cmds[0])
	if cmds := s.plan(now, now, Config{TxnShards: 64}); len(cmds) != 0 {
		t.Fatalf("plan after init = %v", types(cmds))
	}
}

func TestPlanWaitsOneLeaseBeforeExpiringAndThenReconciles(t *testing.T) {
	s := &sim{t: t, f: fsm.New(fsm.Options{})}
	t0 := time.UnixMilli(1_700_000_000_000)
	cfg := Config{LeaseTimeout: 10 * time.Second}
	s.apply(&metav1.InitClusterCommand{TransactionCoordinatorShards: 50})
	for _, id := range []string{"p1", "p2", "p3"} {
		s.apply(&metav1.RegisterNodeCommand{Node: node(id, 1), NowUnixMs: t0.UnixMilli()})
	}
	s.apply(&metav1.CreateTopicCommand{Request: &metav1.CreateTopicRequest{Name: "t"}, Defaults: &metav1.TopicDefaults{ReplicationFactor: 3}})
	if cmds := s.plan(t0.Add(5*time.Second), t0, cfg); len(cmds) != 0 {
		t.Fatalf("nothing expired yet, plan = %v", types(cmds))
	}
	late := t0.Add(11 * time.Second)
	if cmds := s.plan(late, late.Add(-time.Second), cfg); len(cmds) != 0 {
		t.Fatalf("new leader expired nodes inside its grace period: %v", types(cmds))
	}
	cmds := s.plan(late, t0, cfg)
	if len(cmds) != 1 {
		t.Fatalf("plan = %v, want one RECONCILE", types(cmds))
	}
	r := s.apply(cmds[0]).Response.(*fsm.ReconcileResult)
	if len(r.ExpiredNodes) != 3 || r.LeaderChanges != 4 {
		t.Fatalf("reconcile = %+v", r)
	}
	if cmds := s.plan(late, t0, cfg); len(cmds) != 0 {
		t.Fatalf("plan after reconcile = %v", types(cmds))
	}
	// A node returns: its offline partitions need a leader, no expiry is
	// involved, so even a brand-new leader proposes the repair at once.
	s.apply(&metav1.RegisterNodeCommand{Node: node("p1", 2), NowUnixMs: late.UnixMilli()})
	cmds = s.plan(late, late, cfg)
	if len(cmds) != 1 {
		t.Fatalf("repair plan = %v", types(cmds))
	}
	if r := s.apply(cmds[0]).Response.(*fsm.ReconcileResult); r.LeaderChanges == 0 || len(r.ExpiredNodes) != 0 {
		t.Fatalf("repair = %+v", r)
	}
}

// fakeNode is a Proposer over a local FSM whose leadership the test flips.
type fakeNode struct {
	mu       sync.Mutex
	leader   bool
	f        *fsm.FSM
	idx      uint64
	proposed chan string
}

func (n *fakeNode) IsLeader() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader
}

func (n *fakeNode) Barrier(context.Context) error { return nil }
func (n *fakeNode) FSM() *fsm.FSM                 { return n.f }

func (n *fakeNode) Propose(_ context.Context, p proto.Message) (*fsm.Result, error) {
	n.mu.Lock()
	n.idx++
	r := n.f.ApplyCommand(n.idx, fsm.MustEncode(p))
	n.mu.Unlock()
	n.proposed <- string(p.ProtoReflect().Descriptor().Name())
	return r, r.Err
}

// A node that becomes leader between ticks plans as soon as Wake fires, not
// an Interval later.
func TestRunPlansAtOnceWhenWoken(t *testing.T) {
	n := &fakeNode{f: fsm.New(fsm.Options{}), proposed: make(chan string, 4)}
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, n, Config{LeaseTimeout: time.Hour, Interval: time.Hour, Wake: wake}, time.Now, nil)
	}()
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(20 * time.Millisecond) // Run saw a follower and waits for the next tick
	n.mu.Lock()
	n.leader = true
	n.mu.Unlock()
	wake <- struct{}{}
	select {
	case got := <-n.proposed:
		if got != "InitClusterCommand" {
			t.Fatalf("proposed %s, want InitClusterCommand", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the woken controller did not plan")
	}
}
