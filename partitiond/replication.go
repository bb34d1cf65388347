package partitiond

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
	"github.com/strataio/strata/partitiond/internal/replica"
)

// Replication wiring: the replica.Manager follows metad's view (applyRoles,
// from the reconciler), serves ReplicaFetch, and gates client requests:
// a partition serves clients only once the manager applied its leadership,
// so a replicated partition never answers with the single-replica HWM it
// opens with.

func (r *Role) newReplication(st *partition.Node) *replica.Manager {
	return replica.New(replica.Config{
		NodeID: r.env.NodeID,
		Node:   st,
		Meta:   r.meta,
		Dial: func(addr string) (partitionv1.PartitionServiceClient, error) {
			cc, err := r.env.Clients.Get(addr)
			if err != nil {
				return nil, err
			}
			return partitionv1.NewPartitionServiceClient(cc), nil
		},
		MaxLag:       r.cfg.ReplicaLagTimeMax,
		FetchMaxWait: r.cfg.ReplicaFetchMaxWait,
		Logger:       r.env.Logger.With("component", "replication"),
		Metrics:      r.replMetrics,
	})
}

// replication returns the running manager or role_unavailable.
func (r *Role) replication() (*replica.Manager, error) {
	if m := r.repl.Load(); m != nil {
		return m, nil
	}
	return nil, errcode.RoleUnavailable.New("partitiond replication is not running", "role", "partitiond")
}

// applyRoles gives every hosted, assigned partition its role from v.
func (r *Role) applyRoles(st *partition.Node, v *metaclient.View, assigned []assignment) {
	m := r.repl.Load()
	if m == nil {
		return
	}
	for _, a := range assigned {
		p, err := st.Partition(a.topic, a.id)
		if err != nil || p.LifecycleEpoch() != a.spec.LifecycleEpoch {
			continue
		}
		t, ps, ok := v.Partition(a.topic, a.id)
		if !ok {
			continue
		}
		addr := ""
		if n, ok := v.Node(ps.GetLeader()); ok && n.GetLive() {
			addr = n.GetRpcAddress()
		}
		rt := route{topic: t}
		m.Apply(replica.Assignment{Part: p, Topic: a.topic, Partition: a.id, LifecycleEpoch: a.spec.LifecycleEpoch,
			LeaderEpoch: ps.GetLeaderEpoch(), Leader: ps.GetLeader(), LeaderAddr: addr,
			Replicas: ps.GetReplicas(), ISR: ps.GetIsr(), MinISR: rt.minISR(r.cfg.MinInSyncReplicas)})
	}
}

// forget drops a partition from replication before it is deleted.
func (r *Role) forget(topic string, id int32) {
	if m := r.repl.Load(); m != nil {
		m.Remove(topic, id)
	}
}

// ReplicaFetch serves a follower's fetch session (replica.Manager.Serve
// checks the caller's identity).
func (s *service) ReplicaFetch(stream partitionv1.PartitionService_ReplicaFetchServer) error {
	m, err := s.r.replication()
	if err != nil {
		return err
	}
	return m.Serve(stream)
}

// replicationCollector exports the leader-side replication state at scrape
// time: per follower the lag in records and in seconds since it was last
// caught up (the spec's cluster_replication_lag_seconds), and replication
// event and byte counters. Replica and ISR counts per partition are metad's
// (strata_cluster_partition_*): one family, from the authoritative state.
type replicationCollector struct{ r *Role }

var (
	descLagRecords = prometheus.NewDesc("strata_replication_lag_records",
		"Records the follower lacks below the leader's durable log end.", []string{"topic", "partition", "broker"}, nil)
	descLagSeconds = prometheus.NewDesc("strata_cluster_replication_lag_seconds",
		"Seconds since the follower was last caught up with the leader (0 when it is).", []string{"topic", "partition", "broker"}, nil)
	descReplEvents = prometheus.NewDesc("strata_replication_events_total",
		"Replication events of this node by kind.", []string{"event"}, nil)
	descAsyncFailures = prometheus.NewDesc("strata_broker_async_replication_failures_total",
		"Failed follower fetches of this node by topic and error class: what keeps a follower from copying records the leader acknowledged.",
		[]string{"topic", "error_class"}, nil)
	descReplBytes = prometheus.NewDesc("strata_replication_bytes_total",
		"Bytes of stored batches replicated, served to followers (served) or received from leaders (fetched).", []string{"direction"}, nil)
)

func (c replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLagRecords, descLagSeconds, descReplEvents, descReplBytes, descAsyncFailures} {
		ch <- d
	}
}

func (c replicationCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.r.repl.Load()
	if m == nil {
		return
	}
	for _, p := range m.Stats() {
		part := itoa(p.Partition)
		for _, f := range p.Followers {
			ch <- prometheus.MustNewConstMetric(descLagRecords, prometheus.GaugeValue, float64(f.LagRecords), p.Topic, part, f.ID)
			ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, f.LagSeconds, p.Topic, part, f.ID)
		}
	}
	rm := c.r.replMetrics
	for _, e := range []struct {
		name string
		v    uint64
	}{
		{"fetch_served", rm.FetchesServed.Load()}, {"fetch_made", rm.FetchesMade.Load()},
		{"fetch_error", rm.FetchErrors.Load()}, {"session_failure", rm.SessionFailures.Load()},
		{"truncation", rm.Truncations.Load()}, {"divergence", rm.Divergences.Load()},
		{"isr_shrink", rm.ISRShrinks.Load()}, {"isr_expand", rm.ISRExpands.Load()},
		{"isr_change_failure", rm.ISRChangeFailures.Load()}, {"replica_id_refused", rm.RefusedReplicaIDs.Load()},
	} {
		ch <- prometheus.MustNewConstMetric(descReplEvents, prometheus.CounterValue, float64(e.v), e.name)
	}
	ch <- prometheus.MustNewConstMetric(descReplBytes, prometheus.CounterValue, float64(rm.BytesServed.Load()), "served")
	ch <- prometheus.MustNewConstMetric(descReplBytes, prometheus.CounterValue, float64(rm.BytesReplicated.Load()), "fetched")
	rm.Failures(func(topic, class string, n uint64) {
		ch <- prometheus.MustNewConstMetric(descAsyncFailures, prometheus.CounterValue, float64(n), topic, class)
	})
}

// controlledShutdown moves this node's partition leaderships to other
// in-sync replicas before the process stops (Kafka's controlled shutdown):
// the lease renewal stops, metad's SHUTDOWN_NODE takes the node out of
// every ISR and elects new leaders in one step, and the node waits (at most
// shutdownLeadershipWait) until its view shows it leads nothing that could
// move. Where no other in-sync replica is live (a single node, RF 1) there
// is nothing to move and metad is not asked: the partitions stay with this
// node and it takes them up again when it restarts.
func (r *Role) controlledShutdown(ctx context.Context) error {
	if r.self == nil || r.stopKeepAlive == nil {
		return nil
	}
	movable := func(v *metaclient.View) int {
		n := 0
		for _, t := range v.Topics() {
			for _, ps := range t.GetPartitions() {
				if ps.GetLeader() != r.env.NodeID {
					continue
				}
				for _, id := range ps.GetIsr() {
					if nd, ok := v.Node(id); ok && id != r.env.NodeID && nd.GetLive() {
						n++
						break
					}
				}
			}
		}
		return n
	}
	v := r.meta.Cache().View()
	if !v.Ready() || movable(v) == 0 {
		return nil
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, shutdownLeadershipWait)
	defer cancel()
	r.stopKeepAlive()
	select {
	case <-r.kaDone:
	case <-wctx.Done():
	}
	resp, err := r.meta.ShutdownNode(wctx, &metav1.ShutdownNodeRequest{NodeId: r.self.GetId(), Incarnation: r.self.GetIncarnation()})
	if err != nil {
		r.env.Logger.Warn("controlled shutdown: metad did not move the leaderships; they move when the lease expires", "err", err)
		return nil
	}
	_, err = r.meta.Cache().WaitFor(wctx, func(v *metaclient.View) bool { return movable(v) == 0 })
	r.env.Logger.Info("controlled shutdown: leaderships moved", "leader_changes", resp.GetLeaderChanges(),
		"took", time.Since(start).Round(time.Millisecond), "complete", err == nil)
	return nil
}

// shutdownLeadershipWait bounds the controlled shutdown.
const shutdownLeadershipWait = 5 * time.Second
