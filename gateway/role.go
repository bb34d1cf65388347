// Package gateway is the gateway role: the Wire v2 client listener (spec 4.3)
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
//
// This package holds the role (Role, Config, New/Start/Stop), the client
// listener and connections, metrics and ready checks, and the wiring of the
// command table (commands.go). The commands themselves live in
// internal/admin, internal/records and internal/groups behind
// internal/route's Router; internal/command is the table they register in
// and internal/param reads their parameters.
package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/strataio/strata/gateway/internal/auth"
	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/certprincipal"
	"github.com/strataio/strata/libs/clienttls"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Role is the gateway role.
type Role struct {
	*node.BasicService

	env    *node.RoleEnv
	cfg    Config
	log    *slog.Logger
	meta   *metaclient.Client
	routes *route.Cluster
	// commands is the handler table of every client command.
	commands *command.Table
	// auth authenticates clients; its guard on the table authorizes them.
	auth   *auth.Authenticator
	m      *metrics
	tracer trace.Tracer
	limits wire.Limits

	lis        net.Listener
	clientAddr atomic.Value // string: advertised client address
	// tls is the client listener's TLS material (nil: plaintext) and
	// principalRule maps verified client certificates to principals.
	tls           *clienttls.Server
	principalRule certprincipal.Rule

	// ctx is the service context (node.BasicService.Context): request
	// work that must end with the role derives from it.
	ctx context.Context
	// drainCtx outlives ctx until the Stopping hook: a request a
	// connection already started when Stop began finishes (Stop waits for
	// every connection, within shutdown_timeout) instead of failing as
	// cancelled; the connection then closes without reading more.
	drainCtx context.Context
	endDrain context.CancelFunc

	connMu   sync.Mutex
	conns    map[*conn]struct{}
	refusing atomic.Int32

	leaderProbe probeCache
}

// New builds the gateway on env. It registers metrics and ready checks; Start
// binds the client listener.
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
		limits: wire.Limits{MaxEncodedLength: cfg.MaxFrameBytes, MaxDecodedLength: cfg.MaxFrameBytes},
	}
	g.BasicService = node.NewBasicService(string(pki.RoleGateway), node.Hooks{Starting: g.starting, Stopping: g.stopping})
	g.ctx = g.Context()
	g.drainCtx, g.endDrain = context.WithCancel(context.WithoutCancel(g.ctx))
	g.meta = metaclient.New(metaclient.Options{Addrs: cfg.MetadAddrs, Dial: env.Clients.Get, Logger: log})
	g.routes = route.New(route.Options{Meta: g.meta, Dial: env.Clients.Get, Retries: cfg.RouteRetries, RetryWait: cfg.RouteRetryWait,
		Advertised: g.advertised, Stopping: g.isStopping})
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
	if files := cfg.clientTLS(); files.Enabled() {
		if g.tls, err = clienttls.NewServer(files, log.With("component", "client-tls")); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	if g.principalRule, err = certprincipal.Parse(cfg.TLSPrincipalRule); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	a, err := auth.New(cfg.authConfig(), log)
	if err != nil {
		return nil, err // "auth: ..." naming the entry; the process adds "gateway:"
	}
	g.auth = a
	g.commands = newCommandTable(g.routes, cfg, m, log, auth.NewGuard(a, auth.RouterTopics(g.routes)))
	g.registerChecks()
	return g, nil
}

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

// isStopping reports that Stop has begun (or Start never ran).
func (g *Role) isStopping() bool { return g.ctx == nil || g.ctx.Err() != nil }

// starting binds the client listener, starts the metadata watch and the
// registration with metad, and begins accepting clients.
func (g *Role) starting(context.Context) error {
	if g.cfg.DiagnosticsOnly {
		// Spec 4.1: no client listener. The watch keeps the /ready checks
		// meaningful; without a client address there is nothing to
		// register (metad requires one from a gateway).
		g.Go(func(ctx context.Context) { g.meta.Watch(ctx) })
		g.log.Warn("diagnostics-only mode: the client listener is not opened; /ready stays 503", "client_listen", g.cfg.ClientListen)
		return nil
	}
	lis, err := net.Listen("tcp", g.cfg.ClientListen)
	if err != nil {
		return fmt.Errorf("gateway: bind client listener %s: %w", g.cfg.ClientListen, err)
	}
	if g.tls != nil {
		// The TLS handshake runs on the connection's goroutine (conn.handshake),
		// bounded by handshake_timeout, never in the accept loop.
		lis = tls.NewListener(lis, g.tls.Config())
	}
	g.lis = lis
	g.clientAddr.Store(g.advertiseAddr())
	self := &metav1.Node{
		Id:            g.env.NodeID,
		Role:          metav1.NodeRole_NODE_ROLE_GATEWAY,
		RpcAddress:    g.env.AdvertiseRPC,
		ClientAddress: g.advertised(),
		Incarnation:   uint64(time.Now().UnixNano()),
	}
	g.Go(func(ctx context.Context) { g.meta.Watch(ctx) })
	g.Go(func(ctx context.Context) { g.meta.KeepAlive(ctx, self) })
	g.Go(g.acceptLoop)
	g.Go(g.closeClientsOnStop)
	g.log.Info("gateway client listener bound", "addr", g.ClientAddr(), "advertise", g.advertised(), "tls", g.tls != nil)
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

// closeClientsOnStop waits for Stop, then closes what blocks loops outside
// the service context: the listener (Accept) and every connection (reads;
// open streams get a CLOSE control frame first).
func (g *Role) closeClientsOnStop(ctx context.Context) {
	<-ctx.Done()
	g.lis.Close()
	g.connMu.Lock()
	for c := range g.conns {
		c.shutdown()
	}
	g.connMu.Unlock()
}

// stopping ends the produce streams to the partition servers once no
// connection uses them.
func (g *Role) stopping(context.Context) error {
	g.endDrain()
	g.routes.Close()
	return nil
}

// frameLimits bounds the frames of a connection: until it authenticates
// (with enable_sasl on) only wire.PreAuthLimits, so an unauthenticated
// client cannot make the gateway buffer large payloads (the CVE-2022-34917
// lesson); then max_frame_bytes.
func (g *Role) frameLimits(s *auth.Session) wire.Limits {
	if !g.auth.Enabled() || s.Authenticated() {
		return g.limits
	}
	return wire.Limits{MaxEncodedLength: min(g.limits.MaxEncodedLength, wire.PreAuthMaxPayload),
		MaxDecodedLength: min(g.limits.MaxDecodedLength, wire.PreAuthMaxPayload)}
}
