package gateway

import (
	"fmt"
	"time"

	"github.com/strataio/strata/gateway/internal/auth"
	"github.com/strataio/strata/libs/certprincipal"
	"github.com/strataio/strata/libs/clienttls"
	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/wire"
)

// Config holds the gateway role settings (the `gateway:` section of a
// configuration file).
type Config struct {
	// ClientListen is the Wire v2 client listener; ":9000" binds every IPv4
	// and IPv6 address.
	ClientListen string `yaml:"client_listen" help:"Wire v2 client listener address (host:port)"`
	// ClientAdvertise is the address handed to clients (METADATA leaders,
	// FIND_COORDINATOR, NOT_LEADER). Default: the bound address, with the
	// internal RPC host when the listener binds every address.
	ClientAdvertise string `yaml:"client_advertise" help:"client address advertised to clients (default: derived from the bound address)"`
	MaxConnections  int    `yaml:"max_connections" min:"1" help:"concurrent client connections; the next one is refused"`
	// IdleTimeout is the read timeout of an idle connection (spec 8): the
	// server reads again when it expires and does not disconnect.
	IdleTimeout time.Duration `yaml:"idle_timeout" min:"1ns" help:"idle read timeout (the connection stays open)"`
	// HandshakeTimeout bounds the wait for the negotiation frame.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout" min:"1ns" help:"time a new connection has to send its negotiation frame"`
	// FrameTimeout bounds the time from a frame's first byte to its last;
	// a client that stalls mid-frame is disconnected.
	FrameTimeout time.Duration `yaml:"frame_timeout" min:"1ns" help:"time to receive a whole frame once it started"`
	WriteTimeout time.Duration `yaml:"write_timeout" min:"1ns" help:"time to write one response frame"`
	// MaxFrameBytes bounds encoded and decoded payload lengths, checked on
	// the header before any allocation (spec 8: 267,108,864).
	MaxFrameBytes uint32 `yaml:"max_frame_bytes" min:"1024" help:"largest accepted frame payload (encoded and decoded)"`
	// RequestTimeout bounds one command's internal calls.
	RequestTimeout time.Duration `yaml:"request_timeout" min:"1ns" help:"deadline of one client command inside the cluster"`
	// MetadAddrs are metad RPC addresses (the process-level metad_addrs
	// when empty).
	MetadAddrs []string `yaml:"metad_addrs" help:"metad internal gRPC addresses (default: the process metad_addrs)"`
	// StreamInterval is the STREAM push period (spec 8: about 100 ms).
	StreamInterval time.Duration `yaml:"stream_interval" min:"1ns" help:"STREAM push interval"`
	// StreamKeepalive is how long a STREAM may stay silent before an empty
	// keepalive frame is sent.
	StreamKeepalive time.Duration `yaml:"stream_keepalive" min:"1ns" help:"STREAM keepalive interval"`
	// RouteRetries bounds how often a command follows NOT_LEADER /
	// NOT_COORDINATOR answers (refreshing metadata in between), and
	// RouteRetryWait how long it keeps doing so: a partition without a
	// reachable leader (an election under way) answers a typed, retryable
	// error after about that long instead of holding the client until its
	// timeout.
	RouteRetries   int           `yaml:"route_retries" help:"internal redirects followed per command"`
	RouteRetryWait time.Duration `yaml:"route_retry_wait" help:"how long a command follows redirects and waits out a leader election before answering"`

	// Client authentication and authorization (spec 5, docs/security.md).
	EnableSASL bool `yaml:"enable_sasl" env:"ENABLE_SASL" help:"require client authentication (AUTH or principal=/auth_token=) for protected commands"`
	// SASLPrincipals are `<name>:<permission>[+<permission>...]:<token
	// hash>` entries; hashes come from `strata auth hash-token`.
	SASLPrincipals []string `yaml:"sasl_principals" secret:"true" help:"client principals: name:perm[+perm...]:token-hash (strata auth hash-token)"`
	// AuthFailureDelay is added before a failed authentication is answered.
	AuthFailureDelay time.Duration `yaml:"auth_failure_delay" help:"delay before answering a failed authentication"`
	// AuthFailureLimit failed authentications per AuthFailureWindow are
	// verified per client IP; beyond that attempts are refused unverified.
	AuthFailureLimit  int           `yaml:"auth_failure_limit" help:"failed authentications per client IP and window before attempts are refused"`
	AuthFailureWindow time.Duration `yaml:"auth_failure_window" help:"window of auth_failure_limit"`
	// DiagnosticsOnly runs the gateway without its client listener (spec
	// 4.1 diagnostics-only mode): health, metrics and the metadata watch
	// run, /ready fails with the diagnostics_only check (and reports the
	// other checks, consumer_metadata included), no client can connect and
	// the gateway does not register itself with metad.
	DiagnosticsOnly bool `yaml:"diagnostics_only" help:"diagnostics-only mode: serve health and metrics, never open the client listener"`

	// TLS on the client listener (spec 5.7; docs/security.md "TLS on the
	// client listener"). Off unless TLSCert and TLSKey are set; the files
	// are re-read when they change.
	TLSCert       string `yaml:"tls_cert" help:"client listener TLS certificate chain (PEM); with tls_key enables TLS 1.2+"`
	TLSKey        string `yaml:"tls_key" help:"client listener TLS private key (PEM)"`
	TLSClientCA   string `yaml:"tls_client_ca" help:"CA bundle (PEM) verifying client certificates"`
	TLSClientAuth string `yaml:"tls_client_auth" help:"client certificates: none, request (verify when given) or require"`
	// TLSPrincipalRule maps a verified client certificate to a principal
	// name (libs/certprincipal).
	TLSPrincipalRule string `yaml:"tls_principal_rule" help:"client certificate to principal: cn, dn, san-email, san-dns, san-uri or regex:<re>/<replacement>"`
}

// clientTLS is the TLS part of the configuration.
func (c *Config) clientTLS() clienttls.ServerFiles {
	return clienttls.ServerFiles{Cert: c.TLSCert, Key: c.TLSKey, ClientCA: c.TLSClientCA, ClientAuth: clienttls.ClientAuth(c.TLSClientAuth)}
}

// DefaultConfig returns the spec defaults.
func DefaultConfig() Config {
	return Config{
		ClientListen:     ":9000",
		MaxConnections:   1000,
		IdleTimeout:      5 * time.Second,
		HandshakeTimeout: 10 * time.Second,
		FrameTimeout:     30 * time.Second,
		WriteTimeout:     30 * time.Second,
		MaxFrameBytes:    wire.ServerMaxPayload,
		RequestTimeout:   15 * time.Second,
		StreamInterval:   100 * time.Millisecond,
		StreamKeepalive:  time.Second,
		RouteRetries:     50,
		RouteRetryWait:   time.Second,

		AuthFailureDelay:  time.Second,
		AuthFailureLimit:  10,
		AuthFailureWindow: time.Minute,
	}
}

// authConfig is the auth package's part of the configuration.
func (c *Config) authConfig() auth.Config {
	return auth.Config{Enabled: c.EnableSASL, Principals: c.SASLPrincipals, FailureDelay: c.AuthFailureDelay,
		FailureLimit: c.AuthFailureLimit, FailureWindow: c.AuthFailureWindow}
}

func (c *Config) validate() error {
	if err := config.Check("gateway", c); err != nil {
		return err
	}
	switch {
	case c.ClientListen == "":
		return fmt.Errorf("gateway: client_listen is empty")
	case len(c.MetadAddrs) == 0:
		return fmt.Errorf("gateway: metad_addrs is empty")
	}
	if err := c.clientTLS().Validate(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if _, err := certprincipal.Parse(c.TLSPrincipalRule); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if c.RouteRetryWait <= 0 {
		c.RouteRetryWait = time.Second
	}
	if c.RouteRetries < 1 {
		c.RouteRetries = 1
	}
	return nil
}
