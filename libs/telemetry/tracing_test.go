package telemetry

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

var otelEnv = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_TRACES_SAMPLER"}

func setEnv(t *testing.T, env map[string]string) {
	for _, k := range otelEnv {
		t.Setenv(k, env[k])
	}
}

// TestSetupFollowsTheOTELEnvironment checks which environments enable
// tracing: nothing configured is off (no collector is dialled), the
// autoexport exporters (OTLP over gRPC or HTTP, console) are on, "none"
// and OTEL_SDK_DISABLED are off, and a ratio outside [0, 1] is refused.
func TestSetupFollowsTheOTELEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		ratio   float64
		enabled bool
		fails   bool
	}{
		{name: "unset", enabled: false},
		{name: "none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, enabled: true},
		{name: "otlp grpc by endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, enabled: true},
		{name: "otlp http", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, enabled: true},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}},
		{name: "bad ratio", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, ratio: 2, fails: true},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "carrier-pigeon"}, fails: true},
		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, fails: true},
		{name: "unknown traces protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			tr, err := Setup(context.Background(), Options{ServiceName: "test", BackgroundSampleRatio: tc.ratio})
			if tc.fails {
				if err == nil {
					t.Fatal("Setup succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if tr.Enabled != tc.enabled {
				t.Fatalf("enabled = %v, want %v", tr.Enabled, tc.enabled)
			}
		})
	}
}

// TestCommandSampler samples command roots always, background roots at the
// ratio, and children as their parent.
func TestCommandSampler(t *testing.T) {
	s := CommandSampler(0)
	root := func(attrs ...attribute.KeyValue) sdktrace.SamplingDecision {
		return s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: trace.TraceID{1}, Name: "x", Attributes: attrs}).Decision
	}
	if d := root(CommandAttribute.String("PUBLISH")); d != sdktrace.RecordAndSample {
		t.Errorf("command root: %v", d)
	}
	if d := root(attribute.String("rpc.method", "Watch")); d != sdktrace.Drop {
		t.Errorf("background root at ratio 0: %v", d)
	}
	if d := CommandSampler(1).ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: trace.TraceID{1}}).Decision; d != sdktrace.RecordAndSample {
		t.Errorf("background root at ratio 1: %v", d)
	}
	sampledParent := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled}))
	if d := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: sampledParent, TraceID: trace.TraceID{1}}).Decision; d != sdktrace.RecordAndSample {
		t.Errorf("child of a sampled parent: %v", d)
	}
}

// exportOne sets tracing up from env, ends one command span and flushes it.
func exportOne(t *testing.T, env map[string]string) {
	t.Helper()
	setEnv(t, env)
	tr, err := Setup(context.Background(), Options{ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled {
		t.Fatal("tracing not enabled")
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "PUBLISH", trace.WithAttributes(CommandAttribute.String("PUBLISH")))
	span.End()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// traceCollector is an OTLP gRPC receiver that keeps the span names it got.
type traceCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *traceCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *traceCollector) add(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
}

func (c *traceCollector) got() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.names, ",")
}

// TestSpanExporterSelection exports a span through the exporter each
// environment selects and checks it arrives over that transport: OTLP over
// HTTP by default, over gRPC by OTEL_EXPORTER_OTLP_PROTOCOL, the traces
// protocol variable winning over the general one, and the console exporter.
func TestSpanExporterSelection(t *testing.T) {
	grpcCol := &traceCollector{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, grpcCol)
	go gs.Serve(lis)
	defer gs.Stop()
	grpcURL := "http://" + lis.Addr().String()

	httpCol := &traceCollector{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
			return
		}
		httpCol.add(req)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer hs.Close()

	for _, tc := range []struct {
		name string
		env  map[string]string
		want *traceCollector
	}{
		{name: "default is http/protobuf", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": hs.URL}, want: httpCol},
		{name: "otlp http/protobuf", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": hs.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, want: httpCol},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": grpcURL, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: grpcCol},
		{name: "traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": grpcURL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, want: grpcCol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := grpcCol
			if tc.want == grpcCol {
				other = httpCol
			}
			want, unchanged := tc.want.got()+",PUBLISH", other.got()
			exportOne(t, tc.env)
			if got := tc.want.got(); strings.TrimPrefix(got, ",") != strings.TrimPrefix(want, ",") {
				t.Fatalf("the expected receiver got %q, want %q", got, want)
			}
			if got := other.got(); got != unchanged {
				t.Fatalf("the other receiver got %q too", got)
			}
		})
	}

	t.Run("console", func(t *testing.T) {
		// stdouttrace writes to the os.Stdout of its package's init, so the
		// file descriptor itself is redirected for the export.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		saved, err := syscall.Dup(1)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Dup3(int(w.Fd()), 1, 0); err != nil {
			t.Fatal(err)
		}
		out := make(chan []byte)
		go func() { b, _ := io.ReadAll(r); out <- b }()
		exportOne(t, map[string]string{"OTEL_TRACES_EXPORTER": "console"})
		if err := syscall.Dup3(saved, 1, 0); err != nil {
			t.Fatal(err)
		}
		syscall.Close(saved)
		w.Close()
		if b := <-out; !bytes.Contains(b, []byte(`"Name":"PUBLISH"`)) {
			t.Fatalf("console exporter printed %q", b)
		}
	})
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
