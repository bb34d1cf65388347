package server

import (
	"fmt"
	"time"

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
	MaxConnections  int    `yaml:"max_connections" help:"concurrent client connections; the next one is refused"`
	// IdleTimeout is the read timeout of an idle connection (spec 8): the
	// server reads again when it expires and does not disconnect.
	IdleTimeout time.Duration `yaml:"idle_timeout" help:"idle read timeout (the connection stays open)"`
	// HandshakeTimeout bounds the wait for the negotiation frame.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout" help:"time a new connection has to send its negotiation frame"`
	// FrameTimeout bounds the time from a frame's first byte to its last;
	// a client that stalls mid-frame is disconnected.
	FrameTimeout time.Duration `yaml:"frame_timeout" help:"time to receive a whole frame once it started"`
	WriteTimeout time.Duration `yaml:"write_timeout" help:"time to write one response frame"`
	// MaxFrameBytes bounds encoded and decoded payload lengths, checked on
	// the header before any allocation (spec 8: 267,108,864).
	MaxFrameBytes uint32 `yaml:"max_frame_bytes" help:"largest accepted frame payload (encoded and decoded)"`
	// RequestTimeout bounds one command's internal calls.
	RequestTimeout time.Duration `yaml:"request_timeout" help:"deadline of one client command inside the cluster"`
	// MetadAddrs are metad RPC addresses (the process-level metad_addrs
	// when empty).
	MetadAddrs []string `yaml:"metad_addrs" help:"metad internal gRPC addresses (default: the process metad_addrs)"`
	// StreamInterval is the STREAM push period (spec 8: about 100 ms).
	StreamInterval time.Duration `yaml:"stream_interval" help:"STREAM push interval"`
	// StreamKeepalive is how long a STREAM may stay silent before an empty
	// keepalive frame is sent.
	StreamKeepalive time.Duration `yaml:"stream_keepalive" help:"STREAM keepalive interval"`
	// RouteRetries bounds how often a command follows NOT_LEADER /
	// NOT_COORDINATOR answers (refreshing metadata in between).
	RouteRetries int `yaml:"route_retries" help:"internal redirects followed per command"`
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
		RouteRetries:     5,
	}
}

func (c *Config) validate() error {
	switch {
	case c.ClientListen == "":
		return fmt.Errorf("gateway: client_listen is empty")
	case c.MaxConnections <= 0:
		return fmt.Errorf("gateway: max_connections must be positive")
	case c.IdleTimeout <= 0 || c.HandshakeTimeout <= 0 || c.FrameTimeout <= 0 || c.WriteTimeout <= 0 || c.RequestTimeout <= 0:
		return fmt.Errorf("gateway: timeouts must be positive")
	case c.MaxFrameBytes < 1024:
		return fmt.Errorf("gateway: max_frame_bytes must be at least 1024")
	case c.StreamInterval <= 0 || c.StreamKeepalive <= 0:
		return fmt.Errorf("gateway: stream intervals must be positive")
	case len(c.MetadAddrs) == 0:
		return fmt.Errorf("gateway: metad_addrs is empty")
	}
	if c.RouteRetries < 1 {
		c.RouteRetries = 1
	}
	return nil
}
