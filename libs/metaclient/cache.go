package metaclient

import (
	"context"
	"errors"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// View is an immutable snapshot of cluster metadata at one revision. Never
// modify a View or the messages it returns; the cache replaces the whole
// View on every change, so readers need no locks.
type View struct {
	Revision    uint64
	topics      map[string]*metav1.Topic
	nodes       map[string]*metav1.Node
	TxnShards   uint32
	hasSnapshot bool
}

// Ready reports whether the view holds a full snapshot from metad.
func (v *View) Ready() bool { return v.hasSnapshot }

// Topic returns a topic by name.
func (v *View) Topic(name string) (*metav1.Topic, bool) {
	t, ok := v.topics[name]
	return t, ok
}

// Topics returns every topic sorted by name.
func (v *View) Topics() []*metav1.Topic {
	out := make([]*metav1.Topic, 0, len(v.topics))
	for _, t := range v.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetConfig().GetName() < out[j].GetConfig().GetName() })
	return out
}

// Node returns a node by id.
func (v *View) Node(id string) (*metav1.Node, bool) {
	n, ok := v.nodes[id]
	return n, ok
}

// Nodes returns the nodes of a role (all roles when role is unspecified),
// sorted by id; liveOnly drops nodes whose lease expired.
func (v *View) Nodes(role metav1.NodeRole, liveOnly bool) []*metav1.Node {
	var out []*metav1.Node
	for _, n := range v.nodes {
		if role != metav1.NodeRole_NODE_ROLE_UNSPECIFIED && n.GetRole() != role {
			continue
		}
		if liveOnly && !n.GetLive() {
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out
}

// Partition returns one partition of a topic.
func (v *View) Partition(topic string, partition int32) (*metav1.Topic, *metav1.PartitionState, bool) {
	t, ok := v.topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.GetPartitions()) {
		return t, nil, false
	}
	p := t.GetPartitions()[partition]
	return t, p, p.GetId() == partition
}

// Cache holds the current View and wakes subscribers on change.
type Cache struct {
	view atomic.Pointer[View]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
}

func newCache() *Cache {
	c := &Cache{changed: make(chan struct{})}
	c.view.Store(&View{topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{}})
	return c
}

// View returns the current view.
func (c *Cache) View() *View { return c.view.Load() }

// Changed returns a channel closed at the next change after the call.
func (c *Cache) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// WaitFor blocks until cond holds for the current view or ctx ends.
func (c *Cache) WaitFor(ctx context.Context, cond func(*View) bool) (*View, error) {
	for {
		ch := c.Changed()
		if v := c.View(); cond(v) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return c.View(), ctx.Err()
		case <-ch:
		}
	}
}

// apply applies one watch event; stale events (at or below the current
// revision, except a first snapshot) are ignored. It reports whether the
// view changed.
func (c *Cache) apply(ev *metav1.WatchResponse) bool {
	cur := c.view.Load()
	if cur.hasSnapshot && ev.GetRevision() <= cur.Revision {
		return false
	}
	var next *View
	switch e := ev.GetEvent().(type) {
	case *metav1.WatchResponse_Snapshot:
		next = &View{topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{}, TxnShards: e.Snapshot.GetTransactionCoordinatorShards(), hasSnapshot: true}
		for _, t := range e.Snapshot.GetTopics() {
			next.topics[t.GetConfig().GetName()] = t
		}
		for _, n := range e.Snapshot.GetNodes() {
			next.nodes[n.GetId()] = n
		}
	default:
		if !cur.hasSnapshot {
			return false // incremental events mean nothing without a base
		}
		next = cur.clone()
		switch e := ev.GetEvent().(type) {
		case *metav1.WatchResponse_TopicUpserted:
			next.topics[e.TopicUpserted.GetConfig().GetName()] = e.TopicUpserted
		case *metav1.WatchResponse_TopicRemoved:
			delete(next.topics, e.TopicRemoved)
		case *metav1.WatchResponse_NodeUpserted:
			next.nodes[e.NodeUpserted.GetId()] = e.NodeUpserted
		case *metav1.WatchResponse_NodeRemoved:
			delete(next.nodes, e.NodeRemoved)
		default:
			return false
		}
	}
	next.Revision = ev.GetRevision()
	c.view.Store(next)
	c.mu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return true
}

func (v *View) clone() *View {
	n := &View{Revision: v.Revision, TxnShards: v.TxnShards, hasSnapshot: v.hasSnapshot,
		topics: make(map[string]*metav1.Topic, len(v.topics)), nodes: make(map[string]*metav1.Node, len(v.nodes))}
	for k, t := range v.topics {
		n.topics[k] = t
	}
	for k, x := range v.nodes {
		n.nodes[k] = x
	}
	return n
}

// Watch keeps the cache current until ctx ends: it streams Watch from the
// leader (any reachable metad), resuming from the last applied revision
// after a disconnect with capped backoff. It returns ctx.Err().
func (c *Client) Watch(ctx context.Context) error {
	backoff := pace.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	for ctx.Err() == nil {
		addr := c.target()
		err := c.watchOnce(ctx, addr)
		if ctx.Err() != nil {
			break
		}
		e := errcode.From(err)
		if e.Code == errcode.NotLeader.Name() && e.Field("leader") != "" {
			c.setLeader(e.Field("leader"))
		} else {
			c.moveOn(addr)
		}
		c.log.Debug("metadata watch interrupted", "addr", addr, "err", err)
		backoff.Wait(ctx)
	}
	return ctx.Err()
}

func (c *Client) watchOnce(ctx context.Context, addr string) error {
	if addr == "" {
		return errcode.ClusterMetadataUnavailable.New("no metad address configured")
	}
	conn, err := c.opts.Dial(addr)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	from := c.cache.View().Revision
	if !c.cache.View().Ready() {
		from = 0
	}
	stream, err := metav1.NewMetadataServiceClient(conn).Watch(wctx, &metav1.WatchRequest{FromRevision: from})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errcode.ClusterMetadataUnavailable.New("watch stream ended")
			}
			return err
		}
		c.cache.apply(ev)
	}
}
