// Package partitiond is the partitiond role: the PartitionService gRPC API
// (Append, the pipelined Produce stream, long-poll Fetch, ListOffsets) over
// the storage engine of internal/partition, and the reconciliation that
// keeps this node's partitions in line with metad's assignments (create,
// truncate under a new lifecycle epoch, delete with cleanup reports, leader
// epochs, committed-HWM checkpoints).
//
// It has the shape of every role: Config, DefaultConfig and New(env, cfg)
// returning the role as a node service (node.BasicService owns its
// background loops); docs/partitiond.md describes the design and LOCKS.md
// the storage engine's lock order.
package partitiond

import (
	"context"
	"os"
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
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
	"github.com/strataio/strata/partitiond/internal/replica"
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
	*node.BasicService

	env    *node.RoleEnv
	cfg    Config
	meta   *metaclient.Client
	tracer trace.Tracer
	m      *metrics

	// store is the storage node, nil before Start opened it and after Stop.
	store atomic.Pointer[partition.Node]
	// repl replicates the partitions (replication.go), running while the
	// storage is open.
	repl        atomic.Pointer[replica.Manager]
	replMetrics *replica.Metrics

	rec *reconciler
	// streamParts is the event-sourcing state of hosted partitions
	// (streams.go).
	streamParts streamParts
	// self is this process's registration; stopKeepAlive ends its lease
	// renewal (kaDone closes when it ended) before a controlled shutdown.
	self          *metav1.Node
	stopKeepAlive context.CancelFunc
	kaDone        chan struct{}
}

// Policy returns partitiond's method → caller-role policy: the gateway and
// coordinatord write (coordinatord owns __consumer_offsets and the
// transaction logs); only coordinatord writes transactions; reads are also
// open to other partition servers; admin may call everything.
func Policy() rpc.Policy {
	svc := "/" + partitionv1.PartitionService_ServiceDesc.ServiceName + "/"
	writers := []pki.Role{pki.RoleGateway, pki.RoleCoordinatord, pki.RoleAdmin}
	readers := []pki.Role{pki.RoleGateway, pki.RoleCoordinatord, pki.RolePartitiond, pki.RoleAdmin}
	p := rpc.Policy{
		svc + "Append":      writers,
		svc + "Produce":     writers,
		svc + "Fetch":       readers,
		svc + "ListOffsets": readers,
		// Only partition servers replicate; the handler also checks that
		// the caller's certificate names the replica id it fetches as.
		svc + "ReplicaFetch": {pki.RolePartitiond},
		// Transactions: only the transaction coordinator adds partitions,
		// writes transactional records and markers (docs/transactions.md);
		// the gateway's Append refuses transaction metadata.
		svc + "AddTxnPartition": {pki.RoleCoordinatord, pki.RoleAdmin},
		svc + "TxnAppend":       {pki.RoleCoordinatord, pki.RoleAdmin},
		svc + "WriteTxnMarker":  {pki.RoleCoordinatord, pki.RoleAdmin},
	}
	streamPolicy(p)
	return p
}

// New builds partitiond on env: it registers the PartitionService, the role
// policy, the ready checks and the metrics. Storage opens in Start; requests
// before that answer role_unavailable.
func New(env *node.RoleEnv, cfg Config) (*Role, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if env.DataDir == "" {
		return nil, errcode.MissingParameter.New("partitiond needs a data directory", "param", "data_dir")
	}
	if env.AdvertiseRPC == "" {
		return nil, errcode.MissingParameter.New("partitiond needs an advertised RPC address", "param", "rpc_advertise")
	}
	r := &Role{env: env, cfg: cfg, replMetrics: &replica.Metrics{}}
	r.BasicService = node.NewBasicService(string(pki.RolePartitiond),
		node.Hooks{Starting: r.starting, Draining: r.controlledShutdown, Stopping: r.stopping})
	var tp trace.TracerProvider = noop.NewTracerProvider()
	if t := env.Telemetry().TracerProvider; t != nil {
		tp = t
	}
	r.tracer = tp.Tracer("github.com/strataio/strata/partitiond")
	r.meta = metaclient.New(metaclient.Options{Addrs: cfg.MetadAddrs, Dial: env.Clients.Get, Logger: env.Logger})
	r.rec = newReconciler(r)
	m, err := newMetrics(env.Process.Registry, r)
	if err != nil {
		return nil, err
	}
	r.m = m
	if err := env.Process.Registry.Register(replicationCollector{r}); err != nil {
		return nil, err
	}
	partitionv1.RegisterPartitionServiceServer(env.GRPC, &service{r: r})
	streamv1.RegisterStreamServiceServer(env.GRPC, &streamService{r: r})
	for k, v := range Policy() {
		env.Policy[k] = v
	}
	env.Process.Health.Register(CheckStorage, r.checkStorage)
	env.Process.Health.Register(CheckMetadata, r.checkMetadata)
	return r, nil
}

// starting opens the storage (recovering every local partition), then
// starts the metad watch, the node registration, assignment reconciliation
// and the HWM checkpoints.
func (r *Role) starting(ctx context.Context) error {
	if err := os.MkdirAll(r.env.DataDir, 0o755); err != nil {
		return errcode.StorageUnavailable.New("create data directory: "+err.Error(), "dir", r.env.DataDir)
	}
	ncfg := partition.NodeConfig{
		Dir:                 r.env.DataDir,
		Logger:              r.env.Logger,
		Defaults:            r.cfg.defaults(),
		CompactionEligible:  r.compactionEligible,
		BeforeRetention:     r.beforeRetention,
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
	r.repl.Store(r.newReplication(st))
	self := &metav1.Node{
		Id:                r.env.NodeID,
		Role:              metav1.NodeRole_NODE_ROLE_PARTITIOND,
		RpcAddress:        r.env.AdvertiseRPC,
		LifecycleVersions: LifecycleVersions,
		// A new incarnation per process start lets metad see an unclean
		// restart and fence the previous process's leadership.
		Incarnation: uint64(time.Now().UnixNano()),
	}
	r.Go(func(ctx context.Context) { r.meta.Watch(ctx) })
	r.self = self
	kaCtx, kaCancel := context.WithCancel(r.Context())
	r.stopKeepAlive, r.kaDone = kaCancel, make(chan struct{})
	r.Go(func(context.Context) {
		defer close(r.kaDone)
		r.meta.KeepAlive(kaCtx, self)
	})
	r.Go(r.rec.run)
	r.Go(r.checkpointLoop)
	r.Go(r.streamsLoop)
	r.env.Logger.Info("partitiond started", "rpc", r.env.AdvertiseRPC, "data_dir", r.env.DataDir,
		"partitions", len(st.Partitions()))
	return nil
}

// stopping closes replication, then the storage (checkpointing every
// partition), once the background loops ended.
func (r *Role) stopping(context.Context) error {
	if m := r.repl.Swap(nil); m != nil {
		m.Close()
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
