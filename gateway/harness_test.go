package gateway

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/fake/coordfake"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/fake/partitionfake"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// cluster is a gateway in front of the shared fakes of metad, partitiond
// ("p1") and coordinatord ("c1").
type cluster struct {
	ca    *pkitest.PKI
	gw    *Role
	meta  *metadfake.Server
	part  *partitionfake.Server
	coord *coordfake.Server
	addr  string // gateway client address
	// stopCleanup makes p1 stop reporting the cleanup of deleted topics,
	// as a partition server that is down.
	stopCleanup func()
}

// clusterOptions shape a test cluster; the zero value is the usual one.
type clusterOptions struct {
	tune func(*Config) // edits the gateway's configuration
	// tracing is shared by the gateway and the fakes, so spans of every hop
	// land in one recorder.
	tracing *telemetry.Tracing
	discard bool // the partitiond keeps no records (benchmarks)
}

func startCluster(t testing.TB, tune func(*Config)) *cluster {
	t.Helper()
	return startClusterWith(t, clusterOptions{tune: tune})
}

// startDialed starts a usual cluster and a client negotiated without
// compression.
func startDialed(t testing.TB) (*cluster, *wiretest.Conn) {
	t.Helper()
	c := startCluster(t, nil)
	return c, wiretest.Negotiate(t, c.addr, wire.CompressionNone)
}

func startClusterWith(t testing.TB, o clusterOptions) *cluster {
	t.Helper()
	ca := pkitest.New(t)
	var tel rpc.Telemetry
	tr := o.tracing
	if tr != nil {
		tel = rpc.Telemetry{TracerProvider: tr.Provider, Propagator: tr.Propagator}
	}
	gatewayOnly := []pki.Role{pki.RoleGateway}
	c := &cluster{ca: ca,
		meta:  metadfake.Start(t, ca, metadfake.Options{Callers: gatewayOnly, Telemetry: tel, DefaultPartitions: 4, DeleteLeavesCleanup: true}),
		part:  partitionfake.Start(t, ca, partitionfake.Options{Callers: gatewayOnly, Telemetry: tel, LongPoll: true, Discard: o.discard}),
		coord: coordfake.Start(t, ca, coordfake.Options{Callers: gatewayOnly, Telemetry: tel}),
	}
	c.stopCleanup = c.meta.On("DeleteTopic", 0, reportCleanup(c.meta))
	c.meta.PutNode(&metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: c.part.Addr, Live: true})
	c.meta.PutNode(&metav1.Node{Id: "c1", Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: c.coord.Addr, Live: true})

	p := node.NewProcess(nil, tr)
	p.HealthAddr = "127.0.0.1:0"
	env, err := p.NewRoleEnv(node.RoleOptions{Role: pki.RoleGateway, NodeID: "g1", TLSFiles: ca.Files(t, pki.RoleGateway, "g1"), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ClientListen = "127.0.0.1:0"
	cfg.MetadAddrs = []string{c.meta.Addr}
	cfg.RequestTimeout = 5 * time.Second
	if o.tune != nil {
		o.tune(&cfg)
	}
	role, err := New(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.gw = role
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() { done <- p.Run(ctx, []node.Service{role}, 5*time.Second, func() { close(started) }) }()
	select {
	case <-started:
	case err := <-done:
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway run: %v", err)
		}
	})
	c.addr = c.gw.ClientAddr()
	// Wait until the cache holds the snapshot and our own registration.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := c.gw.meta.Cache().WaitFor(wctx, func(v *metaclient.View) bool {
		_, ok := v.Node("g1")
		return v.Ready() && (ok || cfg.DiagnosticsOnly) // diagnostics-only: no registration
	}); err != nil {
		t.Fatal("metadata cache never synced:", err)
	}
	return c
}

// reportCleanup plays the partition servers' part of a topic deletion:
// once metad has left the topic DELETING, every pending node reports its
// cleanup at once, as healthy partition servers do.
func reportCleanup(meta *metadfake.Server) fakerpc.Hook {
	return func(ctx context.Context, req proto.Message, next fakerpc.Next) (proto.Message, error) {
		resp, err := next()
		name := req.(*metav1.DeleteTopicRequest).GetName()
		if t, ok := meta.Topic(name); ok && err == nil {
			for _, n := range t.GetCleanupPendingNodes() {
				report := &metav1.ReportCleanupRequest{Topic: name, NodeId: n, LifecycleEpoch: t.GetConfig().GetLifecycleEpoch()}
				if _, err := meta.ReportCleanup(ctx, report); err != nil {
					return nil, err
				}
			}
		}
		return resp, err
	}
}

// member is a group member a client joined through the gateway.
type member struct {
	id         string
	generation uint64
	reply      string // the JOIN_GROUP reply
}

// join joins member name to group over the wire and checks that the reply
// carries the member id and generation the coordinator holds.
func join(t testing.TB, c *cluster, cl *wiretest.Conn, group, name, topic string) member {
	t.Helper()
	reply := cl.OK(fmt.Sprintf("JOIN_GROUP group=%s member=%s topic=%s", group, name, topic))
	r, err := wire.ParseOK(reply)
	if err != nil {
		t.Fatalf("JOIN_GROUP = %q: %v", reply, err)
	}
	m := member{id: r.Value("member"), reply: reply}
	m.generation, err = strconv.ParseUint(r.Value("generation"), 10, 64)
	st, serr := c.coord.GroupStatus(context.Background(), &coordinatorv1.GroupStatusRequest{Group: group})
	if err != nil || serr != nil || st.GetGeneration() != m.generation ||
		!slices.ContainsFunc(st.GetMembers(), func(gm *coordinatorv1.GroupMember) bool { return gm.GetMemberId() == m.id }) {
		t.Fatalf("JOIN_GROUP = %q, coordinator holds %v (%v %v)", reply, st, err, serr)
	}
	return m
}

// with adds the member's id and generation to a command.
func (m member) with(cmd string) string {
	return fmt.Sprintf("%s member=%s generation=%d", cmd, m.id, m.generation)
}

// commitAndLeave commits offsets (a BATCH_COMMIT list) of group on topic
// as a member that then leaves, so the group holds offsets and no members.
func commitAndLeave(t testing.TB, c *cluster, cl *wiretest.Conn, group, topic, offsets string) {
	t.Helper()
	m := join(t, c, cl, group, "m", topic)
	cl.OK(m.with(fmt.Sprintf("BATCH_COMMIT topic=%s group=%s offsets=%s", topic, group, offsets)))
	cl.OK(fmt.Sprintf("LEAVE_GROUP group=%s member=%s", group, m.id))
}
