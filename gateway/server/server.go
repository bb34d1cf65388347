// Package server is the gateway role: the Wire v2 client listener (spec 4.3)
// and the routing of every client command to the role that serves it over
// mTLS gRPC — topics and cluster state to metad, records to the partition
// leader on partitiond, groups and offsets to the owning coordinatord.
//
// The gateway is stateless: its only state is metad's Watch-fed metadata
// cache, one produce stream per partitiond and the client connections.
// Internal redirects (NOT_LEADER from partitiond, NOT_COORDINATOR from
// coordinatord) are followed here with bounded retries, so clients see them
// only where the spec requires; every address handed to clients is a
// gateway address.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/strataio/strata/gateway/internal/produce"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/ring"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Role is the gateway role.
type Role struct {
	env    *node.RoleEnv
	cfg    Config
	log    *slog.Logger
	meta   *metaclient.Client
	m      *metrics
	tracer trace.Tracer
	limits wire.Limits

	lis        net.Listener
	clientAddr atomic.Value // string: advertised client address

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	connMu   sync.Mutex
	conns    map[*conn]struct{}
	refusing atomic.Int32

	muxMu sync.Mutex
	muxes map[string]*produce.Mux

	rrMu sync.Mutex
	rr   map[string]*roundRobin

	ringCache atomic.Pointer[coordRing]

	leaderProbe probeCache

	stopPprof func() // ends the optional profiling listener (pprof.go)
}

// coordRing is the coordinatord ring of one metadata revision.
type coordRing struct {
	revision uint64
	ring     *ring.Ring
}

// New builds the gateway on env. It registers metrics and ready checks; Start
// binds the client listener. It returns the concrete *Role (a node.Role) so
// the all-in-one can ask for ClientAddr.
func New(env *node.RoleEnv, cfg Config) (*Role, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	g := &Role{
		env:    env,
		cfg:    cfg,
		log:    log,
		conns:  map[*conn]struct{}{},
		muxes:  map[string]*produce.Mux{},
		rr:     map[string]*roundRobin{},
		limits: wire.Limits{MaxEncodedLength: cfg.MaxFrameBytes, MaxDecodedLength: cfg.MaxFrameBytes},
	}
	g.meta = metaclient.New(metaclient.Options{Addrs: cfg.MetadAddrs, Dial: env.Clients.Get, Logger: log})
	if tp := env.Telemetry().TracerProvider; tp != nil {
		g.tracer = tp.Tracer("github.com/strataio/strata/gateway")
	} else {
		g.tracer = noop.NewTracerProvider().Tracer("gateway")
	}
	m, err := newMetrics(env.Process.Registry, g)
	if err != nil {
		return nil, fmt.Errorf("gateway metrics: %w", err)
	}
	g.m = m
	g.registerChecks()
	return g, nil
}

// Name implements node.Role.
func (g *Role) Name() string { return "gateway" }

// ClientAddr returns the bound client listener address ("" before Start).
func (g *Role) ClientAddr() string {
	if g.lis == nil {
		return ""
	}
	return g.lis.Addr().String()
}

// advertised is the client address handed to clients.
func (g *Role) advertised() string {
	s, _ := g.clientAddr.Load().(string)
	return s
}

// Start binds the client listener, starts the metadata watch and the
// registration with metad, and begins accepting clients.
func (g *Role) Start(ctx context.Context) error {
	lis, err := net.Listen("tcp", g.cfg.ClientListen)
	if err != nil {
		return fmt.Errorf("gateway: bind client listener %s: %w", g.cfg.ClientListen, err)
	}
	stopPprof, err := startPprof()
	if err != nil {
		lis.Close()
		return err
	}
	g.stopPprof = stopPprof
	g.lis = lis
	g.clientAddr.Store(g.advertiseAddr())
	g.ctx, g.cancel = context.WithCancel(context.Background())

	g.wg.Add(3)
	go func() {
		defer g.wg.Done()
		g.meta.Watch(g.ctx)
	}()
	go func() {
		defer g.wg.Done()
		g.meta.KeepAlive(g.ctx, &metav1.Node{
			Id:            g.env.NodeID,
			Role:          metav1.NodeRole_NODE_ROLE_GATEWAY,
			RpcAddress:    g.env.AdvertiseRPC,
			ClientAddress: g.advertised(),
			Incarnation:   uint64(time.Now().UnixNano()),
		})
	}()
	go func() {
		defer g.wg.Done()
		g.acceptLoop()
	}()
	g.log.Info("gateway client listener bound", "addr", g.ClientAddr(), "advertise", g.advertised())
	return nil
}

// advertiseAddr derives the address clients are told to use.
func (g *Role) advertiseAddr() string {
	if g.cfg.ClientAdvertise != "" {
		return g.cfg.ClientAdvertise
	}
	host, port, _ := net.SplitHostPort(g.lis.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = ""
		if h, _, err := net.SplitHostPort(g.env.AdvertiseRPC); err == nil {
			if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
				host = h
			}
		}
		if host == "" {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port)
}

// Stop closes the listener and every connection (open streams get a CLOSE
// control frame first), then ends the background work.
func (g *Role) Stop(ctx context.Context) error {
	if g.cancel == nil {
		return nil
	}
	g.cancel()
	if g.lis != nil {
		g.lis.Close()
	}
	if g.stopPprof != nil {
		g.stopPprof()
	}
	g.connMu.Lock()
	for c := range g.conns {
		c.shutdown()
	}
	g.connMu.Unlock()
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.muxMu.Lock()
	for addr, m := range g.muxes {
		m.Close()
		delete(g.muxes, addr)
	}
	g.muxMu.Unlock()
	return err
}

func (g *Role) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		nc, err := g.lis.Accept()
		if err != nil {
			if g.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE) must not spin the loop.
			g.log.Warn("accept failed", "err", err)
			time.Sleep(backoff)
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		g.m.connsTotal.Inc()
		c := newConn(g, nc)
		g.connMu.Lock()
		full := len(g.conns) >= g.cfg.MaxConnections
		if !full {
			g.conns[c] = struct{}{}
		}
		g.connMu.Unlock()
		if full {
			g.refuse(nc)
			continue
		}
		g.m.connsActive.Inc()
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			c.serve()
			g.connMu.Lock()
			delete(g.conns, c)
			g.connMu.Unlock()
			g.m.connsActive.Dec()
		}()
	}
}

// maxRefusing bounds the goroutines answering refused connections, so a
// connection flood costs a bounded amount of work.
const maxRefusing = 64

// refuse answers a connection beyond MaxConnections cleanly: it reads the
// negotiation request (briefly) and answers a negotiation response with
// status ERROR carrying connection_limit_reached, then closes. Beyond
// maxRefusing concurrent refusals the socket is just closed.
func (g *Role) refuse(nc net.Conn) {
	g.m.connsRefused.Inc()
	if g.refusing.Add(1) > maxRefusing {
		g.refusing.Add(-1)
		nc.Close()
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.refusing.Add(-1)
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(time.Second))
		fr := wire.NewFrameReader(nc)
		f, table, err := fr.ReadFirstFrame(wire.NegotiationLimits)
		if err != nil {
			return
		}
		codec := wire.Codec{Table: table, Limits: wire.NegotiationLimits}
		payload, _ := wire.AppendError(nil, errcode.ConnectionLimitReached.New("too many client connections",
			"limit", strconv.Itoa(g.cfg.MaxConnections)))
		frame, err := codec.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationResponse, Command: f.Header.Command,
			Status: wire.StatusError, RequestID: f.Header.RequestID}, payload)
		if err == nil {
			nc.Write(frame)
		}
	}()
}

var _ node.Role = (*Role)(nil)
