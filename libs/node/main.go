package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/telemetry"
)

// Common holds the settings every role process shares. Role binaries embed
// it as the top level of their configuration file.
type Common struct {
	NodeID  string `yaml:"node_id" help:"node id (1-64 of [A-Za-z0-9._-]); must match the certificate identity"`
	DataDir string `yaml:"data_dir" help:"data directory of this node"`
	// RPCListen is the internal gRPC (mTLS) bind address.
	RPCListen    string   `yaml:"rpc_listen" help:"internal gRPC bind address (host:port)"`
	RPCAdvertise string   `yaml:"rpc_advertise" help:"internal gRPC address other nodes dial (default: the bound address)"`
	MetadAddrs   []string `yaml:"metad_addrs" help:"metad internal gRPC addresses (comma separated)"`
	TLS          TLS      `yaml:"tls"`
	// Spec 4.1/4.2 listener settings, with the spec's environment names.
	OpsHost         string        `yaml:"ops_host" help:"bind host of the health and metrics listeners"`
	HealthCheckPort int           `yaml:"health_check_port" env:"HEALTH_CHECK_PORT" help:"health listener port (/live, /ready)"`
	ExporterPort    int           `yaml:"exporter_port" env:"EXPORTER_PORT" help:"metrics listener port (/metrics)"`
	EnableExporter  bool          `yaml:"enable_exporter" env:"ENABLE_EXPORTER" help:"serve the metrics listener"`
	Log             Log           `yaml:"log"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"graceful shutdown bound"`
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

// DefaultCommon returns the defaults shared by role binaries; rpcPort is the
// role's default internal port.
func DefaultCommon(rpcPort int) Common {
	return Common{
		NodeID:          hostnameOr("node-1"),
		DataDir:         "./data",
		RPCListen:       ":" + strconv.Itoa(rpcPort),
		MetadAddrs:      []string{"127.0.0.1:9190"},
		HealthCheckPort: 9080,
		ExporterPort:    9100,
		EnableExporter:  true,
		Log:             Log{Format: "text", Level: "info"},
		ShutdownTimeout: 15 * time.Second,
	}
}

func hostnameOr(def string) string {
	h, err := os.Hostname()
	if err != nil || pki.ValidNodeID(h) != nil {
		return def
	}
	return h
}

// Addr joins the ops host with a port.
func (c Common) opsAddr(port int) string { return net.JoinHostPort(c.OpsHost, strconv.Itoa(port)) }

// Binary describes a role binary for Main.
type Binary[C any] struct {
	// Name is the binary and role name, e.g. "partitiond".
	Name  string
	Role  pki.Role
	Usage string
	// Config returns the defaults; Common returns the embedded common part.
	Config func() *C
	Common func(*C) *Common
	// Build constructs the role on its environment.
	Build func(env *RoleEnv, cfg *C) (Role, error)
}

// Main runs a role binary: `<name> [flags]` serves; `<name> healthcheck
// [--url URL]` probes a /ready endpoint and exits 0 only on 200 (the
// container probe of a FROM scratch image). It returns the exit code.
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
	common := b.Common(cfg)
	log, err := telemetry.NewLogger(stderr, common.Log.Format, common.Log.Level)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log.Info("effective configuration", "binary", b.Name, "settings", loader.Effective())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tracing, err := telemetry.Setup(ctx, "strata-"+b.Name)
	if err != nil {
		log.Error("tracing setup", "err", err)
		return 1
	}
	defer tracing.Close()
	proc := NewProcess(log, tracing)
	proc.HealthAddr = common.opsAddr(common.HealthCheckPort)
	proc.MetricsAddr = common.opsAddr(common.ExporterPort)
	proc.EnableExporter = common.EnableExporter
	env, err := proc.NewRoleEnv(RoleOptions{Role: b.Role, NodeID: common.NodeID, TLSFiles: common.TLS.Files(),
		Listen: common.RPCListen, Advertise: common.RPCAdvertise, DataDir: common.DataDir})
	if err != nil {
		log.Error("startup failed", "err", err)
		return 1
	}
	role, err := b.Build(env, cfg)
	if err != nil {
		proc.Close()
		log.Error("startup failed", "err", err)
		return 1
	}
	if err := proc.Run(ctx, []Role{role}, common.ShutdownTimeout, nil); err != nil {
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
