package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/telemetry"
)

// ProcessConfig holds the settings of any Strata process, `strata run`
// included: identity, data, the operations listeners, logging and the
// shutdown bound. Binaries embed it inline at the top level of their
// configuration.
type ProcessConfig struct {
	NodeID  string `yaml:"node_id" help:"node id, 1-64 of [A-Za-z0-9._-] (role binaries: must match the certificate identity; strata run: each role registers as <node_id>-<role>)"`
	DataDir string `yaml:"data_dir" help:"data directory of this node (strata run: certs/ and one folder per role)"`
	// Spec 4.1/4.2 listener settings, with the spec's environment names.
	OpsHost         string        `yaml:"ops_host" help:"bind host of the health and metrics listeners"`
	HealthCheckPort int           `yaml:"health_check_port" env:"HEALTH_CHECK_PORT" help:"health listener port (/live, /ready)"`
	ExporterPort    int           `yaml:"exporter_port" env:"EXPORTER_PORT" help:"metrics listener port (/metrics)"`
	EnableExporter  bool          `yaml:"enable_exporter" env:"ENABLE_EXPORTER" help:"serve the metrics listener"`
	Log             Log           `yaml:"log"`
	Trace           Trace         `yaml:"trace"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"graceful shutdown bound"`
}

// Common holds the settings of a role binary: the process settings plus
// where its one role listens, whom it dials and its certificate files.
// Role binaries embed it inline at the top level of their configuration.
type Common struct {
	ProcessConfig `yaml:",inline"`
	// RPCListen is the internal gRPC (mTLS) bind address.
	RPCListen    string   `yaml:"rpc_listen" help:"internal gRPC bind address (host:port)"`
	RPCAdvertise string   `yaml:"rpc_advertise" help:"internal gRPC address other nodes dial (default: the bound address)"`
	MetadAddrs   []string `yaml:"metad_addrs" help:"metad internal gRPC addresses (comma separated)"`
	TLS          TLS      `yaml:"tls"`
}

// TLS names the internal mTLS files.
type TLS struct {
	CA   string `yaml:"ca" help:"cluster CA certificate (PEM)"`
	Cert string `yaml:"cert" help:"this node's certificate (PEM)"`
	Key  string `yaml:"key" help:"this node's private key (PEM)"`
}

// Files returns the pki.Files of t.
func (t TLS) Files() pki.Files { return pki.Files{CA: t.CA, Cert: t.Cert, Key: t.Key} }

// Log configures the process logger.
type Log struct {
	Format string `yaml:"format" help:"log format: text or json"`
	Level  string `yaml:"level" help:"log level: debug, info, warn, error"`
}

// Trace holds Strata's tracing settings; exporters, endpoints and samplers
// come from the standard OTEL_* environment (libs/telemetry).
type Trace struct {
	BackgroundSampleRatio float64 `yaml:"background_sample_ratio" help:"share of background work (replication, metadata watches, heartbeats) traced, 0 to 1; client commands are always traced (ignored when OTEL_TRACES_SAMPLER is set)"`
}

// DefaultProcessConfig returns the process defaults: the host name as node
// id, data in ./data, health on :9080, metrics on :9100 (served), text
// logs at info, a 15 s shutdown bound.
func DefaultProcessConfig() ProcessConfig {
	return ProcessConfig{
		NodeID:          hostnameOr("node-1"),
		DataDir:         "./data",
		HealthCheckPort: 9080,
		ExporterPort:    9100,
		EnableExporter:  true,
		Log:             Log{Format: "text", Level: "info"},
		ShutdownTimeout: 15 * time.Second,
	}
}

// DefaultCommon returns the defaults shared by role binaries; rpcPort is the
// role's default internal port.
func DefaultCommon(rpcPort int) Common {
	return Common{
		ProcessConfig: DefaultProcessConfig(),
		RPCListen:     ":" + strconv.Itoa(rpcPort),
		MetadAddrs:    []string{"127.0.0.1:9190"},
	}
}

func hostnameOr(def string) string {
	h, err := os.Hostname()
	if err != nil || pki.ValidNodeID(h) != nil {
		return def
	}
	return h
}

// NewProcess returns a process whose operations listeners are the ones c
// names.
func (c ProcessConfig) NewProcess(log *slog.Logger, tracing *telemetry.Tracing) *Process {
	p := NewProcess(log, tracing)
	p.HealthAddr = net.JoinHostPort(c.OpsHost, strconv.Itoa(c.HealthCheckPort))
	p.MetricsAddr = net.JoinHostPort(c.OpsHost, strconv.Itoa(c.ExporterPort))
	p.EnableExporter = c.EnableExporter
	return p
}

// RoleModule returns the one module of a role binary: its Init binds the
// role's environment on p as c describes it (certificate files, RPC
// listener, data directory) and builds the role on it with build.
func (c *Common) RoleModule(p *Process, role pki.Role, build func(env *RoleEnv) (Service, error)) Module {
	return Module{Name: string(role), Init: func() (Service, error) {
		env, err := p.NewRoleEnv(RoleOptions{Role: role, NodeID: c.NodeID, TLSFiles: c.TLS.Files(),
			Listen: c.RPCListen, Advertise: c.RPCAdvertise, DataDir: c.DataDir})
		if err != nil {
			return nil, err
		}
		return build(env)
	}}
}

// RoleConfig is a role binary's configuration: Common embedded inline (its
// RoleCommon method is promoted) beside the role's own settings.
type RoleConfig[C any] interface {
	*C
	RoleCommon() *Common
}

// RoleCommon returns c itself, for RoleConfig.
func (c *Common) RoleCommon() *Common { return c }

// MetadAddrsOr returns own, a role section's metad addresses, when set, and
// the binary's top-level metad_addrs otherwise.
func (c *Common) MetadAddrsOr(own []string) []string {
	if len(own) == 0 {
		return c.MetadAddrs
	}
	return own
}

// RoleBinary is the Binary of a role binary: one module, role, hosted on
// the process settings of C's Common; defaults returns C's defaults and
// build makes the role on its environment.
func RoleBinary[C any, P RoleConfig[C]](role pki.Role, usage string, defaults func() P, build func(env *RoleEnv, c P) (Service, error)) Binary[C] {
	return Binary[C]{
		Name:    string(role),
		Usage:   usage,
		Config:  func() *C { return defaults() },
		Process: func(c *C) *ProcessConfig { return &P(c).RoleCommon().ProcessConfig },
		Modules: func(p *Process, c *C) ([]Module, error) {
			return []Module{P(c).RoleCommon().RoleModule(p, role, func(env *RoleEnv) (Service, error) { return build(env, c) })}, nil
		},
	}
}

// Binary describes a Strata server binary for Main: a role binary hosts
// one module, `strata run` the four roles.
type Binary[C any] struct {
	// Name is the command name, e.g. "partitiond" or "strata run".
	Name  string
	Usage string
	// TraceService is the tracing service name (default "strata-" + Name).
	TraceService string
	// Config returns the defaults; Process returns the process settings
	// inside a configuration.
	Config  func() *C
	Process func(*C) *ProcessConfig
	// Modules returns the modules the binary hosts on p, as data; Main
	// builds them in dependency order (InitModules) and runs them.
	Modules func(p *Process, cfg *C) ([]Module, error)
	// Ready, when set, is called once after startup when every readiness
	// check first passes.
	Ready func(p *Process, stdout io.Writer)
}

// Main runs a server binary: `<name> [flags]` serves; `<name> healthcheck
// [--url URL]` probes a /ready endpoint and exits 0 only on 200 (the
// container probe of a FROM scratch image). It returns the exit code: 0
// after a clean shutdown, 1 when startup or shutdown failed, 2 for bad
// flags or configuration.
func Main[C any](b Binary[C], args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "healthcheck" {
		return Healthcheck(args[1:], stderr)
	}
	cfg := b.Config()
	loader, err := config.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fs := flag.NewFlagSet(b.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", os.Getenv("STRATA_CONFIG"), "YAML configuration file (env STRATA_CONFIG)")
	loader.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s [flags]\n       %s healthcheck [--url http://127.0.0.1:9080/ready]\n\n%s\n\nPrecedence: flags > environment > config file > defaults.\n\nFlags:\n", b.Name, b.Name, b.Usage)
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
	pc := b.Process(cfg)
	log, err := telemetry.NewLogger(stderr, pc.Log.Format, pc.Log.Level)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log.Info("effective configuration", "binary", b.Name, "settings", loader.Effective())
	stopPprof, err := startPprof(log)
	if err != nil {
		log.Error("startup failed", "err", err)
		return 1
	}
	defer stopPprof()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	traceService := b.TraceService
	if traceService == "" {
		traceService = "strata-" + b.Name
	}
	tracing, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: traceService, BackgroundSampleRatio: pc.Trace.BackgroundSampleRatio})
	if err != nil {
		log.Error("tracing setup", "err", err)
		return 1
	}
	defer tracing.Close()
	proc := pc.NewProcess(log, tracing)
	mods, err := b.Modules(proc, cfg)
	if err != nil {
		proc.Close()
		log.Error("startup failed", "err", err)
		return 1
	}
	services, err := InitModules(mods, pc.ShutdownTimeout)
	if err != nil {
		proc.Close()
		log.Error("startup failed", "err", err)
		return 1
	}
	// The Ready announcement waits for /ready on its own goroutine, which
	// ends with the run (readyCtx) and is waited for before Main returns.
	readyCtx, endReady := context.WithCancel(ctx)
	var announcing sync.WaitGroup
	err = proc.Run(ctx, services, pc.ShutdownTimeout, func() {
		if b.Ready == nil {
			return
		}
		announcing.Go(func() {
			if proc.WaitReady(readyCtx) {
				b.Ready(proc, stdout)
			}
		})
	})
	endReady()
	announcing.Wait()
	if err != nil {
		log.Error("stopped with error", "err", err)
		return 1
	}
	return 0
}

// Healthcheck GETs a /ready URL and returns 0 on HTTP 200, 1 otherwise.
func Healthcheck(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:9080/ready", "readiness URL to probe")
	timeout := fs.Duration("timeout", 2*time.Second, "request timeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	client := &http.Client{Timeout: *timeout}
	resp, err := client.Get(*url)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "healthcheck:", resp.Status)
		return 1
	}
	return 0
}
