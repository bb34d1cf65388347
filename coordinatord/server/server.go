// Package server is the coordinatord role: consumer groups and committed
// offsets (spec 2.3, 3.3, 4.5) served as CoordinatorService.
//
// Each group belongs to one __consumer_offsets partition and each partition
// to the live coordinatord that owns its ring key (libs/groups). This node
// takes over the partitions it owns (fencing the previous owner with a
// higher producer epoch, then replaying the partition) and releases those it
// no longer owns; requests for groups it does not own answer NOT_COORDINATOR
// with the owner. docs/coordinatord.md describes the design.
package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/coordinatord/internal/offsetlog"
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
	env  *node.RoleEnv
	cfg  Config
	meta *metaclient.Client
	m    *metrics

	// Overridable in tests.
	now       func() time.Time
	suffix    func() int
	logClient func(p int32) offsetlog.Client

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

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type ringAt struct {
	rev  uint64
	ring *ring.Ring
}

type partOffsets struct{ start, hwm uint64 }

// recoveryStats are the consumer metadata recovery figures (spec 6).
type recoveryStats struct {
	groups, offsets, records, orphans, corrupt int
}

// Policy returns coordinatord's method -> caller-role policy: the gateway
// routes client group commands, admin tools call everything, metad asks
// TopicActivity (DELETE/TRUNCATE guard) and ListGroups, and the other
// coordinatords ask ListGroups at each scrape (directory.go).
func Policy() rpc.Policy {
	svc := "/" + coordinatorv1.CoordinatorService_ServiceDesc.ServiceName + "/"
	clients := []pki.Role{pki.RoleGateway, pki.RoleAdmin}
	p := rpc.Policy{}
	for _, m := range coordinatorv1.CoordinatorService_ServiceDesc.Methods {
		p[svc+m.MethodName] = clients
	}
	p[svc+"TopicActivity"] = []pki.Role{pki.RoleGateway, pki.RoleAdmin, pki.RoleMetad}
	p[svc+"ListGroups"] = []pki.Role{pki.RoleGateway, pki.RoleAdmin, pki.RoleMetad, pki.RoleCoordinatord}
	return p
}

// New builds coordinatord on env: it registers CoordinatorService, the
// policy, the ready check and the metrics. Work starts in Start.
func New(env *node.RoleEnv, cfg Config) (node.Role, error) {
	return newRole(env, cfg)
}

func newRole(env *node.RoleEnv, cfg Config) (*Role, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if env.AdvertiseRPC == "" {
		return nil, errcode.MissingParameter.New("coordinatord needs an advertised RPC address", "param", "rpc_advertise")
	}
	r := &Role{env: env, cfg: cfg, now: time.Now, suffix: func() int { return rand.IntN(10000) },
		shards: map[int32]*shard{}, hwm: map[group.TP]partOffsets{},
		incarnation: uint64(time.Now().UnixNano())}
	r.dir = newDirectory(r)
	r.meta = metaclient.New(metaclient.Options{Addrs: cfg.MetadAddrs, Dial: env.Clients.Get, Logger: env.Logger})
	r.logClient = func(p int32) offsetlog.Client { return leaderClient{r: r, topic: groups.OffsetsTopic, p: p} }
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

// Name implements node.Role.
func (r *Role) Name() string { return "coordinatord" }

// Start registers with metad and starts the watch, ownership and
// maintenance loops.
func (r *Role) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("coordinatord: already started")
	}
	bg, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	self := &metav1.Node{
		Id:                           r.env.NodeID,
		Role:                         metav1.NodeRole_NODE_ROLE_COORDINATORD,
		RpcAddress:                   r.env.AdvertiseRPC,
		TransactionCoordinatorShards: r.cfg.TransactionCoordinatorShards,
		// A new incarnation per process: metad sees the restart, and the
		// node change it publishes gives the takeover a higher epoch.
		Incarnation: r.incarnation,
	}
	r.goBG(func() { r.meta.Watch(bg) })
	r.goBG(func() { r.meta.KeepAlive(bg, self) })
	r.goBG(func() { r.ownershipLoop(bg) })
	r.goBG(func() { r.maintenanceLoop(bg) })
	if r.cfg.LagRefreshInterval > 0 {
		r.goBG(func() { r.hwmLoop(bg) })
	}
	r.env.Logger.Info("coordinatord started", "node", r.env.NodeID, "rpc", r.env.AdvertiseRPC,
		"offsets_partitions", r.cfg.OffsetsPartitions, "session_timeout", r.cfg.SessionTimeout)
	return nil
}

func (r *Role) goBG(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// Stop ends the background work (takeovers in progress are cancelled).
func (r *Role) Stop(ctx context.Context) error {
	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	for _, s := range r.shards {
		s.stop()
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("coordinatord: background work did not stop in time")
	}
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
	return first
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
