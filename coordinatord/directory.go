package coordinatord

import (
	"context"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// peerLookupTimeout bounds the whole peer fan-out of one scrape, so a hung
// peer delays a scrape by at most this much.
const peerLookupTimeout = time.Second

// directory tells which groups the other live coordinatords own, so that
// every coordinatord emits coordinator_up (0 or 1) for every group of the
// cluster (spec 6).
//
// It asks at scrape time, not from a background loop: group series are a
// point-in-time snapshot, so a group deleted or moved on its owner must
// change at the next scrape rather than one poll period later, and nothing
// is asked while nobody scrapes. Concurrent scrapes each ask (no reuse
// window): scrapes are seconds apart and the fan-out is one small RPC per
// peer.
type directory struct {
	r *Role
	// timeout is peerLookupTimeout; tests shorten it.
	timeout time.Duration

	mu sync.Mutex
	// last holds each live peer's last successful answer, by node id.
	last map[string][]*coordinatorv1.GroupSummary
}

// groupTopic is one (group, topic) series key.
type groupTopic struct{ group, topic string }

func newDirectory(r *Role) *directory {
	return &directory{r: r, timeout: peerLookupTimeout, last: map[string][]*coordinatorv1.GroupSummary{}}
}

// remoteGroups asks every other live coordinatord for its groups in
// parallel, within d.timeout, and returns the (group, topic) pairs they
// own. A peer that fails keeps counting with its last answer, and every
// (group, topic) of that answer counts one coordinator_lookup observation
// failure; a peer that never answered contributes nothing (no series is
// invented). Peers no longer live are forgotten.
func (d *directory) remoteGroups() map[groupTopic]bool {
	r := d.r
	var peers []*metav1.Node
	for _, n := range r.meta.Cache().View().Nodes(metav1.NodeRole_NODE_ROLE_COORDINATORD, true) {
		if n.GetId() != r.env.NodeID {
			peers = append(peers, n)
		}
	}
	type answer struct {
		groups []*coordinatorv1.GroupSummary
		err    error
	}
	answers := make([]answer, len(peers))
	if len(peers) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
		var wg sync.WaitGroup
		for i, n := range peers {
			wg.Go(func() {
				answers[i].groups, answers[i].err = r.listGroups(ctx, n.GetRpcAddress())
			})
		}
		wg.Wait()
		cancel()
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	live := make(map[string]bool, len(peers))
	out := map[groupTopic]bool{}
	for i, n := range peers {
		id, a := n.GetId(), answers[i]
		live[id] = true
		if a.err == nil {
			d.last[id] = a.groups
		} else {
			r.env.Logger.Warn("group lookup on a peer coordinatord failed", "peer", id, "addr", n.GetRpcAddress(),
				"known_groups", len(d.last[id]), "err", a.err)
			for _, g := range d.last[id] {
				for _, t := range g.GetTopics() {
					r.m.observationFailures.WithLabelValues(t, g.GetGroup(), "coordinator_lookup").Inc()
				}
			}
		}
		for _, g := range d.last[id] {
			for _, t := range g.GetTopics() {
				out[groupTopic{g.GetGroup(), t}] = true
			}
		}
	}
	for id := range d.last {
		if !live[id] {
			delete(d.last, id)
		}
	}
	return out
}

// listGroups asks the coordinatord at addr for the groups it owns.
func (r *Role) listGroups(ctx context.Context, addr string) ([]*coordinatorv1.GroupSummary, error) {
	if addr == "" {
		return nil, errcode.CoordinatorNotAvailable.New("peer coordinatord has no RPC address")
	}
	conn, err := r.env.Clients.Get(addr)
	if err != nil {
		return nil, err
	}
	resp, err := coordinatorv1.NewCoordinatorServiceClient(conn).ListGroups(ctx, &coordinatorv1.ListGroupsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.GetGroups(), nil
}
