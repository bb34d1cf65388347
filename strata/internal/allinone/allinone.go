// Package allinone runs every Strata role in one process: metad as a single
// Raft voter, one partitiond, one coordinatord and one gateway. It is the
// composite of the four role modules, hosted by the same node.Main as the
// role binaries. Each role keeps its own certificate identity, gRPC server
// and loopback listener, so the laptop run goes through exactly the
// internal mTLS hops of a split deployment; only the client, health and
// metrics listeners face the user.
package allinone

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/telemetry"

	"github.com/strataio/strata/coordinatord"
	"github.com/strataio/strata/gateway"
	"github.com/strataio/strata/metad"
	"github.com/strataio/strata/partitiond"
)

// Config is the all-in-one configuration: the process settings plus one
// section per role with that role's own settings.
type Config struct {
	node.ProcessConfig `yaml:",inline"`

	Metad        metad.Config        `yaml:"metad"`
	Partitiond   partitiond.Config   `yaml:"partitiond"`
	Coordinatord coordinatord.Config `yaml:"coordinatord"`
	Gateway      gateway.Config      `yaml:"gateway"`

	// InternalTLS makes the roles talk mTLS over loopback TCP, as separate
	// processes do, instead of calling each other directly in process (docs/decisions.md).
	InternalTLS bool `yaml:"internal_tls" help:"roles talk mTLS over loopback TCP instead of direct in-process calls (debugging the split deployment's transport)"`
}

// DefaultConfig returns the embedded defaults: node id "local", data in
// ./data, the client listener on :9000, health on :9080, metrics on :9100
// when enabled (off by default on a laptop).
func DefaultConfig() Config {
	pc := node.DefaultProcessConfig()
	pc.NodeID = "local"
	pc.EnableExporter = false
	md := metad.DefaultConfig()
	// The lone voter needs no well-known port (nobody dials it): a free
	// loopback port unless --metad.raft-listen says otherwise.
	md.RaftListen = "127.0.0.1:0"
	return Config{
		ProcessConfig: pc,
		Metad:         md,
		Partitiond:    partitiond.DefaultConfig(),
		Coordinatord:  coordinatord.DefaultConfig(),
		Gateway:       gateway.DefaultConfig(),
	}
}

// hosted are the roles of the process with a certificate each (admin is the
// operator tools' identity, issued alongside).
var hosted = []pki.Role{pki.RoleMetad, pki.RolePartitiond, pki.RoleCoordinatord, pki.RoleGateway, pki.RoleAdmin}

// Server is a built all-in-one process, ready to Run.
type Server struct {
	cfg     Config
	dataDir string
	files   map[pki.Identity]pki.Files
	proc    *node.Process

	services []node.Service

	// Filled by the module inits, in dependency order.
	metadAddrs []string
	gateway    *gateway.Role
	rpc        map[pki.Role]string
}

// New builds every role on a new process: certificates (created on first
// start under <data_dir>/certs), then the four modules in dependency order,
// each on its own RoleEnv on a loopback port.
func New(cfg Config, log *slog.Logger, tracing *telemetry.Tracing) (*Server, error) {
	s, err := newServer(cfg, cfg.NewProcess(log, tracing))
	if err != nil {
		return nil, err
	}
	s.services, err = node.InitModules(s.modules(), cfg.ShutdownTimeout)
	if err != nil {
		s.proc.Close()
		return nil, err
	}
	return s, nil
}

// newServer prepares the layout of the roles on proc: the data directory
// and the local certificates.
func newServer(cfg Config, proc *node.Process) (*Server, error) {
	if err := pki.ValidNodeID(cfg.NodeID); err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if !cfg.InternalTLS {
		proc.Links = rpc.NewLinks()
	}
	s := &Server{cfg: cfg, dataDir: dataDir, proc: proc, rpc: map[pki.Role]string{}}
	ids := make([]pki.Identity, 0, len(hosted))
	for _, r := range hosted {
		ids = append(ids, s.identity(r))
	}
	s.files, err = pki.EnsureLocal(filepath.Join(dataDir, "certs"), ids)
	if err != nil {
		return nil, fmt.Errorf("local certificates: %w", err)
	}
	return s, nil
}

// modules are the four roles as data: metad first (the others dial it),
// partitiond (it stores __consumer_offsets), coordinatord, then the gateway
// in front of all three. Stopping runs in reverse.
func (s *Server) modules() []node.Module {
	return []node.Module{
		{Name: "metad", Init: s.initMetad},
		{Name: "partitiond", Deps: []string{"metad"}, Init: s.initPartitiond},
		{Name: "coordinatord", Deps: []string{"metad", "partitiond"}, Init: s.initCoordinatord},
		{Name: "gateway", Deps: []string{"metad", "partitiond", "coordinatord"}, Init: s.initGateway},
	}
}

// identity is a hosted role's certificate identity. metad registers nodes
// by id across roles, so each role gets its own: <node_id>-<role> (e.g.
// local-partitiond).
func (s *Server) identity(r pki.Role) pki.Identity {
	return pki.Identity{Role: r, NodeID: s.cfg.NodeID + "-" + string(r)}
}

// env binds role r's environment: its certificate, a loopback RPC port and
// <data_dir>/<role>.
func (s *Server) env(r pki.Role) (*node.RoleEnv, error) {
	id := s.identity(r)
	e, err := s.proc.NewRoleEnv(node.RoleOptions{
		Role: r, NodeID: id.NodeID, TLSFiles: s.files[id],
		Listen: "127.0.0.1:0", DataDir: filepath.Join(s.dataDir, string(r)),
	})
	if err != nil {
		return nil, err
	}
	s.rpc[r] = e.AdvertiseRPC
	return e, nil
}

func (s *Server) initMetad() (node.Service, error) {
	env, err := s.env(pki.RoleMetad)
	if err != nil {
		return nil, err
	}
	s.metadAddrs = []string{env.AdvertiseRPC}
	cfg := s.cfg.Metad
	cfg.SingleVoter()
	return metad.New(env, cfg)
}

// initDependent builds a role that dials metad: its environment, then the
// role from its section cfg with metad's loopback address set through
// metadAddrs (a field of *cfg).
func initDependent[C any, R node.Service](s *Server, role pki.Role, cfg *C, metadAddrs *[]string,
	newRole func(*node.RoleEnv, C) (R, error)) (R, error) {
	env, err := s.env(role)
	if err != nil {
		var zero R
		return zero, err
	}
	*metadAddrs = s.metadAddrs
	return newRole(env, *cfg)
}

func (s *Server) initPartitiond() (node.Service, error) {
	cfg := s.cfg.Partitiond
	return initDependent(s, pki.RolePartitiond, &cfg, &cfg.MetadAddrs, partitiond.New)
}

func (s *Server) initCoordinatord() (node.Service, error) {
	cfg := s.cfg.Coordinatord
	return initDependent(s, pki.RoleCoordinatord, &cfg, &cfg.MetadAddrs, coordinatord.New)
}

func (s *Server) initGateway() (node.Service, error) {
	cfg := s.cfg.Gateway
	gw, err := initDependent(s, pki.RoleGateway, &cfg, &cfg.MetadAddrs, gateway.New)
	if err != nil {
		return nil, err
	}
	s.gateway = gw
	return gw, nil
}

// Run serves until ctx is done; started (optional) runs once /ready may pass.
func (s *Server) Run(ctx context.Context, started func()) error {
	return s.proc.Run(ctx, s.services, s.cfg.ShutdownTimeout, started)
}

// WaitReady polls the readiness checks until they all pass (true) or ctx
// ends (false).
func (s *Server) WaitReady(ctx context.Context) bool { return s.proc.WaitReady(ctx) }

// ClientAddr is the bound Wire v2 client address (after start).
func (s *Server) ClientAddr() string { return s.gateway.ClientAddr() }

// RPCAddr returns the internal gRPC (mTLS) address of a hosted role, for
// operator tools holding a certificate from <data_dir>/certs.
func (s *Server) RPCAddr(r pki.Role) string { return s.rpc[r] }

// RPCServices lists what each hosted role serves on its internal gRPC
// server and the role policy guarding it.
func (s *Server) RPCServices() []node.RoleRPC { return s.proc.RPCServices() }

// HealthAddr is the bound health listener address (after start).
func (s *Server) HealthAddr() string { return s.proc.HealthListenAddr() }

// MetricsAddr is the bound metrics listener address ("" when disabled).
func (s *Server) MetricsAddr() string { return s.proc.MetricsListenAddr() }

// dialable turns a wildcard bind address ([::]:9000) into one a user on
// this machine can connect to (127.0.0.1:9000).
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Main is `strata run`: node.Main hosting the four role modules.
// Precedence: flags > STRATA_* environment > --config file > defaults.
func Main(args []string, stdout, stderr io.Writer) int {
	var srv *Server // built by Modules, announced by Ready
	humanReady := true
	return node.Main(node.Binary[Config]{
		Name:         "strata run",
		TraceService: "strata",
		Usage:        "Runs metad, partitiond, coordinatord and gateway in one process.",
		Config: func() *Config {
			cfg := DefaultConfig()
			return &cfg
		},
		Process: func(c *Config) *node.ProcessConfig { return &c.ProcessConfig },
		Modules: func(p *node.Process, c *Config) ([]node.Module, error) {
			var err error
			// A JSON log is for machines: the human line on stdout
			// would be the one line that is not JSON.
			humanReady = c.Log.Format != "json"
			srv, err = newServer(*c, p)
			if err != nil {
				return nil, err
			}
			return srv.modules(), nil
		},
		// Tell the user once /ready answers 200 (every role registered and
		// metadata synced), not merely once the listeners are up.
		Ready: func(p *node.Process, stdout io.Writer) {
			p.Logger.Info("strata is ready", "client", srv.ClientAddr(), "health", srv.HealthAddr(), "metrics", srv.MetricsAddr())
			if !humanReady {
				return
			}
			fmt.Fprintf(stdout, "Strata is ready: Wire v2 clients connect to %s (health http://%s/ready)\n", dialable(srv.ClientAddr()), dialable(srv.HealthAddr()))
		},
	}, args, stdout, stderr)
}
