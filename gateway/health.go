package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// registerChecks adds the gateway's /ready checks (spec 4.1).
func (g *Role) registerChecks() {
	h := g.env.Process.Health
	if g.cfg.DiagnosticsOnly {
		h.Register(CheckDiagnosticsOnly, func(context.Context) error { return errDiagnosticsOnly })
	}
	h.Register("topic_metadata", func(context.Context) error {
		if !g.meta.Cache().View().Ready() {
			return errors.New("metadata cache not synced with metad")
		}
		return nil
	})
	h.Register("consumer_metadata", func(context.Context) error {
		if len(g.meta.Cache().View().Nodes(metav1.NodeRole_NODE_ROLE_COORDINATORD, true)) == 0 {
			return errors.New("no live coordinatord")
		}
		return nil
	})
	h.Register("storage", func(context.Context) error {
		if len(g.meta.Cache().View().Nodes(metav1.NodeRole_NODE_ROLE_PARTITIOND, true)) == 0 {
			return errors.New("no live partitiond")
		}
		return nil
	})
	h.Register("cluster_leader", func(ctx context.Context) error {
		return g.leaderProbe.get(func() error {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return g.meta.Call(pctx, func(ctx context.Context, m metav1.MetadataServiceClient) error {
				_, err := m.ListNodes(ctx, &metav1.ListNodesRequest{})
				return err
			})
		})
	})
}

// CheckDiagnosticsOnly is the /ready check that fails for as long as the
// gateway runs in diagnostics-only mode.
const CheckDiagnosticsOnly = "diagnostics_only"

var errDiagnosticsOnly = errors.New("diagnostics-only mode: the client listener is not opened")

// probeCache runs a probe at most once per second, so frequent /ready polls
// and metric scrapes do not each cost a metad round trip. A failed probe
// counts only once no probe has succeeded for probeGrace: the probe is a
// linearizable read (a Raft round with an fsync on metad), and one that is
// merely slow under I/O load must not flip a healthy gateway out of its load
// balancer; a leader that is really gone fails the check within the grace.
type probeCache struct {
	mu     sync.Mutex
	at     time.Time
	last   error
	lastOK time.Time
}

// probeGrace is how long after the last successful probe failures are
// still tolerated.
const probeGrace = 5 * time.Second

func (p *probeCache) get(probe func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < time.Second {
		return p.last
	}
	err := probe()
	p.at = time.Now()
	switch {
	case err == nil:
		p.lastOK, p.last = p.at, nil
	case !p.lastOK.IsZero() && p.at.Sub(p.lastOK) < probeGrace:
		p.last = nil
	default:
		p.last = errors.New("metad leader not reachable: " + err.Error())
	}
	return p.last
}
