package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing is a process's tracer provider and propagator.
type Tracing struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	// Enabled reports whether spans are exported anywhere.
	Enabled  bool
	shutdown func(context.Context) error
}

// Shutdown flushes and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// CloseTimeout bounds the final flush of Close: an unreachable collector
// must not hold a stopping process (compose and Kubernetes kill it after
// their grace period otherwise).
const CloseTimeout = 5 * time.Second

// Close flushes the last spans and stops the exporter, waiting at most
// CloseTimeout.
func (t *Tracing) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	defer cancel()
	return t.Shutdown(ctx)
}

// Disabled returns a no-op tracing setup that still propagates trace
// context received from callers.
func Disabled() *Tracing {
	return &Tracing{Provider: noop.NewTracerProvider(), Propagator: propagator()}
}

func propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Setup builds tracing from the standard environment:
//
//   - OTEL_SDK_DISABLED=true disables everything;
//   - OTEL_TRACES_EXPORTER=otlp|console|none chooses the exporter; when unset,
//     OTLP is used if OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, else tracing is off;
//   - the OTLP exporter speaks gRPC and reads its own OTEL_EXPORTER_OTLP_*
//     settings (endpoint, insecure, headers, timeout);
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the resource
//     (serviceName is the default), OTEL_TRACES_SAMPLER[_ARG] pick the sampler.
func Setup(ctx context.Context, serviceName string) (*Tracing, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return Disabled(), nil
	}
	exporter := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")))
	if exporter == "" {
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			exporter = "otlp"
		} else {
			exporter = "none"
		}
	}
	var exp sdktrace.SpanExporter
	var err error
	switch exporter {
	case "none":
		return Disabled(), nil
	case "otlp":
		exp, err = otlptracegrpc.New(ctx)
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	default:
		return nil, fmt.Errorf("telemetry: unsupported OTEL_TRACES_EXPORTER %q (otlp, console, none)", exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: create %s exporter: %w", exporter, err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(serviceName)),
		resource.Environment(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return WithExporter(exp, res), nil
}

// WithExporter builds enabled tracing around a span exporter (tests pass an
// in-memory exporter or recorder).
func WithExporter(exp sdktrace.SpanExporter, res *resource.Resource) *Tracing {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp)}
	if res != nil {
		opts = append(opts, sdktrace.WithResource(res))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracing{Provider: tp, Propagator: propagator(), Enabled: true, shutdown: tp.Shutdown}
}

// WithProcessor builds enabled tracing around a span processor, e.g.
// tracetest.NewSpanRecorder() in tests.
func WithProcessor(sp sdktrace.SpanProcessor) *Tracing {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp))
	return &Tracing{Provider: tp, Propagator: propagator(), Enabled: true, shutdown: tp.Shutdown}
}
