package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
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

// Options are Strata's own tracing settings; everything else comes from
// the standard OTEL_* environment.
type Options struct {
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
	// or OTEL_RESOURCE_ATTRIBUTES say otherwise.
	ServiceName string
	// BackgroundSampleRatio is the share of background work (root spans
	// that no client command started: replication fetches, metadata
	// watches, heartbeats, checkpoints) that is sampled; client commands
	// are always sampled. Ignored when OTEL_TRACES_SAMPLER is set.
	BackgroundSampleRatio float64
}

// Setup builds tracing from the standard environment:
//
//   - OTEL_SDK_DISABLED=true disables everything;
//   - tracing is off unless OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT
//     or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (a broker should not dial
//     a collector nobody configured);
//   - the exporter follows the OpenTelemetry specification's variables
//     (see spanExporter): OTEL_TRACES_EXPORTER=otlp|console|none, OTLP over
//     gRPC or HTTP by OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL (grpc,
//     http/protobuf), with the exporter's own OTEL_EXPORTER_OTLP_* settings
//     (endpoint, insecure, headers, timeout);
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the resource;
//   - OTEL_TRACES_SAMPLER[_ARG] replace the sampler; without them client
//     commands are sampled and background work at BackgroundSampleRatio.
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return Disabled(), nil
	}
	if os.Getenv("OTEL_TRACES_EXPORTER") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" &&
		os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return Disabled(), nil
	}
	if o.BackgroundSampleRatio < 0 || o.BackgroundSampleRatio > 1 {
		return nil, fmt.Errorf("telemetry: background sample ratio %v is not within [0, 1]", o.BackgroundSampleRatio)
	}
	exp, err := spanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: span exporter: %w", err)
	}
	if exp == nil {
		return Disabled(), nil
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(o.ServiceName)),
		resource.Environment(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		opts = append(opts, sdktrace.WithSampler(CommandSampler(o.BackgroundSampleRatio)))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracing{Provider: tp, Propagator: propagator(), Enabled: true, shutdown: tp.Shutdown}, nil
}

// spanExporter picks the exporter as the OpenTelemetry contrib autoexport
// package does (which Setup used before) for the three exporters a broker
// has a use for: OTEL_TRACES_EXPORTER is otlp (the default), console or none
// (nil, no error); OTLP speaks OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. Anything else is an
// error. autoexport itself is not linked: it imports every exporter of every
// signal (metrics and logs too, a Prometheus bridge), about 1 MB of idle
// RSS in each process that never uses them (docs/performance.md).
func spanExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch name := os.Getenv("OTEL_TRACES_EXPORTER"); name {
	case "", "otlp":
		proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		switch proto {
		case "", "http/protobuf":
			return otlptracehttp.New(ctx)
		case "grpc":
			return otlptracegrpc.New(ctx)
		default:
			return nil, fmt.Errorf("unsupported OTLP protocol %q (want grpc or http/protobuf)", proto)
		}
	case "console":
		return stdouttrace.New()
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("unknown OTEL_TRACES_EXPORTER %q (want otlp, console or none)", name)
	}
}

// CommandAttribute marks the root span of a client command (the gateway
// sets it on every command span): CommandSampler samples those always.
const CommandAttribute = attribute.Key("strata.command")

// CommandSampler samples spans with a parent as their parent was, root spans
// of client commands (carrying CommandAttribute) always, and other root
// spans — background work — at backgroundRatio. A busy cluster's background
// traffic (replica fetches, watches, heartbeats) otherwise buries the few
// traces an operator looks for, and costs export bandwidth.
func CommandSampler(backgroundRatio float64) sdktrace.Sampler {
	return sdktrace.ParentBased(commandRoot{background: sdktrace.TraceIDRatioBased(backgroundRatio)})
}

type commandRoot struct{ background sdktrace.Sampler }

func (s commandRoot) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if a.Key == CommandAttribute {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
				Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
		}
	}
	return s.background.ShouldSample(p)
}

func (s commandRoot) Description() string {
	return "CommandRoot{commands: always, background: " + s.background.Description() + "}"
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
// tracetest.NewSpanRecorder() in tests; opts add provider options (a
// sampler).
func WithProcessor(sp sdktrace.SpanProcessor, opts ...sdktrace.TracerProviderOption) *Tracing {
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(sp)}, opts...)...)
	return &Tracing{Provider: tp, Propagator: propagator(), Enabled: true, shutdown: tp.Shutdown}
}
