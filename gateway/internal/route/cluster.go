package route

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/strataio/strata/gateway/internal/produce"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/ring"
	"github.com/strataio/strata/libs/rpc"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// defaultTxnShards applies when the cluster has not announced its shard
// count (spec 4.7 default).
const defaultTxnShards = 50

// Options configure a Cluster.
type Options struct {
	// Meta is the gateway's metad client; its cache is the metadata view.
	Meta *metaclient.Client
	// Dial returns a connection to an internal RPC address (rpc.Pool.Get).
	Dial func(addr string) (rpc.Conn, error)
	// Retries bounds the internal redirects followed per call (at least 1),
	// RetryWait the time spent following them (default 1 s).
	Retries   int
	RetryWait time.Duration
	// Advertised returns the gateway's client address.
	Advertised func() string
	// Stopping reports that the gateway is stopping: no new produce stream
	// is opened then.
	Stopping func() bool
}

// Cluster is the gateway's Router over the metadata cache and the role
// clients. It owns one produce stream per partitiond (Close ends them).
type Cluster struct {
	o Options

	muxMu sync.Mutex
	muxes map[string]*produce.Mux

	ringCache atomic.Pointer[coordRing]
}

// coordRing is the coordinatord ring of one metadata revision.
type coordRing struct {
	revision uint64
	ring     *ring.Ring
}

var _ Router = (*Cluster)(nil)

// New returns a Cluster; it dials nothing until a command needs a role.
func New(o Options) *Cluster {
	o.Retries = max(o.Retries, 1)
	if o.RetryWait <= 0 {
		o.RetryWait = time.Second
	}
	return &Cluster{o: o, muxes: map[string]*produce.Mux{}}
}

// Close ends every produce stream.
func (c *Cluster) Close() {
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	for addr, m := range c.muxes {
		m.Close()
		delete(c.muxes, addr)
	}
}

// Cache implements Router.
func (c *Cluster) Cache() *metaclient.Cache { return c.o.Meta.Cache() }

// Advertised implements Router.
func (c *Cluster) Advertised() string { return c.o.Advertised() }

// Metad implements Router.
func (c *Cluster) Metad(ctx context.Context, fn func(context.Context, metav1.MetadataServiceClient) error) error {
	return c.o.Meta.Call(ctx, fn)
}

// LookupTopic implements Router.
func (c *Cluster) LookupTopic(ctx context.Context, name string) (*metav1.Topic, error) {
	if t, ok := c.Cache().View().Topic(name); ok && Visible(t) {
		return t, nil
	}
	resp, err := c.o.Meta.GetTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	if !Visible(resp.GetTopic()) {
		return nil, errcode.TopicNotFound.New("topic does not exist", "topic", name)
	}
	return resp.GetTopic(), nil
}

// nodeAddr resolves a node id to its internal RPC address.
func (c *Cluster) nodeAddr(id string) (string, error) {
	n, ok := c.Cache().View().Node(id)
	if !ok || n.GetRpcAddress() == "" {
		return "", errcode.LeaderNotFound.New("node is not known to the metadata cache", "node", id)
	}
	return n.GetRpcAddress(), nil
}

// Partition implements Router.
func (c *Cluster) Partition(nodeID string) (partitionv1.PartitionServiceClient, error) {
	addr, err := c.nodeAddr(nodeID)
	if err != nil {
		return nil, err
	}
	cc, err := c.o.Dial(addr)
	if err != nil {
		return nil, err
	}
	return partitionv1.NewPartitionServiceClient(cc), nil
}

// Conn implements Router.
func (c *Cluster) Conn(nodeID string) (grpc.ClientConnInterface, error) {
	addr, err := c.nodeAddr(nodeID)
	if err != nil {
		return nil, err
	}
	return c.o.Dial(addr)
}

// ProduceStream implements Router.
func (c *Cluster) ProduceStream(nodeID string) (*produce.Mux, error) {
	addr, err := c.nodeAddr(nodeID)
	if err != nil {
		return nil, err
	}
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	if m, ok := c.muxes[addr]; ok {
		return m, nil
	}
	if c.o.Stopping() {
		return nil, errcode.RouterNotAvailable.New("gateway is stopping")
	}
	cc, err := c.o.Dial(addr)
	if err != nil {
		return nil, err
	}
	m := produce.New(cc)
	c.muxes[addr] = m
	return m, nil
}

// Reroutable reports whether an internal answer means "ask again after
// refreshing metadata": the request was not applied.
func Reroutable(err error) bool {
	switch errcode.CodeOf(err) {
	case errcode.NotLeader.Name(), errcode.NotPartitionLeader.Name(), errcode.NotCoordinator.Name(),
		errcode.LeaderNotFound.Name(), errcode.StaleLifecycleEpoch.Name(), errcode.LifecycleEpochPending.Name(),
		errcode.RoleUnavailable.Name(), errcode.CoordinatorNotAvailable.Name(), errcode.PartitionLeaderFenced.Name(),
		errcode.StaleLeaderEpoch.Name():
		return true
	}
	return false
}

// Retry implements Router: attempts follow each other on the next metadata
// change or after a backoff (25 ms doubling to 200 ms), for at most
// RetryWait and Retries attempts.
func (c *Cluster) Retry(ctx context.Context, fn func() error) error {
	var err error
	backoff := pace.Backoff{Initial: 25 * time.Millisecond, Max: 200 * time.Millisecond}
	deadline := time.Now().Add(c.o.RetryWait)
	for attempt := 0; attempt < c.o.Retries; attempt++ {
		changed := c.Cache().Changed()
		if err = fn(); err == nil || !Reroutable(err) {
			return err
		}
		wait := min(backoff.Next(), time.Until(deadline))
		if wait <= 0 {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
	return err
}

// PartitionLeader implements Router.
func (c *Cluster) PartitionLeader(ctx context.Context, topic string, part int32) (*metav1.Topic, string, error) {
	t, err := c.LookupTopic(ctx, topic)
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
func (c *Cluster) coordinatorRing() *ring.Ring {
	v := c.Cache().View()
	if cr := c.ringCache.Load(); cr != nil && cr.revision == v.Revision {
		return cr.ring
	}
	r := groups.Ring(v)
	c.ringCache.Store(&coordRing{revision: v.Revision, ring: r})
	return r
}

// GroupCoordinator implements Router: FNV-1a 32(group) picks a
// __consumer_offsets partition, the ring its owner.
func (c *Cluster) GroupCoordinator(group string) (string, error) {
	p := groups.Partition(group, groups.OffsetsPartitions(c.Cache().View(), 0))
	owner := groups.PartitionOwner(c.coordinatorRing(), p)
	if owner == "" {
		return "", errcode.CoordinatorNotAvailable.New("no live coordinatord", "group", group)
	}
	return owner, nil
}

// TxnCoordinator implements Router: FNV-1a 32(id) mod the cluster's
// transaction shards picks the shard, the ring its owner.
func (c *Cluster) TxnCoordinator(txnID string) (string, error) {
	shards := c.Cache().View().TxnShards
	if shards == 0 {
		shards = defaultTxnShards
	}
	owner := c.coordinatorRing().Owner(ring.TxnShardKey(placement.TxnShard(txnID, shards)))
	if owner == "" {
		return "", errcode.CoordinatorNotAvailable.New("no live coordinatord", "transactional_id", txnID)
	}
	return owner, nil
}

// Coordinator implements Router: NOT_COORDINATOR is followed to its
// coordinator_address field, else to the node of coordinator_id.
func (c *Cluster) Coordinator(ctx context.Context, group string, fn func(coordinatorv1.CoordinatorServiceClient) error) error {
	return c.coordinatorCall(ctx, "group", group, c.GroupCoordinator, fn)
}

// TxnCoordinatorCall implements Router, as Coordinator for the transaction
// shard of txnID.
func (c *Cluster) TxnCoordinatorCall(ctx context.Context, txnID string, fn func(coordinatorv1.CoordinatorServiceClient) error) error {
	return c.coordinatorCall(ctx, "transactional_id", txnID, c.TxnCoordinator, fn)
}

func (c *Cluster) coordinatorCall(ctx context.Context, kind, name string, owner func(string) (string, error), fn func(coordinatorv1.CoordinatorServiceClient) error) error {
	redirect := ""
	return c.Retry(ctx, func() error {
		addr := redirect
		redirect = ""
		if addr == "" {
			id, err := owner(name)
			if err != nil {
				return err
			}
			if addr, err = c.nodeAddr(id); err != nil {
				return errcode.CoordinatorNotAvailable.New("coordinator address unknown", kind, name, "node", id)
			}
		}
		cc, err := c.o.Dial(addr)
		if err != nil {
			return err
		}
		err = fn(coordinatorv1.NewCoordinatorServiceClient(cc))
		if e, ok := errcode.As(err); ok && e.Code == errcode.NotCoordinator.Name() {
			if redirect = e.Field("coordinator_address"); redirect == "" {
				if id := e.Field("coordinator_id"); id != "" {
					redirect, _ = c.nodeAddr(id)
				}
			}
		}
		return err
	})
}

// EachCoordinator implements Router.
func (c *Cluster) EachCoordinator(fn func(coordinatorv1.CoordinatorServiceClient) error) error {
	nodes := c.Cache().View().Nodes(metav1.NodeRole_NODE_ROLE_COORDINATORD, true)
	if len(nodes) == 0 {
		return errcode.CoordinatorNotAvailable.New("no live coordinatord")
	}
	for _, n := range nodes {
		cc, err := c.o.Dial(n.GetRpcAddress())
		if err != nil {
			return err
		}
		if err := fn(coordinatorv1.NewCoordinatorServiceClient(cc)); err != nil {
			return err
		}
	}
	return nil
}
