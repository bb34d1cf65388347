package blackbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
)

// clusterStatusAndList: CLUSTER_STATUS reports the HWMs LIST_OFFSETS does
// (it reported metad's lagging checkpoint, 0 for a topic just written while
// DESCRIBE showed 1-2), leaves the internal topics out unless internal=true
// (its JSON listed every __consumer_offsets partition), and `strata cluster
// status` prints a summary that fits one screen (it printed ~300 lines of
// JSON). LIST_CLUSTER lists the nodes of every role with their liveness.
func clusterStatusAndList(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 60*time.Second)
	gw := c.Gateways()[0].ClientAddr
	const topic = "cs-hwm"
	framework.OK(t, ctx, cl, "CREATE topic="+topic+" partitions=3")
	for p := range int32(3) {
		for i := int32(0); i <= p; i++ {
			framework.Retry(t, ctx, func() error {
				_, err := cl.Publish(ctx, client.PublishRequest{Topic: topic, Partition: p, Acks: "all", ProducerID: "cs", Message: "m"})
				return err
			})
		}
	}

	// HWMs: the leaders' values, equal to LIST_OFFSETS (nothing is written
	// meanwhile; the wait covers a leader that just moved). At least what
	// was written here: an external deployment may hold an earlier run's.
	framework.Eventually(t, 10*time.Second, "CLUSTER_STATUS HWMs equal LIST_OFFSETS", func() (bool, string) {
		raw, err := cl.ClusterStatus(ctx)
		if err != nil {
			return false, err.Error()
		}
		st, err := client.DecodeClusterStatus(raw)
		if err != nil {
			return false, err.Error()
		}
		offs, err := cl.ListOffsets(ctx, topic, -1)
		if err != nil {
			return false, err.Error()
		}
		seen := 0
		for _, p := range st.Partitions {
			if p.Internal || strings.HasPrefix(p.Topic, "__") {
				t.Fatalf("internal partition %+v without internal=true", p)
			}
			if p.Topic != topic {
				continue
			}
			seen++
			if int(p.Partition) >= len(offs) || p.HWM != offs[p.Partition].HWM || p.HWMSource != "leader" || p.HWM < uint64(p.Partition)+1 {
				return false, fmt.Sprintf("partition %+v, LIST_OFFSETS %+v", p, offs)
			}
		}
		return seen == 3, fmt.Sprintf("%d partitions of %s", seen, topic)
	})

	raw, err := cl.ClusterStatusWith(ctx, client.ClusterStatusOptions{Internal: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := client.DecodeClusterStatus(raw)
	if err != nil {
		t.Fatal(err)
	}
	internal := 0
	for _, p := range st.Partitions {
		if p.Topic == "__consumer_offsets" && p.Internal {
			internal++
		}
	}
	if internal == 0 || !st.InternalShown || st.Topics.Internal == 0 || st.Topics.Application == 0 {
		t.Fatalf("internal=true: %d __consumer_offsets partitions, topics %+v", internal, st.Topics)
	}

	// The CLI's summary: one screen, roles, Raft, no internal partitions.
	code, out, errs := strataCLI(ctx, gw, "cluster", "status")
	if code != 0 {
		t.Fatalf("strata cluster status: exit %d: %s", code, errs)
	}
	t.Logf("strata cluster status:\n%s", out)
	if lines := strings.Count(out, "\n"); lines > 24 {
		t.Fatalf("strata cluster status prints %d lines:\n%s", lines, out)
	}
	for _, want := range []string{"raft:        leader ", "partitiond", "coordinatord", "gateway", "internal partitions hidden", "0 leaderless"} {
		if !strings.Contains(out, want) {
			t.Fatalf("strata cluster status lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = strataCLI(ctx, gw, "cluster", "status", "--output", "json")
	var doc map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc["raft_leader"] == nil {
		t.Fatalf("strata cluster status --output json: exit %d: %s\n%s", code, errs, out)
	}

	// LIST_CLUSTER: the roles behind the gateway, live, with addresses.
	nodes, err := cl.ListCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]int{}
	for _, n := range nodes {
		if n.Live {
			live[n.Role]++
		}
		if n.RPCAddress == "" || (n.Role == "gateway" && n.ClientAddress == "") {
			t.Fatalf("node without addresses: %+v", n)
		}
	}
	for _, r := range []string{"partitiond", "coordinatord", "gateway"} {
		if live[r] == 0 {
			t.Fatalf("LIST_CLUSTER has no live %s: %+v", r, nodes)
		}
	}
	code, out, errs = strataCLI(ctx, gw, "cluster", "list")
	if code != 0 || !strings.Contains(out, "ROLE") || !strings.Contains(out, "partitiond") {
		t.Fatalf("strata cluster list: exit %d: %s\n%s", code, errs, out)
	}
}
