package opshttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strataio/strata/libs/buildinfo"
)

// Server is a bound HTTP listener.
type Server struct {
	srv  *http.Server
	lis  net.Listener
	done chan struct{}
}

// Listen binds addr synchronously (returning the bind error) and serves h.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("opshttp: bind %s: %w", addr, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		lis:  lis,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("ops http server stopped", "addr", addr, "err", err)
		}
	}()
	return s, nil
}

// Addr returns the bound address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close shuts the server down gracefully within ctx.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	<-s.done
	return err
}

// MetricsHandler serves only /metrics (GET and HEAD) from g, in Prometheus
// text or OpenMetrics format by content negotiation.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	prom := promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		prom.ServeHTTP(w, r)
	})
}

// NewRegistry returns a process registry with the Go runtime and process
// collectors and strata_build_info registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	bi := buildinfo.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_build_info",
		Help:        "Always 1; the labels say which Strata build this process runs.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "go_version": bi.GoVersion}})
	build.Set(1)
	reg.MustRegister(collectorsGo(), collectorsProcess(), build)
	return reg
}
