// Package allinone runs every Strata role in one process: metad as a single
// Raft voter, one partitiond, one coordinatord and one gateway. Each role keeps
// its own certificate identity, gRPC server and loopback listener, so the
// laptop run goes through exactly the internal mTLS hops of a split
// deployment; only the client, health and metrics listeners face the user.
package allinone

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/telemetry"

	coordserver "github.com/strataio/strata/coordinatord/server"
	gatewayserver "github.com/strataio/strata/gateway/server"
	metadserver "github.com/strataio/strata/metad/server"
	partitionserver "github.com/strataio/strata/partitiond/server"
)

// Config is the all-in-one configuration: the process settings plus one
// section per role with that role's own settings.
type Config struct {
	NodeID          string        `yaml:"node_id" help:"node id prefix: each role registers as <node_id>-<role>"`
	DataDir         string        `yaml:"data_dir" help:"data directory (certs/ and one folder per role)"`
	OpsHost         string        `yaml:"ops_host" help:"bind host of the health and metrics listeners"`
	HealthCheckPort int           `yaml:"health_check_port" env:"HEALTH_CHECK_PORT" help:"health listener port (/live, /ready)"`
	ExporterPort    int           `yaml:"exporter_port" env:"EXPORTER_PORT" help:"metrics listener port (/metrics)"`
	EnableExporter  bool          `yaml:"enable_exporter" env:"ENABLE_EXPORTER" help:"serve the metrics listener"`
	Log             node.Log      `yaml:"log"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"graceful shutdown bound"`

	Metad        metadserver.Config     `yaml:"metad"`
	Partitiond   partitionserver.Config `yaml:"partitiond"`
	Coordinatord coordserver.Config     `yaml:"coordinatord"`
	Gateway      gatewayserver.Config   `yaml:"gateway"`
}

// DefaultConfig returns the embedded defaults: data in ./data, the client
// listener on :9000, health on :9080, metrics on :9100 when enabled.
func DefaultConfig() Config {
	return Config{
		NodeID:          "local",
		DataDir:         "./data",
		HealthCheckPort: 9080,
		ExporterPort:    9100,
		Log:             node.Log{Format: "text", Level: "info"},
		ShutdownTimeout: 15 * time.Second,
		Metad:           metadserver.DefaultConfig(),
		Partitiond:      partitionserver.DefaultConfig(),
		Coordinatord:    coordserver.DefaultConfig(),
		Gateway:         gatewayserver.DefaultConfig(),
	}
}

// Server is a built all-in-one process, ready to Run.
type Server struct {
	proc    *node.Process
	roles   []node.Role
	gateway interface{ ClientAddr() string }
	timeout time.Duration
	rpc     map[pki.Role]string
}

// New builds every role: certificates (created on first start under
// <data_dir>/certs), one RoleEnv per role on loopback port 0, metad first so
// the others learn its address.
func New(cfg Config, log *slog.Logger, tracing *telemetry.Tracing) (*Server, error) {
	if err := pki.ValidNodeID(cfg.NodeID); err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	roles := []pki.Role{pki.RoleMetad, pki.RolePartitiond, pki.RoleCoordinatord, pki.RoleGateway, pki.RoleAdmin}
	// metad registers nodes by id across roles, so each hosted role gets its
	// own id: <node_id>-<role> (e.g. local-partitiond).
	idOf := func(r pki.Role) string { return cfg.NodeID + "-" + string(r) }
	ids := make([]pki.Identity, 0, len(roles))
	for _, r := range roles {
		ids = append(ids, pki.Identity{Role: r, NodeID: idOf(r)})
	}
	files, err := pki.EnsureLocal(filepath.Join(dataDir, "certs"), ids)
	if err != nil {
		return nil, fmt.Errorf("local certificates: %w", err)
	}

	proc := node.NewProcess(log, tracing)
	proc.HealthAddr = hostPort(cfg.OpsHost, cfg.HealthCheckPort)
	proc.MetricsAddr = hostPort(cfg.OpsHost, cfg.ExporterPort)
	proc.EnableExporter = cfg.EnableExporter
	s := &Server{proc: proc, timeout: cfg.ShutdownTimeout}

	s.rpc = map[pki.Role]string{}
	env := func(r pki.Role) (*node.RoleEnv, error) {
		e, err := proc.NewRoleEnv(node.RoleOptions{
			Role: r, NodeID: idOf(r), TLSFiles: files[pki.Identity{Role: r, NodeID: idOf(r)}],
			Listen: "127.0.0.1:0", DataDir: filepath.Join(dataDir, string(r)),
		})
		if err == nil {
			s.rpc[r] = e.AdvertiseRPC
		}
		return e, err
	}
	fail := func(err error) (*Server, error) {
		proc.Close()
		return nil, err
	}

	metadEnv, err := env(pki.RoleMetad)
	if err != nil {
		return fail(err)
	}
	metadAddrs := []string{metadEnv.AdvertiseRPC}
	mcfg := cfg.Metad
	mcfg.SingleVoter(idOf(pki.RoleMetad))
	metad, err := metadserver.New(metadEnv, mcfg)
	if err != nil {
		return fail(fmt.Errorf("metad: %w", err))
	}

	partEnv, err := env(pki.RolePartitiond)
	if err != nil {
		return fail(err)
	}
	pcfg := cfg.Partitiond
	pcfg.MetadAddrs = metadAddrs
	part, err := partitionserver.New(partEnv, pcfg)
	if err != nil {
		return fail(fmt.Errorf("partitiond: %w", err))
	}

	coordEnv, err := env(pki.RoleCoordinatord)
	if err != nil {
		return fail(err)
	}
	ccfg := cfg.Coordinatord
	ccfg.MetadAddrs = metadAddrs
	coord, err := coordserver.New(coordEnv, ccfg)
	if err != nil {
		return fail(fmt.Errorf("coordinatord: %w", err))
	}

	gwEnv, err := env(pki.RoleGateway)
	if err != nil {
		return fail(err)
	}
	gcfg := cfg.Gateway
	gcfg.MetadAddrs = metadAddrs
	gw, err := gatewayserver.New(gwEnv, gcfg)
	if err != nil {
		return fail(fmt.Errorf("gateway: %w", err))
	}
	s.gateway = gw
	s.roles = []node.Role{metad, part, coord, gw}
	return s, nil
}

// Run serves until ctx is done; started (optional) runs once /ready may pass.
func (s *Server) Run(ctx context.Context, started func()) error {
	return s.proc.Run(ctx, s.roles, s.timeout, started)
}

// WaitReady polls the readiness checks until they all pass (true) or ctx
// ends (false).
func (s *Server) WaitReady(ctx context.Context) bool {
	for {
		if _, ok := s.proc.Health.Evaluate(ctx); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ClientAddr is the bound Wire v2 client address (after start).
func (s *Server) ClientAddr() string { return s.gateway.ClientAddr() }

// RPCAddr returns the internal gRPC (mTLS) address of a hosted role, for
// operator tools holding a certificate from <data_dir>/certs.
func (s *Server) RPCAddr(r pki.Role) string { return s.rpc[r] }

// HealthAddr is the bound health listener address (after start).
func (s *Server) HealthAddr() string { return s.proc.HealthListenAddr() }

// MetricsAddr is the bound metrics listener address ("" when disabled).
func (s *Server) MetricsAddr() string { return s.proc.MetricsListenAddr() }

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

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

// Main is `strata run`: flags > STRATA_* environment > --config file > defaults.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	loader, err := config.New(&cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fs := flag.NewFlagSet("strata run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", os.Getenv("STRATA_CONFIG"), "YAML configuration file (env STRATA_CONFIG)")
	loader.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: strata run [flags]\n\nRuns metad, partitiond, coordinatord and gateway in one process.\nPrecedence: flags > environment > config file > defaults.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := loader.Load(*configPath); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log, err := telemetry.NewLogger(stderr, cfg.Log.Format, cfg.Log.Level)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log.Info("effective configuration", "binary", "strata run", "settings", loader.Effective())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tracing, err := telemetry.Setup(ctx, "strata")
	if err != nil {
		log.Error("tracing setup", "err", err)
		return 1
	}
	defer tracing.Close()
	srv, err := New(cfg, log, tracing)
	if err != nil {
		log.Error("startup failed", "err", err)
		return 1
	}
	err = srv.Run(ctx, func() {
		// Listeners are up; tell the user once /ready would answer 200
		// (every role registered and metadata synced).
		go func() {
			if !srv.WaitReady(ctx) {
				return
			}
			log.Info("strata is ready", "client", srv.ClientAddr(), "health", srv.HealthAddr(), "metrics", srv.MetricsAddr())
			fmt.Fprintf(stdout, "Strata is ready: Wire v2 clients connect to %s (health http://%s/ready)\n", dialable(srv.ClientAddr()), dialable(srv.HealthAddr()))
		}()
	})
	if err != nil {
		log.Error("stopped with error", "err", err)
		return 1
	}
	return 0
}
