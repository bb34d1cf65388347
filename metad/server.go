// Package metad is metad as a role: the gRPC MetadataService (service.go)
// over the Raft node (internal/raftnode) and state machine (internal/fsm),
// the mTLS Raft transport (internal/transport), the controller loop on the
// Raft leader, the role policy, readiness checks and metrics. It has the
// shape of every role: Config, DefaultConfig and New(env, cfg) returning the
// role as a node service; the metad binary and the all-in-one both build it.
//
// Writes are proposed through Raft on the leader; a follower answers
// NOT_LEADER with field "leader" = the leader's gRPC address, which it knows
// because every metad of a multi-voter cluster registers itself as a
// NODE_ROLE_METAD node (id = its Raft server id, rpc_address = its gRPC
// address). Reads and Watch are served by the leader only, linearizably (see
// linearize).
package metad

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/metad/internal/controller"
	"github.com/strataio/strata/metad/internal/fsm"
	"github.com/strataio/strata/metad/internal/raftnode"
	"github.com/strataio/strata/metad/internal/transport"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Role is the metad role.
type Role struct {
	*node.BasicService

	env      *node.RoleEnv
	cfg      Config
	log      *slog.Logger
	id       raft.ServerID
	raftAddr string
	voters   []raft.Server
	stream   *transport.StreamLayer
	metrics  *metrics

	// incarnation identifies this process in its self-registration.
	incarnation uint64

	node atomic.Pointer[raftnode.Node]
	// barrierTerm is the Raft term in which this leader last completed a
	// Barrier: from then on its FSM holds every write acknowledged by an
	// earlier leader (see linearize).
	barrierTerm atomic.Uint64

	// observer feeds observeLeaders; set by starting, removed by stopping.
	observer *raft.Observer
}

// New builds metad on env: it validates cfg, binds the Raft listener (so
// "127.0.0.1:0" resolves to a real advertised address before anything is
// recorded), registers the MetadataService and its policy, the "raft",
// "cluster_leader" and "storage" ready checks and the strata_metad_* and
// strata_cluster_* metrics. Raft itself starts in Start.
func New(env *node.RoleEnv, cfg Config) (*Role, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if env.DataDir == "" {
		return nil, errcode.MissingParameter.New("metad needs a data directory", "param", "data_dir")
	}
	vs, err := parseVoters(cfg.Voters)
	if err != nil {
		return nil, err
	}
	self := ""
	for _, v := range vs {
		if v.id == env.NodeID {
			self = v.addr
		}
	}
	if len(vs) > 0 && self == "" {
		return nil, errcode.InvalidParameter.New("the voters list must include this node ("+env.NodeID+")", "param", "voters")
	}
	advertise := cfg.RaftAdvertise
	if advertise == "" {
		advertise = self
	}
	if self != "" && advertise != self {
		return nil, errcode.InvalidParameter.New(fmt.Sprintf("raft_advertise %s differs from this node's voters entry %s", advertise, self), "param", "raft_advertise")
	}
	log := env.Logger
	if host, _, err := net.SplitHostPort(env.AdvertiseRPC); len(vs) > 1 && (err != nil || host == "" || net.ParseIP(host).IsUnspecified()) {
		// Followers redirect clients to this address: a wildcard one is
		// useless to them.
		log.Warn("the advertised gRPC address is not dialable; set rpc_advertise", "rpc_address", env.AdvertiseRPC)
	}
	stream, err := transport.Listen(transport.Options{Listen: cfg.RaftListen, Advertise: advertise, Source: env.TLS, Logger: log.With("component", "raft-transport")})
	if err != nil {
		return nil, err
	}
	s := &Role{
		env:         env,
		cfg:         cfg,
		log:         log,
		id:          raft.ServerID(env.NodeID),
		raftAddr:    stream.Addr().String(),
		stream:      stream,
		incarnation: uint64(time.Now().UnixNano()),
	}
	s.BasicService = node.NewBasicService(string(pki.RoleMetad), node.Hooks{Starting: s.starting, Stopping: s.stopping})
	switch {
	case len(vs) > 0 && cfg.Bootstrap:
		for _, v := range vs {
			s.voters = append(s.voters, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.id), Address: raft.ServerAddress(v.addr)})
		}
	case cfg.Bootstrap:
		s.voters = []raft.Server{{Suffrage: raft.Voter, ID: s.id, Address: raft.ServerAddress(s.raftAddr)}}
	}
	s.metrics, err = newMetrics(env.Process.Registry, s)
	if err != nil {
		_ = stream.Close()
		return nil, err
	}
	metav1.RegisterMetadataServiceServer(env.GRPC, &service{r: s})
	for m, roles := range Policy() {
		env.Policy[m] = roles
	}
	h := env.Process.Health
	h.Register("raft", s.readyCheck)
	// Spec 4.1 names. In the all-in-one the gateway registers checks with
	// the same names after metad and replaces these (its cluster_leader
	// probes metad over gRPC, its storage asks for a live partition server);
	// the metad-specific "raft" check stays.
	h.Register("cluster_leader", s.leaderCheck)
	h.Register("storage", s.storageCheck)
	return s, nil
}

// RaftAddr is the advertised Raft address.
func (s *Role) RaftAddr() string { return s.raftAddr }

// starting opens the data directory, starts Raft (bootstrapping an empty
// directory from the voters), the controller loop and, in a multi-voter
// cluster, the self-registration that lets followers redirect to this node
// when it leads.
func (s *Role) starting(context.Context) error {
	tr := transport.NewTransport(s.stream, raftnode.NewHCLogger(s.log, "raft-net", hclog.Warn), 0)
	n, err := raftnode.New(raftnode.Config{
		ID:               s.id,
		Address:          raft.ServerAddress(s.raftAddr),
		Dir:              filepath.Join(s.env.DataDir, "raft"),
		Transport:        tr,
		Voters:           s.voters,
		LeaderRPCAddress: s.leaderRPCAddress,
		Logger:           s.log,
		Raft:             s.cfg.tuneRaft,
	})
	if err != nil {
		_ = tr.Close()
		return err
	}
	s.node.Store(n)
	obsCh := make(chan raft.Observation, 16)
	s.observer = raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.Raft().RegisterObserver(s.observer)

	// One pending wake-up is enough: the controller re-reads the state.
	wake := make(chan struct{}, 1)
	s.Go(func(ctx context.Context) { s.observeLeaders(ctx, obsCh, wake) })
	s.Go(func(ctx context.Context) {
		controller.Run(ctx, &proposer{Node: n, s: s}, controller.Config{LeaseTimeout: s.cfg.NodeLeaseTimeout, TxnShards: s.cfg.TransactionCoordinatorShards, Wake: wake},
			time.Now, s.log.With("component", "controller"))
	})
	if len(s.voters) != 1 {
		// A lone voter always leads and redirects nobody, so it need not
		// publish its address (and its id stays free for the all-in-one's
		// other roles, which share the node id).
		s.Go(s.registerSelf)
	}
	s.log.Info("metad started", "raft_id", string(s.id), "raft_address", s.raftAddr, "rpc_address", s.env.AdvertiseRPC, "bootstrap_voters", len(s.voters))
	return nil
}

// stopping shuts Raft down once the loops ended (which closes the transport
// and ends every Watch stream with a retryable error).
func (s *Role) stopping(context.Context) error {
	n := s.node.Load()
	if n == nil {
		// Never started: raft does not own the listener yet.
		return s.stream.Close()
	}
	n.Raft().DeregisterObserver(s.observer)
	return n.Shutdown()
}

// raftNode returns the running node or a retryable error while metad starts.
func (s *Role) raftNode() (*raftnode.Node, error) {
	n := s.node.Load()
	if n == nil {
		return nil, errcode.NoRaftLeader.New("metad is starting")
	}
	return n, nil
}

// leaderRPCAddress maps the Raft leader to its gRPC address: our own when we
// lead, else the rpc_address the leader registered as a metad node.
func (s *Role) leaderRPCAddress(id raft.ServerID, _ raft.ServerAddress) string {
	if id == s.id {
		return s.env.AdvertiseRPC
	}
	n := s.node.Load()
	if n == nil {
		return ""
	}
	var addr string
	n.FSM().Read(func(st *fsm.State) {
		if nd, ok := st.Node(string(id)); ok && nd.GetRole() == metav1.NodeRole_NODE_ROLE_METAD {
			addr = nd.GetRpcAddress()
		}
	})
	return addr
}

// registerSelf keeps this metad registered (and its lease renewed) through
// the leader, via its own gRPC endpoint so redirects work as for any client.
func (s *Role) registerSelf(ctx context.Context) {
	c := metaclient.New(metaclient.Options{Addrs: []string{s.env.AdvertiseRPC}, Dial: s.env.Clients.Get, Logger: s.log})
	_ = c.KeepAlive(ctx, &metav1.Node{
		Id:          string(s.id),
		Role:        metav1.NodeRole_NODE_ROLE_METAD,
		RpcAddress:  s.env.AdvertiseRPC,
		Incarnation: s.incarnation,
	})
}

// observeLeaders counts and logs leader changes and wakes the controller
// (which acts only while this node leads) on each.
func (s *Role) observeLeaders(ctx context.Context, ch <-chan raft.Observation, wake chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-ch:
			lo := o.Data.(raft.LeaderObservation)
			s.metrics.leaderChanges.Inc()
			s.log.Info("raft leader changed", "leader_id", string(lo.LeaderID), "leader_address", string(lo.LeaderAddr))
			if lo.LeaderID == s.id {
				s.Go(s.ownAddress)
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// ownAddress keeps a lone voter's address in the Raft configuration equal
// to the address it listens on. The configuration stores the address of the
// first boot; an all-in-one that binds another port on restart (its default
// raft_listen is port 0) would otherwise show the stale one in CLUSTER_STATUS
// forever. AddVoter with the voter's own id only rewrites its address. With
// several voters the address is the operator's (raft_listen/voters) and is
// left alone: peers could not have reached a node at an address they do not
// know.
func (s *Role) ownAddress(ctx context.Context) {
	n := s.node.Load()
	if n == nil {
		return
	}
	f := n.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	servers := f.Configuration().Servers
	if len(servers) != 1 || servers[0].ID != s.id || string(servers[0].Address) == s.raftAddr {
		return
	}
	old := servers[0].Address
	if err := n.Raft().AddVoter(s.id, raft.ServerAddress(s.raftAddr), f.Index(), 10*time.Second).Error(); err != nil {
		s.log.Warn("could not update this voter's raft address", "from", string(old), "to", s.raftAddr, "err", err)
		return
	}
	s.log.Info("updated this voter's raft address", "from", string(old), "to", s.raftAddr)
}

// linearize makes the next local read linearizable: it fails with
// NOT_LEADER / no_raft_leader unless this node leads, completes one Barrier
// per term (so everything earlier leaders acknowledged is applied here) and
// then confirms leadership with a quorum round (VerifyLeader). Writes this
// leader acknowledged were applied locally before their callers heard back,
// so the FSM then reflects every write acknowledged before the read began.
// Choice: reads are served by the leader only; followers redirect. This
// costs a heartbeat round per read but never serves stale metadata; bulk
// readers use the Watch-fed caches instead.
func (s *Role) linearize(ctx context.Context) (*raftnode.Node, error) {
	n, err := s.raftNode()
	if err != nil {
		return nil, err
	}
	term := n.Raft().CurrentTerm()
	if s.barrierTerm.Load() != term {
		// VerifyLeader gives a follower the typed NOT_LEADER answer. It
		// succeeds when this node won an election since IsLeader looked (a
		// restarted single voter does within its first second); the read
		// then goes on like any leader's, never with a nil node.
		if !n.IsLeader() {
			if err := n.VerifyLeader(ctx); err != nil {
				return nil, err
			}
		}
		if err := n.Barrier(ctx); err != nil {
			return nil, err
		}
		s.barrierTerm.Store(term)
	}
	if err := n.VerifyLeader(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// readyCheck is the "raft" readiness check: Raft runs, a leader is known,
// and this node's FSM is not far behind the commit index it knows.
func (s *Role) readyCheck(context.Context) error {
	n := s.node.Load()
	if n == nil {
		return errors.New("raft not started")
	}
	id, _ := n.Leader()
	if id == "" {
		return errors.New("no raft leader")
	}
	r := n.Raft()
	if c, a := r.CommitIndex(), r.AppliedIndex(); c > a+1024 {
		return fmt.Errorf("fsm catching up: applied %d of %d", a, c)
	}
	return nil
}

// leaderCheck is the spec's cluster_leader check: it fails while no Raft
// leader is known (during an election or after losing quorum).
func (s *Role) leaderCheck(context.Context) error {
	n := s.node.Load()
	if n == nil {
		return errors.New("raft not started")
	}
	if id, _ := n.Leader(); id == "" {
		return errors.New("no metadata leader")
	}
	return nil
}

// storageCheck is the storage check: the Raft data directory and log store
// answer (raftnode.CheckStorage).
func (s *Role) storageCheck(context.Context) error {
	n := s.node.Load()
	if n == nil {
		return errors.New("raft storage not open")
	}
	return n.CheckStorage()
}

// proposer counts the controller's commands in the metrics.
type proposer struct {
	*raftnode.Node
	s *Role
}

func (p *proposer) Propose(ctx context.Context, payload proto.Message) (*fsm.Result, error) {
	res, err := p.Node.Propose(ctx, payload)
	p.s.metrics.observeCommand(payload, err)
	return res, err
}
