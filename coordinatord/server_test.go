package coordinatord

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/fake/partitionfake"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a fake metad and a fake partitiond on loopback mTLS.
type cluster struct {
	ca   *pkitest.PKI
	meta *metadfake.Server
	part *partitionfake.Server
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{ca: pkitest.New(t)}
	c.part = partitionfake.Start(t, c.ca, partitionfake.Options{})
	c.meta = metadfake.Start(t, c.ca, metadfake.Options{})
	c.meta.PutNode(&metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: c.part.Addr, Live: true})
	return c
}

// putTopic creates or replaces a user topic with n partitions led by the
// partitiond p1, at lifecycle epoch lifecycle.
func (c *cluster) putTopic(name string, n int32, lifecycle uint64) {
	c.meta.PutTopic(metadfake.NewTopic(name, n, lifecycle, "p1", "p1"))
}

// coord is one running coordinatord and a gateway-identity client to it.
type coord struct {
	r      *Role
	env    *node.RoleEnv
	client coordinatorv1.CoordinatorServiceClient
	stop   func()
}

func testConfig(c *cluster) Config {
	cfg := DefaultConfig()
	cfg.MetadAddrs = []string{c.meta.Addr}
	cfg.SessionTimeout = 400 * time.Millisecond
	cfg.ExpiryCheckInterval = 50 * time.Millisecond
	cfg.LagRefreshInterval = 100 * time.Millisecond
	return cfg
}

func startCoord(t testing.TB, c *cluster, id string, cfg Config) *coord {
	t.Helper()
	return startCoordWith(t, c, id, cfg, nil)
}

// startCoordWith is startCoord with setup run on the role before it starts
// (a test replaces its log clients).
func startCoordWith(t testing.TB, c *cluster, id string, cfg Config, setup func(*Role)) *coord {
	t.Helper()
	var log *slog.Logger
	if os.Getenv("COORD_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p := node.NewProcess(log, nil)
	env, err := p.NewRoleEnv(node.RoleOptions{Role: pki.RoleCoordinatord, NodeID: id,
		TLSFiles: c.ca.Files(t, pki.RoleCoordinatord, id), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(r)
	}
	if err := rpc.CheckPolicy(env.GRPC, env.Policy); err != nil {
		t.Fatal(err)
	}
	go env.GRPC.Serve(env.Listener)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn, err := rpc.Dial(env.AdvertiseRPC, rpc.ClientOptions{Source: c.ca.Source(t, pki.RoleGateway, "g1"),
		ServerRoles: []pki.Role{pki.RoleCoordinatord}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	co := &coord{r: r, env: env, client: coordinatorv1.NewCoordinatorServiceClient(conn)}
	co.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Error(err)
		}
		env.GRPC.Stop()
		env.Clients.Close()
	}
	t.Cleanup(co.stop)
	return co
}

// startSingle runs fakes holding topic (partitions partitions) and one
// coordinatord c1 with the test configuration, ready.
func startSingle(t testing.TB, topic string, partitions int32) (*cluster, *coord) {
	t.Helper()
	c := newCluster(t)
	c.putTopic(topic, partitions, 0)
	co := startCoord(t, c, "c1", testConfig(c))
	co.waitReady(t)
	return c, co
}

func (co *coord) waitReady(t testing.TB) {
	t.Helper()
	looptest.Eventually(t, "consumer_metadata ready", func() error { return co.r.checkReady(context.Background()) })
}

func ctxT(t *testing.T) context.Context { return looptest.Context(t, 10*time.Second) }

func code(err error) string {
	if err == nil {
		return ""
	}
	return errcode.From(err).Code
}

func u64(v uint64) *uint64 { return &v }

func TestGroupLifecycleCommitsAndReplayAfterRestart(t *testing.T) {
	c, co := startSingle(t, "orders", 3)
	if c.meta.TopicsCreated() != 2 {
		t.Fatalf("__consumer_offsets and __transaction_state created %d times", c.meta.TopicsCreated())
	}
	if top, _ := c.meta.Topic(groups.OffsetsTopic); top.GetConfig().GetCleanupPolicy() != "compact" || !top.GetConfig().GetInternal() ||
		top.GetConfig().GetPartitions() != groups.DefaultOffsetsPartitions {
		t.Fatalf("offsets topic %v", top.GetConfig())
	}
	ctx := ctxT(t)
	cl := co.client

	// Three members join; assignments end disjoint and complete.
	var members []string
	var gen uint64
	for _, id := range []string{"a", "b", "c"} {
		j, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "g", Member: id, Topic: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(j.GetMember(), id+"-") || len(j.GetMember()) != len(id)+5 {
			t.Fatalf("member id %q", j.GetMember())
		}
		members, gen = append(members, j.GetMember()), j.GetGeneration()
	}
	seen := map[int32]string{}
	owner := map[string]int32{}
	for _, m := range members {
		s, err := cl.SyncGroup(ctx, &coordinatorv1.SyncGroupRequest{Group: "g", Member: m, Generation: gen, Topic: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s.GetAssignments() {
			if o, dup := seen[p]; dup {
				t.Fatalf("partition %d to %s and %s", p, o, m)
			}
			seen[p], owner[m] = m, p
		}
	}
	if len(seen) != 3 {
		t.Fatalf("assignments %v", seen)
	}
	_, err := cl.Heartbeat(ctx, &coordinatorv1.HeartbeatRequest{Group: "g", Member: members[0], Topic: "orders", Generation: u64(gen - 1)})
	if e := errcode.From(err); e.Code != "GEN_MISMATCH" || e.Class != errcode.ClassFencing {
		t.Fatalf("stale heartbeat: %v", err)
	}
	m0, p0 := members[0], owner[members[0]]
	if _, err := cl.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "g", Topic: "orders", Partition: p0, Offset: 42, Member: m0, Generation: u64(gen)}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "g", Topic: "orders", Partition: p0, Offset: 41, Member: m0, Generation: u64(gen)})
	if code(err) != "offset_regression" {
		t.Fatalf("regression: %v", err)
	}
	_, err = cl.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "g", Topic: "orders", Partition: p0, Offset: 50, Member: m0})
	if code(err) != "missing_generation" {
		t.Fatalf("missing generation: %v", err)
	}
	m1, p1 := members[1], owner[members[1]]
	b, err := cl.BatchCommit(ctx, &coordinatorv1.BatchCommitRequest{Group: "g", Topic: "orders", Member: m1, Generation: u64(gen),
		OffsetsList: "P" + itoa(p1) + ":7"})
	if err != nil || b.GetBatched() != 1 {
		t.Fatalf("batch %v %v", b, err)
	}
	_, err = cl.BatchCommit(ctx, &coordinatorv1.BatchCommitRequest{Group: "g", Topic: "orders", Member: m1, Generation: u64(gen),
		OffsetsList: "P" + itoa(p1) + ":8,P" + itoa(p0) + ":9"})
	if code(err) != "NOT_OWNER" {
		t.Fatalf("foreign partition in batch: %v", err)
	}
	st, err := cl.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "g"})
	if err != nil || st.GetState() != "Stable" || st.GetMemberCount() != 3 || st.GetPartitionCount() != 3 || st.GetTopicName() != "orders" ||
		st.GetGeneration() != gen || st.GetLastRebalanceUnixMs() == 0 || len(st.GetMembers()) != 3 || st.GetMembers()[0].GetLastHeartbeatUnixMs() == 0 {
		t.Fatalf("status %v %v", st, err)
	}
	act, err := cl.TopicActivity(ctx, &coordinatorv1.TopicActivityRequest{Topic: "orders"})
	if err != nil || !act.GetActiveMembers() || len(act.GetGroups()) != 1 {
		t.Fatalf("activity %v %v", act, err)
	}
	if _, err := cl.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: "g"}); code(err) != "group_not_empty" {
		t.Fatalf("delete of an active group: %v", err)
	}
	fo, err := cl.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "g", Topic: "orders", Partition: 2 - p0%3})
	if err != nil || (fo.GetOffset() != 0 && 2-p0%3 != p1) {
		t.Fatalf("uncommitted partition: %v %v", fo, err)
	}

	// Session expiry: only members[2] keeps heartbeating and takes over.
	looptest.Eventually(t, "expiry of silent members", func() error {
		hb, err := cl.Heartbeat(ctx, &coordinatorv1.HeartbeatRequest{Group: "g", Member: members[2], Topic: "orders"})
		if err != nil {
			return err
		}
		s, err := cl.SyncGroup(ctx, &coordinatorv1.SyncGroupRequest{Group: "g", Member: members[2], Generation: hb.GetGeneration(), Topic: "orders"})
		if err != nil {
			return err
		}
		if len(s.GetAssignments()) != 3 {
			return errcode.Internal.New("not yet")
		}
		return nil
	})
	_, err = cl.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "g", Topic: "orders", Partition: p0, Offset: 60, Member: m0, Generation: u64(gen)})
	if code(err) != "member_not_found" {
		t.Fatalf("expired member commit: %v", err)
	}

	// Restart: offsets and the registration come back from the log.
	co.stop()
	co2 := startCoord(t, c, "c1", testConfig(c))
	co2.waitReady(t)
	if os.Getenv("COORD_TEST_LOG") != "" {
		st, err := co2.client.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "g"})
		t.Logf("status after restart: %v %v", st, err)
	}
	for p, want := range map[int32]uint64{p0: 42, p1: 7} {
		fo, err := co2.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "g", Topic: "orders", Partition: p})
		if err != nil || fo.GetOffset() != want || !fo.GetFound() {
			t.Fatalf("after restart P%d = %v %v, want %d", p, fo, err, want)
		}
	}
	st, err = co2.client.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "g"})
	if err != nil || st.GetState() != "Empty" || st.GetPartitionCount() != 3 {
		t.Fatalf("status after restart %v %v", st, err)
	}
	if _, err := co2.client.Heartbeat(ctx, &coordinatorv1.HeartbeatRequest{Group: "g", Member: members[2], Topic: "orders"}); code(err) != "member_not_found" {
		t.Fatalf("members are soft state: %v", err)
	}
	co2.r.mu.Lock()
	restored := co2.r.stats
	co2.r.mu.Unlock()
	if restored.groups != 1 || restored.offsets != 2 {
		t.Fatalf("recovery stats %+v", restored)
	}
	if _, err := co2.client.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if _, err := co2.client.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "g"}); code(err) != "group_not_found" {
		t.Fatalf("deleted group: %v", err)
	}
}

func TestCorruptRecordKeepsReadinessFalse(t *testing.T) {
	c := newCluster(t)
	co := startCoord(t, c, "c1", testConfig(c))
	co.waitReady(t)
	co.stop()
	p := groups.Partition("victim", groups.DefaultOffsetsPartitions)
	c.part.Inject(groups.OffsetsTopic, p, `group/"victim"`, []byte(`{"type":"group","group":"victim"}`))
	co2 := startCoord(t, c, "c1", testConfig(c))
	looptest.Eventually(t, "corrupt partition detected", func() error {
		co2.r.mu.Lock()
		defer co2.r.mu.Unlock()
		if co2.r.stats.corrupt == 0 {
			return errcode.Internal.New("not yet")
		}
		return nil
	})
	err := co2.r.checkReady(context.Background())
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("readiness must stay false: %v", err)
	}
	_, err = co2.client.GroupStatus(ctxT(t), &coordinatorv1.GroupStatusRequest{Group: "victim"})
	if e := errcode.From(err); e.Code != errcode.CoordinatorNotAvailable.Name() || e.Field("reason") != "corrupt" {
		t.Fatalf("group on a corrupt partition: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if co2.r.checkReady(context.Background()) == nil {
		t.Fatal("readiness must never fall back to an empty state")
	}
}

func TestNotCoordinatorNamesTheOwner(t *testing.T) {
	c := newCluster(t)
	co := startCoord(t, c, "c1", testConfig(c))
	co.waitReady(t)
	// A second live coordinator takes part of the ring.
	if _, err := c.meta.RegisterNode(context.Background(), &metav1.RegisterNodeRequest{Node: &metav1.Node{Id: "c2",
		Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: "127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	var foreign string
	looptest.Eventually(t, "ring change", func() error {
		v := co.r.meta.Cache().View()
		for i := range 200 {
			name := "grp-" + itoa(int32(i))
			if n, _, ok := groups.Coordinator(v, name, 0); ok && n.GetId() == "c2" {
				foreign = name
				return nil
			}
		}
		return errcode.Internal.New("c2 owns nothing yet")
	})
	_, err := co.client.JoinGroup(ctxT(t), &coordinatorv1.JoinGroupRequest{Group: foreign, Member: "m", Topic: "t"})
	e := errcode.From(err)
	if e.Code != "NOT_COORDINATOR" || e.Field("coordinator_id") != "c2" || e.Field("coordinator_address") != "127.0.0.1:1" || !e.Retryable {
		t.Fatalf("want NOT_COORDINATOR naming c2: %v", err)
	}
	// c1 released what it no longer owns and is still ready for the rest.
	co.waitReady(t)
	co.r.mu.Lock()
	n := len(co.r.shards)
	co.r.mu.Unlock()
	if n == 0 || n == groups.DefaultOffsetsPartitions {
		t.Fatalf("c1 serves %d partitions after the ring change", n)
	}
}

// TestOffsetsTopicWaitsForPartitionServers: on a fresh cluster the
// coordinator creates __consumer_offsets only once enough partition servers
// are live to place it, and says so in its readiness meanwhile.
func TestOffsetsTopicWaitsForPartitionServers(t *testing.T) {
	c := newCluster(t)
	c.meta.SetLive("p1", false)
	co := startCoord(t, c, "c1", testConfig(c))
	looptest.Eventually(t, "metadata synced", func() error {
		if !co.r.meta.Cache().View().Ready() {
			return errcode.ClusterMetadataUnavailable.New("not yet")
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	if n := c.meta.TopicsCreated(); n != 0 {
		t.Fatalf("__consumer_offsets created %d times with no live partition server", n)
	}
	if e := errcode.From(co.r.checkReady(context.Background())); e.Field("live_partitiond") != "0" {
		t.Fatalf("readiness while waiting: %v", e)
	}
	c.meta.SetLive("p1", true)
	co.waitReady(t)
	if n := c.meta.TopicsCreated(); n != 2 {
		t.Fatalf("__consumer_offsets and __transaction_state created %d times", n)
	}
}
