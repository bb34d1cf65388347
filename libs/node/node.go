package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/opshttp"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/telemetry"
)

// Process holds what every role of one OS process shares.
type Process struct {
	Logger   *slog.Logger
	Tracing  *telemetry.Tracing
	Registry *prometheus.Registry
	Health   *opshttp.Health

	// HealthAddr is the health listener address (required).
	HealthAddr string
	// MetricsAddr is the metrics listener address, used when EnableExporter.
	MetricsAddr    string
	EnableExporter bool
	// Links, when set before the roles are created, connects the roles of
	// this process to each other directly instead of over loopback mTLS
	// (the all-in-one; see rpc.Links and docs/decisions.md).
	Links *rpc.Links

	mu        sync.Mutex
	envs      []*RoleEnv
	healthSrv *opshttp.Server
	metricSrv *opshttp.Server
	rpcStats  *rpc.Metrics
}

// NewProcess returns a process with a fresh registry and health checks.
func NewProcess(log *slog.Logger, tracing *telemetry.Tracing) *Process {
	if tracing == nil {
		tracing = telemetry.Disabled()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Process{Logger: log, Tracing: tracing, Registry: opshttp.NewRegistry(), Health: opshttp.NewHealth()}
	p.Registry.MustRegister(readyGauge(p.Health))
	return p
}

// readyGauge is strata_process_ready: what /ready answers, evaluated at
// scrape time, in every process (the gateway's strata_broker_ready, the
// spec's svc_broker_ready, is the same for gateways only), so an alert can
// name any process that is not ready.
func readyGauge(h *opshttp.Health) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_process_ready",
		Help: "1 when every readiness check of this process passes (its /ready answers 200), else 0."}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, ok := h.Evaluate(ctx); ok {
			return 1
		}
		return 0
	})
}

// RoleEnv is what the process gives one hosted role.
type RoleEnv struct {
	Process *Process
	Role    pki.Role
	NodeID  string
	Logger  *slog.Logger
	// TLS is the role's own certificate source (server and client side).
	TLS *pki.Source
	// GRPC is the role's internal server; register services and fill
	// Policy before Run serves it.
	GRPC   *rpc.Server
	Policy rpc.Policy
	// Listener is the bound internal RPC listener; AdvertiseRPC is the
	// address other nodes dial (defaults to the bound address).
	Listener     net.Listener
	AdvertiseRPC string
	// DataDir is the role's private data directory (may be empty for
	// stateless roles).
	DataDir string
	// Clients dials other roles with this role's identity and tracing.
	Clients *rpc.Pool
}

// Telemetry returns the rpc tracing settings of the process.
func (e *RoleEnv) Telemetry() rpc.Telemetry {
	return rpc.Telemetry{TracerProvider: e.Process.Tracing.Provider, Propagator: e.Process.Tracing.Propagator}
}

// RoleOptions configures NewRoleEnv.
type RoleOptions struct {
	Role     pki.Role
	NodeID   string
	TLSFiles pki.Files
	// Listen is the internal RPC bind address (host:port; port 0 picks one).
	Listen string
	// Advertise overrides the address other nodes dial.
	Advertise string
	DataDir   string
}

// NewRoleEnv loads the role's certificate, binds its RPC listener and
// creates its gRPC server.
func (p *Process) NewRoleEnv(o RoleOptions) (*RoleEnv, error) {
	if err := pki.ValidNodeID(o.NodeID); err != nil {
		return nil, err
	}
	src, err := pki.NewSource(o.TLSFiles)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Role, err)
	}
	if id := src.Identity(); id.Role != o.Role || id.NodeID != o.NodeID {
		return nil, fmt.Errorf("%s: certificate identity %s does not match role %s node %s", o.Role, id, o.Role, o.NodeID)
	}
	log := p.Logger.With("role", string(o.Role), "node", o.NodeID)
	env := &RoleEnv{Process: p, Role: o.Role, NodeID: o.NodeID, Logger: log, TLS: src, Policy: rpc.Policy{}, DataDir: o.DataDir}
	env.GRPC, err = rpc.NewServer(rpc.ServerOptions{Source: src, Policy: env.Policy, Logger: log, Telemetry: env.Telemetry(), Metrics: p.rpcMetrics()})
	if err != nil {
		return nil, err
	}
	env.Listener, err = net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("%s: bind rpc %s: %w", o.Role, o.Listen, err)
	}
	env.AdvertiseRPC = o.Advertise
	if env.AdvertiseRPC == "" {
		env.AdvertiseRPC = env.Listener.Addr().String()
	}
	if p.Links != nil {
		if err := p.Links.Register(env.AdvertiseRPC, env.GRPC); err != nil {
			_ = env.Listener.Close()
			return nil, err
		}
	}
	env.Clients = rpc.NewPool(rpc.ClientOptions{Source: src, Logger: log, Telemetry: env.Telemetry(), Links: p.Links})
	p.mu.Lock()
	p.envs = append(p.envs, env)
	p.mu.Unlock()
	return env, nil
}

// RoleRPC is what one hosted role serves on its internal gRPC server: the
// registered services and the role policy guarding them.
type RoleRPC struct {
	Role     pki.Role
	Services map[string]grpc.ServiceInfo
	Policy   rpc.Policy
}

// RPCServices lists, per hosted role, the services registered on its
// internal server and its policy (the internal policy test and the
// generated table in docs/security.md read it).
func (p *Process) RPCServices() []RoleRPC {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]RoleRPC, 0, len(p.envs))
	for _, env := range p.envs {
		out = append(out, RoleRPC{Role: env.Role, Services: env.GRPC.GetServiceInfo(), Policy: env.Policy})
	}
	return out
}

// rpcMetrics returns the process-wide internal RPC metrics, registering
// them on first use (every role's server shares one set of series).
func (p *Process) rpcMetrics() *rpc.Metrics {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rpcStats == nil {
		p.rpcStats = rpc.NewMetrics(p.Registry)
	}
	return p.rpcStats
}

// Run serves the process until ctx is done, then shuts down within
// stopTimeout. services come in start order (InitModules' order); they stop
// in reverse. started, when not nil, is called once readiness is published
// (tests use it to learn the bound addresses).
func (p *Process) Run(ctx context.Context, services []Service, stopTimeout time.Duration, started func()) (err error) {
	if err := p.listen(); err != nil {
		p.closeEnvs()
		return err
	}
	for _, env := range p.envs {
		if err := rpc.CheckPolicy(env.GRPC, env.Policy); err != nil {
			p.shutdownListeners(stopTimeout)
			p.closeEnvs()
			return fmt.Errorf("%s: %w", env.Role, err)
		}
	}
	var serving sync.WaitGroup
	for _, env := range p.envs {
		// Serve also admits the roles' in-process callers (Links).
		serving.Go(func() {
			if err := env.GRPC.Serve(env.Listener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				env.Logger.Error("rpc server stopped", "err", err)
			}
		})
	}
	startedServices := 0
	defer func() {
		p.Health.SetStarted(false)
		for _, err := range stopServices(services[:startedServices], stopTimeout) {
			p.Logger.Error("stop failed", "err", err)
		}
		for _, env := range p.envs {
			stopServer(env.GRPC, stopTimeout)
		}
		serving.Wait()
		p.closeEnvs()
		p.shutdownListeners(stopTimeout)
	}()
	for _, s := range services {
		startedServices++ // Stop must run after a failed Start too
		if err := s.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", s.Name(), err)
		}
	}
	p.Health.SetStarted(true)
	p.Logger.Info("strata ready", "health", p.HealthListenAddr(), "metrics", p.MetricsListenAddr())
	if started != nil {
		started()
	}
	<-ctx.Done()
	p.Logger.Info("shutting down")
	return nil
}

// WaitReady polls the readiness checks until they all pass (true) or ctx
// ends (false).
func (p *Process) WaitReady(ctx context.Context) bool {
	for {
		if _, ok := p.Health.Evaluate(ctx); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *Process) listen() error {
	h, err := opshttp.Listen(p.HealthAddr, p.Health.Handler(), p.Logger)
	if err != nil {
		return err
	}
	p.healthSrv = h
	if p.EnableExporter {
		m, err := opshttp.Listen(p.MetricsAddr, opshttp.MetricsHandler(p.Registry), p.Logger)
		if err != nil {
			p.shutdownListeners(time.Second)
			return err
		}
		p.metricSrv = m
	}
	return nil
}

// HealthListenAddr returns the bound health address ("" before Run).
func (p *Process) HealthListenAddr() string {
	if p.healthSrv == nil {
		return ""
	}
	return p.healthSrv.Addr()
}

// MetricsListenAddr returns the bound metrics address ("" when disabled).
func (p *Process) MetricsListenAddr() string {
	if p.metricSrv == nil {
		return ""
	}
	return p.metricSrv.Addr()
}

func (p *Process) shutdownListeners(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if p.healthSrv != nil {
		p.healthSrv.Close(ctx)
	}
	if p.metricSrv != nil {
		p.metricSrv.Close(ctx)
	}
}

// Close releases the role environments of a process that will not Run (a
// later role failed to build). Run releases them itself.
func (p *Process) Close() { p.closeEnvs() }

func (p *Process) closeEnvs() {
	for _, env := range p.envs {
		env.Clients.Close()
		env.Listener.Close()
		if p.Links != nil {
			p.Links.Unregister(env.AdvertiseRPC, env.GRPC)
		}
	}
}

// stopServer drains in-flight RPCs, forcing a stop after timeout (streams
// such as Watch never end by themselves).
func stopServer(s *rpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		s.Stop()
		<-done
	}
}
