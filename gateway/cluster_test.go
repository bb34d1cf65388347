package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

type clusterDoc struct {
	Brokers struct {
		Active, Inactive []struct{ ID, Role string }
	}
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Internal  bool   `json:"internal"`
		HWM       uint64 `json:"hwm"`
		HWMSource string `json:"hwm_source"`
	} `json:"partitions"`
	Topics struct {
		Application int `json:"application"`
		Internal    int `json:"internal"`
	} `json:"topics"`
	InternalShown bool `json:"internal_shown"`
}

func clusterStatus(t *testing.T, cl *wiretest.Conn, cmd string) clusterDoc {
	t.Helper()
	s := cl.OK(cmd)
	raw, ok := strings.CutPrefix(s, "OK cluster=")
	var d clusterDoc
	if !ok || json.Unmarshal([]byte(raw), &d) != nil {
		t.Fatalf("%s = %q", cmd, s)
	}
	return d
}

// TestClusterStatusHWMAndInternalTopics: CLUSTER_STATUS reports each
// partition's HWM as its leader does (LIST_OFFSETS' value; it reported
// metad's lagging committed_hwm checkpoint before), says where the value
// came from, and lists internal topics' partitions only with internal=true
// (it listed every __consumer_offsets partition).
func TestClusterStatusHWMAndInternalTopics(t *testing.T) {
	c, cl := startDialed(t)
	cl.OK("CREATE topic=orders partitions=2")
	if _, err := c.meta.CreateTopic(context.Background(), &metav1.CreateTopicRequest{Name: "__consumer_offsets", Internal: true, Partitions: ptrTo[int32](3)}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		cl.OK("PUBLISH topic=orders partition=1 producerId=p acks=all message=m")
	}
	lo := cl.OK("LIST_OFFSETS topic=orders partition=1")
	if !strings.HasSuffix(lo, ":hwm=3") {
		t.Fatalf("LIST_OFFSETS = %q", lo)
	}

	d := clusterStatus(t, cl, "CLUSTER_STATUS")
	if len(d.Partitions) != 2 || d.InternalShown || d.Topics.Application != 1 || d.Topics.Internal != 1 {
		t.Fatalf("CLUSTER_STATUS %+v", d)
	}
	for _, p := range d.Partitions {
		want := uint64(0)
		if p.Partition == 1 {
			want = 3
		}
		if p.Topic != "orders" || p.HWM != want || p.HWMSource != "leader" {
			t.Fatalf("partition %+v, want hwm %d from the leader", p, want)
		}
	}

	d = clusterStatus(t, cl, "CLUSTER_STATUS internal=true")
	internal := 0
	for _, p := range d.Partitions {
		if p.Internal {
			internal++
		}
	}
	if len(d.Partitions) != 5 || internal != 3 || !d.InternalShown {
		t.Fatalf("CLUSTER_STATUS internal=true %+v", d)
	}
	cl.FailWith("CLUSTER_STATUS internal=perhaps", "invalid_parameter")
}

// TestClusterStatusHWMFallsBackToCheckpoint: a partition whose leader is
// not reachable keeps metad's checkpoint, marked as such.
func TestClusterStatusHWMFallsBackToCheckpoint(t *testing.T) {
	c, cl := startDialed(t)
	c.meta.PutTopic(&metav1.Topic{
		Config:     &metav1.TopicConfig{Name: "gone", Revision: 1, Partitions: 1, ReplicationFactor: 1, State: metav1.TopicState_TOPIC_STATE_ACTIVE},
		Partitions: []*metav1.PartitionState{{Id: 0, Leader: "p-missing", Replicas: []string{"p-missing"}, Isr: []string{"p-missing"}, CommittedHwm: 7}},
	})
	d := clusterStatus(t, cl, "CLUSTER_STATUS")
	if len(d.Partitions) != 1 || d.Partitions[0].HWM != 7 || d.Partitions[0].HWMSource != "checkpoint" {
		t.Fatalf("CLUSTER_STATUS %+v", d)
	}
}

// TestListCluster: LIST_CLUSTER lists every node with role, addresses and
// liveness, under both command tables (id 7 in each).
func TestListCluster(t *testing.T) {
	c, cl := startDialed(t)
	c.meta.PutNode(&metav1.Node{Id: "p2", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1", Live: false})
	type broker struct {
		ID            string `json:"id"`
		Role          string `json:"role"`
		RPCAddress    string `json:"rpc_address"`
		ClientAddress string `json:"client_address"`
		Live          bool   `json:"live"`
	}
	check := func(name string, s string) {
		t.Helper()
		r, err := wire.ParseOK(s)
		var list []broker
		if err != nil || json.Unmarshal([]byte(r.Value("brokers")), &list) != nil {
			t.Fatalf("%s LIST_CLUSTER = %q (%v)", name, s, err)
		}
		byID := map[string]broker{}
		for _, b := range list {
			byID[b.ID] = b
		}
		if r.Value("count") != "4" || len(list) != 4 {
			t.Fatalf("%s LIST_CLUSTER = %q", name, s)
		}
		if b := byID["p1"]; b.Role != "partitiond" || !b.Live || b.RPCAddress != c.part.Addr {
			t.Fatalf("%s p1 %+v", name, b)
		}
		if b := byID["p2"]; b.Live {
			t.Fatalf("%s p2 %+v", name, b)
		}
		if b := byID["g1"]; b.Role != "gateway" || b.ClientAddress != c.addr || !b.Live {
			t.Fatalf("%s g1 %+v", name, b)
		}
	}
	check("table A", cl.OK("LIST_CLUSTER"))

	cb := wiretest.NegotiateTable(t, c.addr, wire.TableB, wire.CompressionGzip, wire.CompressionNone)
	id := cb.SendText("LIST_CLUSTER")
	f := cb.MustRead()
	if f.Header.Command != 7 || f.Header.RequestID != id || f.Header.Status != wire.StatusOK {
		t.Fatalf("table B LIST_CLUSTER reply %+v %q", f.Header, f.Payload)
	}
	check("table B", string(f.Payload))
}
func ptrTo[T any](v T) *T { return &v }
