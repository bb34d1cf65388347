// Package server is the partitiond role: the PartitionService gRPC API
// (Append, the pipelined Produce stream, long-poll Fetch, ListOffsets) over
// the storage engine of internal/partition, and the reconciliation that
// keeps this node's partitions in line with metad's assignments (create,
// truncate under a new lifecycle epoch, delete with cleanup reports, leader
// epochs, committed-HWM checkpoints).
//
// It follows the role contract of the brief: DefaultConfig, New(env, cfg)
// returning a node.Role; docs/partitiond.md describes the design.
package server

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// LifecycleVersions are the topic lifecycle protocol versions this node
// implements (spec 9): 1 is TRUNCATE under a new lifecycle epoch, 2 the
// compaction policies (compact, delete,compact; spec 4.4 rules 4 and 6).
var LifecycleVersions = []uint32{1, 2}

// Health check names. They carry the role prefix because the all-in-one
// process shares one check registry between roles.
const (
	CheckStorage  = "partitiond.storage"
	CheckMetadata = "partitiond.metadata"
)

// Role is a running partitiond.
type Role struct {
	env    *node.RoleEnv
	cfg    Config
	meta   *metaclient.Client
	tracer trace.Tracer
	m      *metrics

	// store is the storage node, nil before Start opened it and after Stop.
	store atomic.Pointer[partition.Node]

	rec *reconciler

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Policy returns partitiond's method → caller-role policy: the gateway and
// coordinatord write (coordinatord owns __consumer_offsets and the
// transaction logs); reads are also open to other partition servers (future
// replication); admin may call everything.
func Policy() rpc.Policy {
	svc := "/" + partitionv1.PartitionService_ServiceDesc.ServiceName + "/"
	writers := []pki.Role{pki.RoleGateway, pki.RoleCoordinatord, pki.RoleAdmin}
	readers := []pki.Role{pki.RoleGateway, pki.RoleCoordinatord, pki.RolePartitiond, pki.RoleAdmin}
	return rpc.Policy{
		svc + "Append":      writers,
		svc + "Produce":     writers,
		svc + "Fetch":       readers,
		svc + "ListOffsets": readers,
	}
}

// New builds partitiond on env: it registers the PartitionService, the role
// policy, the ready checks and the metrics. Storage opens in Start; requests
// before that answer role_unavailable.
func New(env *node.RoleEnv, cfg Config) (node.Role, error) {
	return newRole(env, cfg)
}

func newRole(env *node.RoleEnv, cfg Config) (*Role, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if env.DataDir == "" {
		return nil, errcode.MissingParameter.New("partitiond needs a data directory", "param", "data_dir")
	}
	if env.AdvertiseRPC == "" {
		return nil, errcode.MissingParameter.New("partitiond needs an advertised RPC address", "param", "rpc_advertise")
	}
	r := &Role{env: env, cfg: cfg}
	var tp trace.TracerProvider = noop.NewTracerProvider()
	if t := env.Telemetry().TracerProvider; t != nil {
		tp = t
	}
	r.tracer = tp.Tracer("github.com/strataio/strata/partitiond/server")
	r.meta = metaclient.New(metaclient.Options{Addrs: cfg.MetadAddrs, Dial: env.Clients.Get, Logger: env.Logger})
	r.rec = newReconciler(r)
	m, err := newMetrics(env.Process.Registry, r)
	if err != nil {
		return nil, err
	}
	r.m = m
	partitionv1.RegisterPartitionServiceServer(env.GRPC, &service{r: r})
	for k, v := range Policy() {
		env.Policy[k] = v
	}
	env.Process.Health.Register(CheckStorage, r.checkStorage)
	env.Process.Health.Register(CheckMetadata, r.checkMetadata)
	return r, nil
}

// Name implements node.Role.
func (r *Role) Name() string { return "partitiond" }

// Start opens the storage (recovering every local partition), then starts
// the metad watch, the node registration, assignment reconciliation and the
// HWM checkpoints.
func (r *Role) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("partitiond: already started")
	}
	if err := os.MkdirAll(r.env.DataDir, 0o755); err != nil {
		return errcode.StorageUnavailable.New("create data directory: "+err.Error(), "dir", r.env.DataDir)
	}
	ncfg := partition.NodeConfig{
		Dir:                 r.env.DataDir,
		Logger:              r.env.Logger,
		Defaults:            r.cfg.defaults(),
		CompactionEligible:  r.compactionEligible,
		OnStorageFailure:    r.onStorageFailure,
		MaintenanceInterval: r.cfg.RetentionCheckInterval,
		SyncParallel:        r.cfg.SyncParallel,
		ReaderCacheSize:     r.cfg.ReaderCacheSize,
		VerifyOnOpen:        r.cfg.VerifyOnOpen,
	}
	if r.cfg.storageHook != nil {
		r.cfg.storageHook(&ncfg)
	}
	st, err := partition.Open(ctx, ncfg)
	if err != nil {
		return err
	}
	r.store.Store(st)
	bg, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	self := &metav1.Node{
		Id:                r.env.NodeID,
		Role:              metav1.NodeRole_NODE_ROLE_PARTITIOND,
		RpcAddress:        r.env.AdvertiseRPC,
		LifecycleVersions: LifecycleVersions,
		// A new incarnation per process start lets metad see an unclean
		// restart and fence the previous process's leadership.
		Incarnation: uint64(time.Now().UnixNano()),
	}
	r.goBG(func() { r.meta.Watch(bg) })
	r.goBG(func() { r.meta.KeepAlive(bg, self) })
	r.goBG(func() { r.rec.run(bg) })
	r.goBG(func() { r.checkpointLoop(bg) })
	r.env.Logger.Info("partitiond started", "node", r.env.NodeID, "rpc", r.env.AdvertiseRPC, "data_dir", r.env.DataDir,
		"partitions", len(st.Partitions()))
	return nil
}

func (r *Role) goBG(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// Stop ends the background work and closes the storage (checkpointing every
// partition). It is safe after a failed or missing Start.
func (r *Role) Stop(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.cancel()
	}
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		r.env.Logger.Warn("partitiond: background work did not stop in time")
	}
	if st := r.store.Swap(nil); st != nil {
		return st.Close()
	}
	return nil
}

// storage returns the open storage node or role_unavailable.
func (r *Role) storage() (*partition.Node, error) {
	if st := r.store.Load(); st != nil {
		return st, nil
	}
	return nil, errcode.RoleUnavailable.New("partitiond storage is not open", "role", "partitiond")
}

func (r *Role) onStorageFailure(topic string, p int32, err error) {
	r.env.Logger.Error("partition fenced after a storage failure", "topic", topic, "partition", p, "err", err)
}

// checkStorage is ready when the data directory takes a write and every
// partition metad assigns to this node is open and not fenced.
func (r *Role) checkStorage(ctx context.Context) error {
	st, err := r.storage()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(r.env.DataDir, ".ready-*")
	if err != nil {
		return errcode.StorageUnavailable.New("data directory not writable: " + err.Error())
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	fenced := map[[2]string]bool{}
	for _, ps := range st.Stats().Partitions {
		if ps.Fenced {
			fenced[[2]string{ps.Topic, itoa(ps.Partition)}] = true
		}
	}
	for _, a := range r.assigned(r.meta.Cache().View()) {
		if _, err := st.Partition(a.topic, a.id); err != nil {
			return errcode.StorageUnavailable.New("assigned partition not open: "+err.Error(), "topic", a.topic, "partition", itoa(a.id))
		}
		if fenced[[2]string{a.topic, itoa(a.id)}] {
			return errcode.StorageUnavailable.New("assigned partition fenced after a storage failure", "topic", a.topic, "partition", itoa(a.id))
		}
	}
	return nil
}

// checkMetadata is ready once the metad watch delivered a full snapshot.
func (r *Role) checkMetadata(ctx context.Context) error {
	if !r.meta.Cache().View().Ready() {
		return errcode.ClusterMetadataUnavailable.New("metadata cache not synced with metad yet")
	}
	return nil
}
