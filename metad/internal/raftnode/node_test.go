package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/metad/internal/controller"
	"github.com/strataio/strata/metad/internal/fsm"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// fast makes elections and commits quick enough for tests, with margins
// that hold under -race.
func fast(c *raft.Config) {
	c.HeartbeatTimeout = 150 * time.Millisecond
	c.ElectionTimeout = 150 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

// cluster is n metad Raft nodes on raft's in-memory transport.
type cluster struct {
	t      *testing.T
	mu     sync.Mutex // guards nodes and trans: background test goroutines read them
	ids    []raft.ServerID
	dirs   map[raft.ServerID]string
	nodes  map[raft.ServerID]*Node
	trans  map[raft.ServerID]*raft.InmemTransport
	tune   func(*raft.Config)
	voters []raft.Server
}

func newCluster(t *testing.T, n int, tune func(*raft.Config)) *cluster {
	c := &cluster{t: t, dirs: map[raft.ServerID]string{}, nodes: map[raft.ServerID]*Node{}, trans: map[raft.ServerID]*raft.InmemTransport{}, tune: tune}
	for i := 1; i <= n; i++ {
		id := raft.ServerID(fmt.Sprintf("m%d", i))
		c.ids = append(c.ids, id)
		c.dirs[id] = t.TempDir()
		c.voters = append(c.voters, raft.Server{ID: id, Address: raft.ServerAddress(id), Suffrage: raft.Voter})
	}
	for _, id := range c.ids {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			c.stop(id)
		}
	})
	return c
}

// start (re)starts node id on its directory with a fresh transport wired to
// every running peer.
func (c *cluster) start(id raft.ServerID) {
	c.t.Helper()
	_, tr := raft.NewInmemTransport(raft.ServerAddress(id))
	c.mu.Lock()
	for pid, ptr := range c.trans {
		tr.Connect(raft.ServerAddress(pid), ptr)
		ptr.Connect(raft.ServerAddress(id), tr)
	}
	c.mu.Unlock()
	n, err := New(Config{
		ID: id, Address: raft.ServerAddress(id), Dir: c.dirs[id], Transport: tr, Voters: c.voters,
		Logger: testLogger(), Raft: func(rc *raft.Config) {
			fast(rc)
			if c.tune != nil {
				c.tune(rc)
			}
		},
		LeaderRPCAddress: func(id raft.ServerID, _ raft.ServerAddress) string { return "rpc-" + string(id) },
	})
	if err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	c.mu.Lock()
	c.trans[id] = tr
	c.nodes[id] = n
	c.mu.Unlock()
}

// stop shuts node id down (the kill of an in-process test: its transport is
// cut from every peer).
func (c *cluster) stop(id raft.ServerID) {
	c.mu.Lock()
	n, ok := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if !ok {
		return
	}
	c.mu.Lock()
	for pid, ptr := range c.trans {
		if pid != id {
			ptr.Disconnect(raft.ServerAddress(id))
		}
	}
	c.mu.Unlock()
	if err := n.Shutdown(); err != nil {
		c.t.Errorf("shutdown %s: %v", id, err)
	}
	c.mu.Lock()
	delete(c.trans, id)
	c.mu.Unlock()
}

// running returns the running nodes.
func (c *cluster) running() map[raft.ServerID]*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[raft.ServerID]*Node, len(c.nodes))
	for id, n := range c.nodes {
		out[id] = n
	}
	return out
}

func (c *cluster) leader(timeout time.Duration) *Node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, n := range c.running() {
			if n.IsLeader() {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %v", timeout)
	return nil
}

// converge waits until every running node applied the same index and holds
// byte-identical state.
func (c *cluster) converge(timeout time.Duration) []byte {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var want []byte
		var idx uint64
		same := true
		for _, n := range c.running() {
			s, i := n.FSM().EncodeState(), n.FSM().AppliedIndex()
			if want == nil {
				want, idx = s, i
				continue
			}
			if i != idx || !bytes.Equal(s, want) {
				same = false
			}
		}
		if same {
			return want
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nodes did not converge within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctx(t *testing.T) context.Context { return looptest.Context(t, 5*time.Second) }

func setupCluster(t *testing.T, n *Node) {
	t.Helper()
	for _, p := range []protoMsg{
		&metav1.InitClusterCommand{TransactionCoordinatorShards: 50},
		&metav1.RegisterNodeCommand{Node: pd("p1"), NowUnixMs: time.Now().UnixMilli()},
	} {
		if _, err := n.Propose(ctx(t), p); err != nil {
			t.Fatal(err)
		}
	}
}

type protoMsg = proto.Message

func pd(id string) *metav1.Node {
	return &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:7000", Incarnation: 1, LifecycleVersions: []uint32{1, 2}}
}

// proposeTopics creates topics prefix0..prefix(count-1), replication
// factor 1, through n.
func proposeTopics(t *testing.T, n *Node, prefix string, count int) {
	t.Helper()
	for i := range count {
		if _, err := n.Propose(ctx(t), createCmd(fmt.Sprintf("%s%d", prefix, i), 1)); err != nil {
			t.Fatal(err)
		}
	}
}

func createCmd(name string, rf int32) *metav1.CreateTopicCommand {
	return &metav1.CreateTopicCommand{Request: &metav1.CreateTopicRequest{Name: name, Partitions: ptr[int32](2)},
		Defaults: &metav1.TopicDefaults{ReplicationFactor: rf}}
}

func ptr[T any](v T) *T { return &v }

func topicNames(n *Node) map[string]bool {
	out := map[string]bool{}
	n.FSM().Read(func(st *fsm.State) {
		for _, t := range st.Topics() {
			out[t.GetConfig().GetName()] = true
		}
	})
	return out
}

func TestSingleVoterAppliesAndRecoversAfterRestart(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.leader(5 * time.Second)
	setupCluster(t, n)
	proposeTopics(t, n, "t", 20)
	before := n.FSM().EncodeState()
	c.stop("m1")
	c.start("m1") // same directory: no second bootstrap, state from the log
	n = c.leader(5 * time.Second)
	if err := n.Barrier(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(n.FSM().EncodeState(), before) {
		t.Fatal("state differs after restart")
	}
	if b, err := os.ReadFile(filepath.Join(c.dirs["m1"], MarkerFile)); err != nil || string(b) != "9\n" {
		t.Fatalf("marker = %q, %v", b, err)
	}
}

func TestProposeSurfacesTypedRejections(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.leader(5 * time.Second)
	setupCluster(t, n)
	res, err := n.Propose(ctx(t), createCmd("..", 1))
	if !errors.Is(err, errcode.InvalidTopicName) || res == nil || res.Err == nil {
		t.Fatalf("Propose = %v, %v", res, err)
	}
	res, err = n.ProposeRaw(ctx(t), []byte{1, 0x7f, 0x7f})
	if !errors.Is(err, errcode.UnknownCommand) {
		t.Fatalf("unknown command = %v, %v", res, err)
	}
}

func TestFollowerAnswersNotLeaderWithTheLeaderAddress(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader(5 * time.Second)
	for _, n := range c.running() {
		if n == l {
			continue
		}
		_, err := n.Propose(ctx(t), createCmd("t", 1))
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.NotLeader.Name() || e.Field("leader") != "rpc-"+string(l.ID()) {
			// A follower may not know the leader for a moment after the
			// election; then it says no_raft_leader (retryable).
			if !errors.Is(err, errcode.NoRaftLeader) {
				t.Fatalf("follower Propose = %v", err)
			}
		}
	}
}

// TestLeaderLossKeepsEveryAcknowledgedWrite kills the leader of a 3-node
// cluster under writes: a new leader serves within seconds, every write
// acknowledged before or after the kill is on every survivor, the old leader
// catches up after a restart, and all FSMs end byte-identical.
func TestLeaderLossKeepsEveryAcknowledgedWrite(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader(5 * time.Second)
	setupCluster(t, l)
	var acked []string
	var mu sync.Mutex
	write := func(n *Node, name string) error {
		_, err := n.Propose(ctx(t), createCmd(name, 1))
		if err == nil {
			mu.Lock()
			acked = append(acked, name)
			mu.Unlock()
		}
		return err
	}
	for i := range 30 {
		if err := write(l, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		old := l.ID()
		killedAt := time.Now()
		c.stop(old)
		l = c.leader(5 * time.Second)
		// Serve a write on the new leader.
		for {
			err := write(l, fmt.Sprintf("after-%d", round))
			if err == nil {
				break
			}
			if !errcode.IsRetryable(err) || time.Since(killedAt) > 5*time.Second {
				t.Fatalf("round %d: new leader %s does not serve: %v", round, l.ID(), err)
			}
			time.Sleep(20 * time.Millisecond)
			l = c.leader(5 * time.Second)
		}
		t.Logf("round %d: killed %s, %s served a write after %v", round, old, l.ID(), time.Since(killedAt).Round(time.Millisecond))
		for i := range 10 {
			if err := write(l, fmt.Sprintf("r%d-%d", round, i)); err != nil {
				t.Fatal(err)
			}
		}
		c.start(old) // follower restart: catches up
		c.converge(10 * time.Second)
	}
	for id, n := range c.running() {
		names := topicNames(n)
		for _, a := range acked {
			if !names[a] {
				t.Fatalf("node %s lost acknowledged write %s", id, a)
			}
		}
	}
}

// TestLaggingFollowerCatchesUpFromASnapshot keeps a follower down while the
// leader snapshots and compacts its log, so the follower must install the
// snapshot (FSM Restore) to catch up; every FSM ends identical.
func TestLaggingFollowerCatchesUpFromASnapshot(t *testing.T) {
	c := newCluster(t, 3, func(rc *raft.Config) {
		rc.SnapshotThreshold = 20
		rc.TrailingLogs = 5
		rc.SnapshotInterval = 50 * time.Millisecond
	})
	l := c.leader(5 * time.Second)
	setupCluster(t, l)
	var follower raft.ServerID
	for _, id := range c.ids {
		if id != l.ID() {
			follower = id
			break
		}
	}
	c.stop(follower)
	proposeTopics(t, l, "t", 60)
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if first, _ := l.store.FirstIndex(); first <= 1 {
		t.Fatalf("leader log not compacted (first index %d)", first)
	}
	c.start(follower)
	c.converge(10 * time.Second)
	if got := len(topicNames(c.running()[follower])); got != 60 {
		t.Fatalf("follower has %d topics", got)
	}
}

func TestSnapshotAndRestartRestoresIdenticalState(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.leader(5 * time.Second)
	setupCluster(t, n)
	proposeTopics(t, n, "t", 10)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	proposeTopics(t, n, "u", 5) // and some log after the snapshot
	want := n.FSM().EncodeState()
	rev := n.FSM().Revision()
	c.stop("m1")
	c.start("m1")
	n = c.leader(5 * time.Second)
	if err := n.Barrier(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(n.FSM().EncodeState(), want) || n.FSM().Revision() != rev {
		t.Fatal("state after snapshot + log replay differs")
	}
}

func TestNewRefusesDirectoriesOfAnotherFormat(t *testing.T) {
	t.Run("UnmarkedNonEmpty", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "raft.db"), []byte("bolt"), 0o600)
		_, tr := raft.NewInmemTransport("m1")
		_, err := New(Config{ID: "m1", Address: "m1", Dir: dir, Transport: tr})
		if !errors.Is(err, errcode.UnsupportedRecoveryProtocol) {
			t.Fatalf("New = %v", err)
		}
	})
	t.Run("OlderSnapshot", func(t *testing.T) {
		dir := t.TempDir()
		if err := EnsureFormatMarker(dir); err != nil {
			t.Fatal(err)
		}
		snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, NewHCLogger(testLogger(), "t", 0))
		if err != nil {
			t.Fatal(err)
		}
		_, tr := raft.NewInmemTransport("m1")
		sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{Servers: []raft.Server{{ID: "m1", Address: "m1"}}}, 1, tr)
		if err != nil {
			t.Fatal(err)
		}
		sink.Write([]byte("STRATAMS\x00\x00\x00\x08\x00\x00\x00\x01")) // a version-8 snapshot
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		_, err = New(Config{ID: "m1", Address: "m1", Dir: dir, Transport: tr})
		if !errors.Is(err, errcode.UnsupportedRecoveryProtocol) {
			t.Fatalf("New = %v", err)
		}
		tr.Close()
	})
	t.Run("VotersWithoutSelf", func(t *testing.T) {
		_, tr := raft.NewInmemTransport("m1")
		_, err := New(Config{ID: "m1", Address: "m1", Dir: t.TempDir(), Transport: tr, Voters: []raft.Server{{ID: "m2", Address: "m2"}}})
		if !errors.Is(err, errcode.InvalidParameter) {
			t.Fatalf("New = %v", err)
		}
	})
}

// TestControllerMovesLeadershipOffAnExpiredNode runs the controller loop on
// every metad node: a partition server that stops heartbeating loses its
// lease and its partitions move to an in-sync replica, also across a metad
// leader change.
func TestControllerMovesLeadershipOffAnExpiredNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	lease := 400 * time.Millisecond
	cfg := controller.Config{LeaseTimeout: lease, Interval: 50 * time.Millisecond}
	runCtx, stopAll := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	runners := map[raft.ServerID]context.CancelFunc{}
	run := func(id raft.ServerID) {
		cctx, cancel := context.WithCancel(runCtx)
		runners[id] = cancel
		n := c.running()[id]
		wg.Add(1)
		go func() { defer wg.Done(); controller.Run(cctx, n, cfg, time.Now, testLogger()) }()
	}
	defer func() { stopAll(); wg.Wait() }()
	for _, id := range c.ids {
		run(id)
	}
	l := c.leader(5 * time.Second)
	// The controller initialises the cluster by itself.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ok bool
		l.FSM().Read(func(st *fsm.State) { ok = st.Initialized() })
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("controller did not initialise the cluster")
		}
		time.Sleep(20 * time.Millisecond)
	}
	propose := func(p protoMsg) {
		t.Helper()
		for {
			n := c.leader(5 * time.Second)
			_, err := n.Propose(ctx(t), p)
			if err == nil {
				return
			}
			if !errcode.IsRetryable(err) {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		propose(&metav1.RegisterNodeCommand{Node: pd(id), NowUnixMs: time.Now().UnixMilli()})
	}
	propose(&metav1.CreateTopicCommand{Request: &metav1.CreateTopicRequest{Name: "t", Partitions: ptr[int32](3)}, Defaults: &metav1.TopicDefaults{ReplicationFactor: 3}})
	var parts []*metav1.PartitionState
	l = c.leader(5 * time.Second)
	l.FSM().Read(func(st *fsm.State) { tp, _ := st.Topic("t"); parts = tp.GetPartitions() })
	for _, p := range parts { // replication "caught up": full ISR
		propose(&metav1.AlterIsrRequest{Topic: "t", Partition: p.GetId(), LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas()})
	}
	// p2 and p3 keep heartbeating; p1 goes silent.
	hbCtx, stopHB := context.WithCancel(context.Background())
	var hbwg sync.WaitGroup
	hbwg.Add(1)
	go func() {
		defer hbwg.Done()
		tk := time.NewTicker(lease / 4)
		defer tk.Stop()
		for hbCtx.Err() == nil {
			for _, id := range []string{"p2", "p3"} {
				for _, n := range c.running() {
					if n.IsLeader() {
						pctx, cancel := context.WithTimeout(hbCtx, time.Second)
						n.Propose(pctx, &metav1.NodeHeartbeatCommand{NodeId: id, Incarnation: 1, NowUnixMs: time.Now().UnixMilli()})
						cancel()
					}
				}
			}
			select {
			case <-hbCtx.Done():
			case <-tk.C:
			}
		}
	}()
	defer func() { stopHB(); hbwg.Wait() }()
	// Halfway through, kill the metad leader: the next leader's controller
	// takes over (after its grace period).
	time.Sleep(lease / 2)
	old := c.leader(5 * time.Second).ID()
	runners[old]()
	c.stop(old)
	deadline = time.Now().Add(10 * time.Second)
	for {
		moved := true
		n := c.leader(5 * time.Second)
		n.FSM().Read(func(st *fsm.State) {
			p1, _ := st.Node("p1")
			tp, _ := st.Topic("t")
			if p1.GetLive() {
				moved = false
			}
			for _, p := range tp.GetPartitions() {
				if p.GetLeader() == "p1" || p.GetLeader() == "" {
					moved = false
				}
			}
		})
		if moved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("partitions led by the expired node did not move")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CheckStorage passes on a running node and fails when the format marker is
// changed under it or the node is shut down (its stores closed).
func TestCheckStorageReportsBrokenStorage(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.leader(5 * time.Second)
	setupCluster(t, n)
	if err := n.CheckStorage(); err != nil {
		t.Fatalf("healthy node: %v", err)
	}
	marker := filepath.Join(c.dirs["m1"], MarkerFile)
	if err := os.WriteFile(marker, []byte("8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.CheckStorage(); err == nil {
		t.Fatal("a changed marker passed the storage check")
	}
	if err := os.WriteFile(marker, []byte("9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.CheckStorage(); err != nil {
		t.Fatalf("restored marker: %v", err)
	}
	c.stop("m1")
	if err := n.CheckStorage(); err == nil {
		t.Fatal("a shut-down node passed the storage check")
	}
}
