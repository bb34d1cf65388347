package metad

import (
	"strconv"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/metad/internal/fsm"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// clusterCollector exports the spec's cluster gauges (section 6, svc_ ->
// strata_) from this metad's replicated state at scrape time, so series of
// deleted topics and former leaders disappear with them. It copies the
// topic and node pointers under the FSM's read lock (committed objects are
// immutable) and builds the samples after releasing it, so a scrape never
// holds up apply for longer than a map walk.
//
// Every metad exports its own view: the leader's is current, a follower's
// lags by at most its apply backlog. Dashboards take max() over the metads
// or filter on strata_cluster_is_leader == 1. metad is the only role that
// exports strata_cluster_* (the gateway and the other roles export none), so
// the all-in-one's shared registry holds each name once.
type clusterCollector struct {
	s *Role

	hasLeader, isLeader, brokers, nodes    *prometheus.Desc
	offline, underReplicated               *prometheus.Desc
	replicas, inSync, leaderEpoch, leaders *prometheus.Desc
}

func newClusterCollector(s *Role) *clusterCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &clusterCollector{
		s:               s,
		hasLeader:       d("strata_cluster_has_leader", "1 when this metad knows a Raft leader of the metadata cluster."),
		isLeader:        d("strata_cluster_is_leader", "1 when this metad is the Raft leader of the metadata cluster."),
		brokers:         d("strata_cluster_brokers", "Partition servers (brokers) registered in the replicated metadata, live or expired."),
		nodes:           d("strata_metad_nodes", "Registered nodes in the replicated metadata by role and liveness.", "role", "live"),
		offline:         d("strata_cluster_offline_partitions", "Partitions of active topics with no leader assignment."),
		underReplicated: d("strata_cluster_under_replicated_partitions", "Partitions of active topics whose ISR is smaller than the replica set."),
		replicas:        d("strata_cluster_partition_replicas", "Replica count of a partition.", "topic", "partition"),
		inSync:          d("strata_cluster_partition_in_sync_replicas", "In-sync replica count of a partition.", "topic", "partition"),
		leaderEpoch:     d("strata_cluster_partition_leader_epoch", "Leader epoch of a partition.", "topic", "partition"),
		leaders:         d("strata_cluster_partition_leader", "1 for the partition's current leader (no series while offline).", "topic", "partition", "broker_id"),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hasLeader, c.isLeader, c.brokers, c.nodes, c.offline, c.underReplicated,
		c.replicas, c.inSync, c.leaderEpoch, c.leaders} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	n := c.s.node.Load()
	if n == nil {
		// Not started: no leader known, and no state worth reporting yet.
		gauge(c.hasLeader, 0)
		gauge(c.isLeader, 0)
		return
	}
	r := n.Raft()
	_, leaderID := r.LeaderWithID()
	gauge(c.hasLeader, b2f(leaderID != ""))
	gauge(c.isLeader, b2f(r.State() == raft.Leader))
	c.collectState(ch, n.FSM())
}

// collectState emits the gauges computed from the replicated state.
func (c *clusterCollector) collectState(ch chan<- prometheus.Metric, f *fsm.FSM) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var topics []*metav1.Topic
	var nodes []*metav1.Node
	f.Read(func(st *fsm.State) {
		topics = st.Topics()
		nodes = st.Nodes(metav1.NodeRole_NODE_ROLE_UNSPECIFIED, false)
	})

	type roleLive struct {
		role metav1.NodeRole
		live bool
	}
	counts := map[roleLive]int{}
	brokers := 0
	for _, nd := range nodes {
		counts[roleLive{nd.GetRole(), nd.GetLive()}]++
		if nd.GetRole() == metav1.NodeRole_NODE_ROLE_PARTITIOND {
			brokers++
		}
	}
	gauge(c.brokers, float64(brokers))
	for k, v := range counts {
		gauge(c.nodes, float64(v), roleLabel(k.role), strconv.FormatBool(k.live))
	}

	offline, under := 0, 0
	for _, t := range topics {
		if !fsm.Live(t) {
			continue // DELETING topics no longer exist for clients
		}
		name := t.GetConfig().GetName()
		for _, p := range t.GetPartitions() {
			pid := strconv.Itoa(int(p.GetId()))
			gauge(c.replicas, float64(len(p.GetReplicas())), name, pid)
			gauge(c.inSync, float64(len(p.GetIsr())), name, pid)
			gauge(c.leaderEpoch, float64(p.GetLeaderEpoch()), name, pid)
			if l := p.GetLeader(); l != "" {
				gauge(c.leaders, 1, name, pid, l)
			} else {
				offline++
			}
			if len(p.GetIsr()) < len(p.GetReplicas()) {
				under++
			}
		}
	}
	gauge(c.offline, float64(offline))
	gauge(c.underReplicated, float64(under))
}

// roleLabel is the short role name (partitiond, ...) of a node role.
func roleLabel(r metav1.NodeRole) string {
	switch r {
	case metav1.NodeRole_NODE_ROLE_METAD:
		return "metad"
	case metav1.NodeRole_NODE_ROLE_PARTITIOND:
		return "partitiond"
	case metav1.NodeRole_NODE_ROLE_COORDINATORD:
		return "coordinatord"
	case metav1.NodeRole_NODE_ROLE_GATEWAY:
		return "gateway"
	}
	return "unknown"
}
