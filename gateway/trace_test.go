package gateway

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

// TestCommandTraceSpansInternalHops checks that one client command is one
// trace: the gateway's "<operation> <topic>" span and the server spans of
// the metad (CREATE) and partitiond (PUBLISH) calls share its trace id.
func TestCommandTraceSpansInternalHops(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := telemetry.WithProcessor(rec)
	c := startClusterWith(t, clusterOptions{tracing: tr})
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("CREATE topic=traced partitions=1")
	cl.OK("PUBLISH topic=traced partition=0 producerId=p message=x")

	find := func(pred func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
		for _, s := range rec.Ended() {
			if pred(s) {
				return s
			}
		}
		return nil
	}
	for _, hop := range []struct{ op, method string }{{"CREATE traced", "MetadataService/CreateTopic"}, {"publish traced", "PartitionService/Append"}} {
		root := find(func(s sdktrace.ReadOnlySpan) bool { return s.Name() == hop.op })
		if root == nil {
			t.Fatalf("no gateway span %q", hop.op)
		}
		if !hasAttr(root, "messaging.system", "strata") || !hasAttr(root, "messaging.destination.name", "traced") {
			t.Fatalf("%s: missing messaging.system=strata or messaging.destination.name=traced: %v", hop.op, root.Attributes())
		}
		// A server span ends after its response is sent, so it may end
		// just after the client saw the reply.
		var srv sdktrace.ReadOnlySpan
		looptest.Eventually(t, "server span of "+hop.method, func() bool {
			srv = find(func(s sdktrace.ReadOnlySpan) bool {
				return strings.HasSuffix(s.Name(), hop.method) && s.SpanKind().String() == "server"
			})
			return srv != nil
		})
		if srv.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Fatalf("%s: server span in trace %s, gateway span in %s", hop.method, srv.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key && kv.Value.AsString() == value {
			return true
		}
	}
	return false
}

// TestPublishSpanFollowsMessagingConventions checks the semantic-convention
// attributes of a publish and a group receive.
func TestPublishSpanFollowsMessagingConventions(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	c := startClusterWith(t, clusterOptions{tracing: telemetry.WithProcessor(rec)})
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("CREATE topic=conv partitions=2")
	cl.OK("PUBLISH topic=conv partition=1 producerId=p message=x")
	cl.OK("CONSUME topic=conv partition=1 offset=0 group=g member=m")
	want := map[string]map[string]string{
		"publish conv": {"messaging.system": "strata", "messaging.operation.name": "publish", "messaging.operation.type": "send",
			"messaging.destination.name": "conv", "messaging.destination.partition.id": "1", "strata.command": "PUBLISH"},
		"receive conv": {"messaging.operation.name": "receive", "messaging.operation.type": "receive",
			"messaging.destination.name": "conv", "messaging.destination.partition.id": "1", "messaging.consumer.group.name": "g"},
	}
	for name, attrs := range want {
		var span sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == name {
				span = s
			}
		}
		if span == nil {
			t.Fatalf("no span %q", name)
		}
		for k, v := range attrs {
			if !hasAttr(span, k, v) {
				t.Errorf("%s: want %s=%s, have %v", name, k, v, span.Attributes())
			}
		}
	}
}

// TestBackgroundWorkIsNotSampled runs commands under telemetry's
// CommandSampler with a background ratio of 0: every recorded span belongs
// to the trace of a client command, none to background work (metadata
// watches, registrations, heartbeats) that ran meanwhile.
func TestBackgroundWorkIsNotSampled(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	c := startClusterWith(t, clusterOptions{tracing: telemetry.WithProcessor(rec, sdktrace.WithSampler(telemetry.CommandSampler(0)))})
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("CREATE topic=bg partitions=1")
	cl.OK("PUBLISH topic=bg partition=0 producerId=p message=x")
	commands := map[string]bool{}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == telemetry.CommandAttribute {
				commands[s.SpanContext().TraceID().String()] = true
			}
		}
	}
	if len(commands) < 2 {
		t.Fatalf("%d command traces recorded, want CREATE and PUBLISH", len(commands))
	}
	for _, s := range rec.Ended() {
		if !commands[s.SpanContext().TraceID().String()] {
			t.Errorf("span %q (%s) belongs to no client command", s.Name(), s.SpanKind())
		}
	}
}
