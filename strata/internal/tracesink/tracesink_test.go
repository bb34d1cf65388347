package tracesink

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is written by the gRPC handler and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExportWithRealExporter sends a parent and a child span through the
// OTel SDK's OTLP gRPC exporter and checks the lines the sink prints.
func TestExportWithRealExporter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	srvCtx, stopSrv := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- Serve(srvCtx, lis, out) }()
	defer func() {
		stopSrv()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(lis.Addr().String()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "strata-test"))),
	)
	parentCtx, parent := tp.Tracer("t").Start(ctx, "PUBLISH")
	_, child := tp.Tracer("t").Start(parentCtx, "Append")
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("exporter shutdown: %v", err)
	}

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), out.String())
	}
	byName := map[string]Span{}
	for _, l := range lines {
		var s Span
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		byName[s.Name] = s
	}
	p, c := byName["PUBLISH"], byName["Append"]
	psc, csc := parent.SpanContext(), child.SpanContext()
	if p.TraceID != psc.TraceID().String() || p.SpanID != psc.SpanID().String() || p.ParentSpanID != "" || p.Service != "strata-test" {
		t.Errorf("parent line %+v, want trace %s span %s no parent service strata-test", p, psc.TraceID(), psc.SpanID())
	}
	if c.TraceID != psc.TraceID().String() || c.SpanID != csc.SpanID().String() || c.ParentSpanID != psc.SpanID().String() || c.Service != "strata-test" {
		t.Errorf("child line %+v, want trace %s span %s parent %s", c, psc.TraceID(), csc.SpanID(), psc.SpanID())
	}
}

func TestMainRejectsBadUsage(t *testing.T) {
	var stderr bytes.Buffer
	if rc := Main([]string{"extra"}, &bytes.Buffer{}, &stderr); rc != 2 {
		t.Errorf("extra argument: rc %d, want 2", rc)
	}
	if rc := Main([]string{"--listen", "256.0.0.1:1"}, &bytes.Buffer{}, &stderr); rc != 1 {
		t.Errorf("bad listen address: rc %d, want 1", rc)
	}
	if rc := Main([]string{"--help"}, &bytes.Buffer{}, &stderr); rc != 0 {
		t.Errorf("--help: rc %d, want 0", rc)
	}
}
