// Package coordinatord is the coordinatord role: consumer groups and committed
// offsets (spec 2.3, 3.3, 4.5) served as CoordinatorService.
//
// Each group belongs to one __consumer_offsets partition and each partition
// to the live coordinatord that owns its ring key (libs/groups). This node
// takes over the partitions it owns (fencing the previous owner with a
// higher producer epoch, then replaying the partition) and releases those it
// no longer owns; requests for groups it does not own answer NOT_COORDINATOR
// with the owner. docs/coordinatord.md describes the design.
package coordinatord

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/coordinatord/internal/offsetlog"
	"github.com/strataio/strata/coordinatord/internal/txnlog"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/ring"
	"github.com/strataio/strata/libs/rpc"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// CheckConsumerMetadata is the ready check: metadata synced, the offsets
// topic present and every owned offsets partition replayed without error.
const CheckConsumerMetadata = "consumer_metadata"

// Role is a running coordinatord.
type Role struct {
	*node.BasicService

	env  *node.RoleEnv
	cfg  Config
	meta *metaclient.Client
	m    *metrics

	// Overridable in tests.
	now       func() time.Time
	suffix    func() int
	logClient func(p int32) offsetlog.Client
	// txnLogClient reaches the leader of a __transaction_state partition.
	txnLogClient func(p int32) txnlog.Client

	ringCache atomic.Pointer[ringAt]
	// incarnation identifies this process's registration with metad.
	incarnation uint64

	// dir knows the groups the other live coordinatords own (metrics).
	dir *directory

	mu       sync.Mutex
	shards   map[int32]*shard
	creating bool
	stats    recoveryStats
	hwm      map[group.TP]partOffsets
	// Transaction coordinator shards owned by this node (txncoord.go).
	txnShardMap map[uint32]*txnShard
	creatingTxn bool

	// takeovers holds a slot per takeover attempt in progress (takeoverSlot).
	takeovers chan struct{}
}

type ringAt struct {
	rev  uint64
	ring *ring.Ring
}

// partOffsets are a partition's offsets for the lag metrics: lag is
// measured against the last stable offset, the end read_committed
// consumers (the default) can reach (docs/transactions.md).
type partOffsets struct{ start, hwm, lso uint64 }

// recoveryStats are the consumer metadata recovery figures (spec 6).
type recoveryStats struct {
	groups, offsets, records, orphans, corrupt int
}

// Policy returns coordinatord's method -> caller-role policy: the gateway
// routes client group commands, admin tools call everything, metad asks
// TopicActivity (DELETE/TRUNCATE guard) and ListGroups, and the other
// coordinatords ask ListGroups at each scrape (directory.go). Every method
// is listed by name, never derived from the service descriptor, so a new
// RPC fails startup (rpc.CheckPolicy) and the internal policy test until
// someone decides who may call it.
func Policy() rpc.Policy {
	svc := "/" + coordinatorv1.CoordinatorService_ServiceDesc.ServiceName + "/"
	clients := []pki.Role{pki.RoleGateway, pki.RoleAdmin}
	p := rpc.Policy{}
	for _, m := range []string{"RegisterGroup", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "GroupStatus",
		"DeleteGroup", "CommitOffset", "BatchCommit", "FetchOffset", "ResetOffsets",
		"InitProducerId", "BeginTxn", "TxnPublish", "SendOffsetsToTxn", "EndTxn", "TxnStatus", "ListTxns", "AbortTxn"} {
		p[svc+m] = clients
	}
	p[svc+"TopicActivity"] = []pki.Role{pki.RoleGateway, pki.RoleAdmin, pki.RoleMetad}
	p[svc+"ListGroups"] = []pki.Role{pki.RoleGateway, pki.RoleAdmin, pki.RoleMetad, pki.RoleCoordinatord}
	// ListTxns and AbortTxn (an operator's `strata txn list|abort`) come
	// through the gateway like DELETE_GROUP; the gateway's auth guard makes
	// them admin-only. The transaction coordinator asks the group's
	// coordinator to validate and commit transactional offsets.
	p[svc+"ValidateTxnOffsets"] = []pki.Role{pki.RoleCoordinatord, pki.RoleAdmin}
	p[svc+"CommitTxnOffsets"] = []pki.Role{pki.RoleCoordinatord, pki.RoleAdmin}
	p[svc+"AbortTxnOffsets"] = []pki.Role{pki.RoleCoordinatord, pki.RoleAdmin}
	// A group's coordinator asks the transaction coordinator whether a
	// pending offset mark's transaction is still pending.
	p[svc+"TxnOffsetsPending"] = []pki.Role{pki.RoleCoordinatord, pki.RoleAdmin}
	return p
}

// New builds coordinatord on env: it registers CoordinatorService, the
// policy, the ready check and the metrics. Work starts in Start.
func New(env *node.RoleEnv, cfg Config) (*Role, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if env.AdvertiseRPC == "" {
		return nil, errcode.MissingParameter.New("coordinatord needs an advertised RPC address", "param", "rpc_advertise")
	}
	r := &Role{env: env, cfg: cfg, now: time.Now, suffix: func() int { return rand.IntN(10000) },
		shards: map[int32]*shard{}, hwm: map[group.TP]partOffsets{}, txnShardMap: map[uint32]*txnShard{},
		incarnation: uint64(time.Now().UnixNano()), takeovers: make(chan struct{}, maxTakeovers)}
	// Every loop, takeovers included, derives from the service context, so
	// stopping needs no step of its own: cancelling it ends them all.
	r.BasicService = node.NewBasicService(string(pki.RoleCoordinatord), node.Hooks{Starting: r.starting})
	r.dir = newDirectory(r)
	r.meta = metaclient.New(metaclient.Options{Addrs: cfg.MetadAddrs, Dial: env.Clients.Get, Logger: env.Logger})
	r.logClient = func(p int32) offsetlog.Client { return leaderClient{r: r, topic: groups.OffsetsTopic, p: p} }
	r.txnLogClient = func(p int32) txnlog.Client { return leaderClient{r: r, topic: txnlog.Topic, p: p} }
	m, err := newMetrics(env.Process.Registry, r)
	if err != nil {
		return nil, err
	}
	r.m = m
	coordinatorv1.RegisterCoordinatorServiceServer(env.GRPC, &service{r: r})
	for k, v := range Policy() {
		env.Policy[k] = v
	}
	env.Process.Health.Register(CheckConsumerMetadata, r.checkReady)
	return r, nil
}

// starting registers with metad and starts the watch, ownership and
// maintenance loops.
func (r *Role) starting(context.Context) error {
	self := &metav1.Node{
		Id:                           r.env.NodeID,
		Role:                         metav1.NodeRole_NODE_ROLE_COORDINATORD,
		RpcAddress:                   r.env.AdvertiseRPC,
		TransactionCoordinatorShards: r.cfg.TransactionCoordinatorShards,
		// A new incarnation per process: metad sees the restart, and the
		// node change it publishes gives the takeover a higher epoch.
		Incarnation: r.incarnation,
	}
	r.Go(func(ctx context.Context) { r.meta.Watch(ctx) })
	r.Go(func(ctx context.Context) { r.meta.KeepAlive(ctx, self) })
	r.Go(r.ownershipLoop)
	r.Go(r.maintenanceLoop)
	if r.cfg.LagRefreshInterval > 0 {
		r.Go(r.hwmLoop)
	}
	r.env.Logger.Info("coordinatord started", "rpc", r.env.AdvertiseRPC,
		"offsets_partitions", r.cfg.OffsetsPartitions, "session_timeout", r.cfg.SessionTimeout.String())
	return nil
}

// ring returns the ring of live coordinators for view v, cached per revision.
func (r *Role) ring(v *metaclient.View) *ring.Ring {
	if c := r.ringCache.Load(); c != nil && c.rev == v.Revision {
		return c.ring
	}
	rg := groups.Ring(v)
	r.ringCache.Store(&ringAt{rev: v.Revision, ring: rg})
	return rg
}

// checkReady is the consumer_metadata ready check.
func (r *Role) checkReady(context.Context) error {
	v := r.meta.Cache().View()
	if !v.Ready() {
		return errcode.ClusterMetadataUnavailable.New("metadata cache not synced with metad yet")
	}
	if _, ok := v.Topic(groups.OffsetsTopic); !ok {
		if err := r.offsetsPlaceable(v); err != nil {
			return err
		}
		return errcode.CoordinatorNotAvailable.New("__consumer_offsets does not exist yet")
	}
	if !r.registered(v) {
		return errcode.CoordinatorNotAvailable.New("this coordinator is not registered with metad yet")
	}
	// Transaction shards recover (prepared work finished) before this node
	// is ready too; an offsets problem is reported first.
	txnErr := r.checkTxnReady(v)
	owned := r.owned(v)
	r.mu.Lock()
	defer r.mu.Unlock()
	// A corrupt partition is reported before partitions still loading: it
	// needs an operator, the others only time.
	var first error
	for _, p := range owned {
		s := r.shards[p]
		if s == nil {
			if first == nil {
				first = errcode.CoordinatorNotAvailable.New("owned offsets partition not taken over yet", "partition", itoa(p))
			}
			continue
		}
		err := s.readyErr()
		if e, ok := errcode.As(err); ok && e.Field("reason") == "corrupt" {
			return err
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return txnErr
}

// registered reports whether v holds this process's own live registration.
// Ownership waits for it: the revision of any such view is above every
// revision an earlier process of this node took partitions over at, so the
// takeover epoch (the revision) fences that process.
func (r *Role) registered(v *metaclient.View) bool {
	n, ok := v.Node(r.env.NodeID)
	return ok && n.GetLive() && n.GetIncarnation() == r.incarnation
}

// owned returns the offsets partitions this node owns in v (none until
// this process's registration is visible).
func (r *Role) owned(v *metaclient.View) []int32 {
	if !r.registered(v) {
		return nil
	}
	n := groups.OffsetsPartitions(v, r.cfg.OffsetsPartitions)
	rg := r.ring(v)
	var out []int32
	for p := range n {
		if groups.PartitionOwner(rg, p) == r.env.NodeID {
			out = append(out, p)
		}
	}
	return out
}
