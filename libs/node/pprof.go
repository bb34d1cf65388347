package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"time"
)

// PprofEnv names the environment variable that, when set to a loopback
// host:port, serves net/http/pprof for the whole process (every role of the
// all-in-one shares it; every binary honours it, so the processes of a
// cluster can be profiled one by one). Port 0 picks a free port, logged as
// "pprof listening" (several processes on one host with one environment).
// It is off by default and refuses non-loopback addresses so profiles
// (which expose memory contents) never leave the host.
const PprofEnv = "STRATA_PPROF_ADDR"

// PprofContentionEnv, set to 1 together with PprofEnv, also records where
// goroutines block and which mutexes they wait on (/debug/pprof/block and
// /debug/pprof/mutex). Off unless asked for: sampling blocking events costs
// CPU on every channel operation and lock, which would skew the figures of
// an ordinary CPU profile.
const PprofContentionEnv = "STRATA_PPROF_CONTENTION"

// Contention sampling when PprofContentionEnv is on: every blocking event of
// 10 µs or more (shorter ones in proportion) and one mutex contention in
// 100.
const (
	blockProfileRateNs = 10_000
	mutexProfileFrac   = 100
)

// startPprof binds the profiling listener when PprofEnv is set. It returns a
// stop function (a no-op when profiling is off).
func startPprof(log *slog.Logger) (func(), error) {
	addr := os.Getenv(PprofEnv)
	if addr == "" {
		return func() {}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", PprofEnv, addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%s=%q must be a loopback IP address", PprofEnv, addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bind %s %s: %w", PprofEnv, addr, err)
	}
	contention := os.Getenv(PprofContentionEnv) == "1"
	if contention {
		runtime.SetBlockProfileRate(blockProfileRateNs)
		runtime.SetMutexProfileFraction(mutexProfileFrac)
	}
	log.Info("pprof listening", "addr", lis.Addr().String(), "contention", contention)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Serve ends with ErrServerClosed on Shutdown; profiling is a debug
		// aid, so any other end is not worth failing the process for.
		_ = srv.Serve(lis)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		if contention {
			runtime.SetBlockProfileRate(0)
			runtime.SetMutexProfileFraction(0)
		}
	}, nil
}
