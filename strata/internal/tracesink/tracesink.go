// Package tracesink is a tiny OTLP/gRPC trace receiver for tests and local
// debugging: it accepts the spans OTel SDK exporters send and prints one JSON
// line per span on a writer. The compose test uses it to follow one request
// across roles without pulling a collector image (none can be pulled here).
//
// It speaks plaintext gRPC only: the stack's exporters run with
// OTEL_EXPORTER_OTLP_INSECURE=true on a private network, and the sink keeps
// nothing but what it prints.
package tracesink

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	// Exporters may compress (OTEL_EXPORTER_OTLP_COMPRESSION=gzip).
	_ "google.golang.org/grpc/encoding/gzip"
)

// Span is one printed line.
type Span struct {
	TraceID      string `json:"trace_id"`
	SpanID       string `json:"span_id"`
	ParentSpanID string `json:"parent_span_id"`
	Service      string `json:"service"`
	Name         string `json:"name"`
}

// Sink implements the OTLP TraceService by printing every received span.
type Sink struct {
	coltracepb.UnimplementedTraceServiceServer

	mu  sync.Mutex // one line at a time: concurrent exports must not interleave
	enc *json.Encoder
}

// New returns a sink printing to w.
func New(w io.Writer) *Sink { return &Sink{enc: json.NewEncoder(w)} }

// Export prints the spans of req, one JSON line each.
func (s *Sink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				line := Span{
					TraceID:      hex.EncodeToString(sp.GetTraceId()),
					SpanID:       hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
					Service:      service,
					Name:         sp.GetName(),
				}
				if err := s.enc.Encode(line); err != nil {
					return nil, fmt.Errorf("tracesink: write span: %w", err)
				}
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Serve runs a plaintext gRPC OTLP trace receiver on lis, printing spans to
// w, until ctx is done; it then stops gracefully (in-flight exports finish).
func Serve(ctx context.Context, lis net.Listener, w io.Writer) error {
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, New(w))
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			srv.GracefulStop()
		case <-done:
		}
	}()
	err := srv.Serve(lis)
	close(done)
	<-stopped
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// Main is `strata trace-sink [--listen :4317]`: serve until SIGINT/SIGTERM.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace-sink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":4317", "OTLP/gRPC listen address (plaintext)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: strata trace-sink [--listen :4317]")
		fmt.Fprintln(stderr, "Receive OTLP/gRPC traces (plaintext) and print one JSON line per span on stdout:")
		fmt.Fprintln(stderr, `  {"trace_id","span_id","parent_span_id","service","name"}`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "trace-sink: unexpected arguments %q\n", fs.Args())
		return 2
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "trace-sink: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "trace-sink: listening on %s\n", lis.Addr())
	if err := Serve(ctx, lis, stdout); err != nil {
		fmt.Fprintf(stderr, "trace-sink: %v\n", err)
		return 1
	}
	return 0
}
