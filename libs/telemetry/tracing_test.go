package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

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
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_SAMPLER"} {
				t.Setenv(k, tc.env[k])
			}
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
