package server

import (
	"context"
	"strconv"
	"time"

	"github.com/strataio/strata/gateway/internal/produce"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/ring"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// nodeAddr resolves a node id to its internal RPC address.
func (g *Role) nodeAddr(id string) (string, error) {
	n, ok := g.meta.Cache().View().Node(id)
	if !ok || n.GetRpcAddress() == "" {
		return "", errcode.LeaderNotFound.New("node is not known to the metadata cache", "node", id)
	}
	return n.GetRpcAddress(), nil
}

func (g *Role) partitionClient(nodeID string) (partitionv1.PartitionServiceClient, error) {
	addr, err := g.nodeAddr(nodeID)
	if err != nil {
		return nil, err
	}
	cc, err := g.env.Clients.Get(addr)
	if err != nil {
		return nil, err
	}
	return partitionv1.NewPartitionServiceClient(cc), nil
}

// mux returns the produce stream to a partitiond node.
func (g *Role) mux(nodeID string) (*produce.Mux, error) {
	addr, err := g.nodeAddr(nodeID)
	if err != nil {
		return nil, err
	}
	g.muxMu.Lock()
	defer g.muxMu.Unlock()
	if m, ok := g.muxes[addr]; ok {
		return m, nil
	}
	if g.ctx.Err() != nil {
		return nil, errcode.RouterNotAvailable.New("gateway is stopping")
	}
	cc, err := g.env.Clients.Get(addr)
	if err != nil {
		return nil, err
	}
	m := produce.New(cc)
	g.muxes[addr] = m
	return m, nil
}

// reroutable reports whether an internal answer means "ask again after
// refreshing metadata": the request was not applied.
func reroutable(err error) bool {
	switch errcode.CodeOf(err) {
	case errcode.NotLeader.Name(), errcode.NotPartitionLeader.Name(), errcode.NotCoordinator.Name(),
		errcode.LeaderNotFound.Name(), errcode.StaleLifecycleEpoch.Name(), errcode.LifecycleEpochPending.Name(),
		errcode.RoleUnavailable.Name(), errcode.CoordinatorNotAvailable.Name(), errcode.PartitionLeaderFenced.Name(),
		errcode.StaleLeaderEpoch.Name():
		return true
	}
	return false
}

// retryRoute runs fn until it succeeds, fails with an error that is not
// reroutable, or RouteRetries attempts were made. Between attempts it waits
// for the next metadata change (bounded by a short backoff), so a leader move
// is picked up as soon as metad announces it.
func (g *Role) retryRoute(ctx context.Context, fn func() error) error {
	var err error
	backoff := 25 * time.Millisecond
	for attempt := 0; attempt < g.cfg.RouteRetries; attempt++ {
		changed := g.meta.Cache().Changed()
		if err = fn(); err == nil || !reroutable(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-changed:
			t.Stop()
		case <-t.C:
		}
		backoff = min(backoff*2, 400*time.Millisecond)
	}
	return err
}

// partitionLeader returns the topic and the leader node id of one partition.
func (g *Role) partitionLeader(ctx context.Context, topic string, part int32) (*metav1.Topic, string, error) {
	t, err := g.lookupTopic(ctx, topic)
	if err != nil {
		return nil, "", err
	}
	if part < 0 || int(part) >= len(t.GetPartitions()) {
		return t, "", errcode.PartitionNotFound.New("partition does not exist", "topic", topic, "partition", strconv.Itoa(int(part)))
	}
	leader := t.GetPartitions()[part].GetLeader()
	if leader == "" {
		return t, "", errcode.LeaderNotFound.New("partition has no leader", "topic", topic, "partition", strconv.Itoa(int(part)))
	}
	return t, leader, nil
}

// coordinatorRing is the ring of live coordinatord nodes of the current
// view (libs/groups, the function coordinatord itself uses), rebuilt only
// when the metadata revision changes.
func (g *Role) coordinatorRing() *ring.Ring {
	v := g.meta.Cache().View()
	if cr := g.ringCache.Load(); cr != nil && cr.revision == v.Revision {
		return cr.ring
	}
	r := groups.Ring(v)
	g.ringCache.Store(&coordRing{revision: v.Revision, ring: r})
	return r
}

// groupCoordinator returns the coordinatord node id that owns group:
// FNV-1a 32(group) picks a __consumer_offsets partition, the ring its owner.
func (g *Role) groupCoordinator(group string) (string, error) {
	p := groups.Partition(group, groups.OffsetsPartitions(g.meta.Cache().View(), 0))
	owner := groups.PartitionOwner(g.coordinatorRing(), p)
	if owner == "" {
		return "", errcode.CoordinatorNotAvailable.New("no live coordinatord", "group", group)
	}
	return owner, nil
}

// callCoordinator runs fn against the coordinatord owning group, following
// NOT_COORDINATOR answers (fields coordinator_address, else coordinator_id)
// and ring changes.
func (g *Role) callCoordinator(ctx context.Context, group string, fn func(coordinatorv1.CoordinatorServiceClient) error) error {
	redirect := ""
	return g.retryRoute(ctx, func() error {
		addr := redirect
		redirect = ""
		if addr == "" {
			id, err := g.groupCoordinator(group)
			if err != nil {
				return err
			}
			if addr, err = g.nodeAddr(id); err != nil {
				return errcode.CoordinatorNotAvailable.New("coordinator address unknown", "group", group, "node", id)
			}
		}
		cc, err := g.env.Clients.Get(addr)
		if err != nil {
			return err
		}
		err = fn(coordinatorv1.NewCoordinatorServiceClient(cc))
		if e, ok := errcode.As(err); ok && e.Code == errcode.NotCoordinator.Name() {
			if redirect = e.Field("coordinator_address"); redirect == "" {
				if id := e.Field("coordinator_id"); id != "" {
					redirect, _ = g.nodeAddr(id)
				}
			}
		}
		return err
	})
}
