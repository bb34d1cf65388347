package controller

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/metad/internal/fsm"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Config is the controller's configuration.
type Config struct {
	// LeaseTimeout is how long a node stays live without a heartbeat.
	LeaseTimeout time.Duration
	// TxnShards is transaction_coordinator_shards proposed at cluster
	// creation (fsm.DefaultTxnShards when 0).
	TxnShards uint32
	// Interval is how often Run plans (default LeaseTimeout/4, at least
	// 50ms).
	Interval time.Duration
	// Wake, when set, makes Run plan at once instead of at the next tick.
	// The service signals it on every Raft leader change, so a new leader
	// fixes the cluster settings (INIT_CLUSTER, which Watch and coordinator
	// registration wait for) and repairs partitions without waiting up to
	// an Interval.
	Wake <-chan struct{}
}

func (c Config) withDefaults() Config {
	if c.LeaseTimeout <= 0 {
		c.LeaseTimeout = 10 * time.Second
	}
	if c.TxnShards == 0 {
		c.TxnShards = fsm.DefaultTxnShards
	}
	if c.Interval <= 0 {
		c.Interval = max(c.LeaseTimeout/4, 50*time.Millisecond)
	}
	return c
}

// Plan returns the commands the leader should propose at now, given that it
// has been leader since leaderSince:
//
//   - INIT_CLUSTER while the cluster settings are not fixed;
//   - RECONCILE when a node's lease ran out or a partition needs repair (a
//     dead leader or ISR member, or an offline partition whose ISR has a
//     live member again).
//
// A new leader does not expire nodes during its first lease period: heartbeats
// sent during the election were lost and its clock may differ from the
// previous leader's, so nodes get one full lease to reach it first. Repairs
// that need no expiry are proposed at once.
func Plan(st *fsm.State, now, leaderSince time.Time, cfg Config) []proto.Message {
	cfg = cfg.withDefaults()
	var out []proto.Message
	if !st.Initialized() {
		out = append(out, &metav1.InitClusterCommand{TransactionCoordinatorShards: cfg.TxnShards, CreatedUnixMs: now.UnixMilli()})
	}
	nowMs, leaseMs := now.UnixMilli(), cfg.LeaseTimeout.Milliseconds()
	expiring := false
	for _, n := range st.Nodes(metav1.NodeRole_NODE_ROLE_UNSPECIFIED, true) {
		if fsm.LeaseExpired(n, nowMs, leaseMs) {
			expiring = true
			break
		}
	}
	if expiring && now.Sub(leaderSince) < cfg.LeaseTimeout {
		return out // wait out the grace period; the repair comes with the expiry
	}
	if expiring || needsRepair(st) {
		out = append(out, &metav1.ReconcileCommand{NowUnixMs: nowMs, LeaseTimeoutMs: leaseMs})
	}
	return out
}

func needsRepair(st *fsm.State) bool {
	live := func(id string) bool {
		n, ok := st.Node(id)
		return ok && n.GetLive() && n.GetRole() == metav1.NodeRole_NODE_ROLE_PARTITIOND
	}
	for _, t := range st.Topics() {
		if !fsm.Live(t) {
			continue
		}
		for _, p := range t.GetPartitions() {
			if np, _, _ := fsm.ReconcilePartition(p, live); np != p {
				return true
			}
		}
	}
	return false
}

// Proposer is what Run needs from the Raft node.
type Proposer interface {
	IsLeader() bool
	Barrier(ctx context.Context) error
	Propose(ctx context.Context, payload proto.Message) (*fsm.Result, error)
	FSM() *fsm.FSM
}

// Run plans and proposes every Interval (and on each Wake signal) while p
// is the leader, until ctx ends. now is the clock (time.Now in production). Failures are logged and
// retried on the next tick.
func Run(ctx context.Context, p Proposer, cfg Config, now func() time.Time, log *slog.Logger) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	var leaderSince time.Time
	for {
		if !p.IsLeader() {
			leaderSince = time.Time{}
		} else {
			if leaderSince.IsZero() {
				// Apply everything the previous leader committed before
				// reading the state we plan on.
				bctx, cancel := context.WithTimeout(ctx, cfg.LeaseTimeout)
				err := p.Barrier(bctx)
				cancel()
				if err != nil {
					log.Warn("controller barrier failed", "err", err)
				} else {
					leaderSince = now()
				}
			}
			if !leaderSince.IsZero() {
				tick(ctx, p, cfg, now(), leaderSince, log)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-cfg.Wake:
		}
	}
}

func tick(ctx context.Context, p Proposer, cfg Config, now, leaderSince time.Time, log *slog.Logger) {
	var cmds []proto.Message
	p.FSM().Read(func(st *fsm.State) { cmds = Plan(st, now, leaderSince, cfg) })
	for _, c := range cmds {
		pctx, cancel := context.WithTimeout(ctx, cfg.LeaseTimeout)
		res, err := p.Propose(pctx, c)
		cancel()
		if err != nil {
			log.Warn("controller command failed", "command", string(c.ProtoReflect().Descriptor().Name()), "err", err)
			continue
		}
		if r, ok := res.Response.(*fsm.ReconcileResult); ok && (len(r.ExpiredNodes) > 0 || r.LeaderChanges > 0 || r.IsrShrinks > 0) {
			log.Info("controller reconciled", "expired_nodes", r.ExpiredNodes, "leader_changes", r.LeaderChanges, "isr_shrinks", r.IsrShrinks)
		}
	}
}
