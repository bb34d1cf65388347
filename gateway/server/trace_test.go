package server

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/libs/wire"
)

// TestCommandTraceSpansInternalHops checks that one client command is one
// trace: the gateway's "<operation> <topic>" span and the server spans of
// the metad (CREATE) and partitiond (PUBLISH) calls share its trace id.
func TestCommandTraceSpansInternalHops(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := telemetry.WithProcessor(rec)
	c := startClusterTraced(t, nil, tr)
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("CREATE topic=traced partitions=1")
	cl.ok("PUBLISH topic=traced producerId=p message=x")

	find := func(pred func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
		for _, s := range rec.Ended() {
			if pred(s) {
				return s
			}
		}
		return nil
	}
	for _, hop := range []struct{ op, method string }{{"CREATE traced", "MetadataService/CreateTopic"}, {"PUBLISH traced", "PartitionService/Append"}} {
		root := find(func(s sdktrace.ReadOnlySpan) bool { return s.Name() == hop.op })
		if root == nil {
			t.Fatalf("no gateway span %q", hop.op)
		}
		if !hasAttr(root, "messaging.system", "strata") {
			t.Fatalf("%s: missing messaging.system=strata", hop.op)
		}
		// A server span ends after its response is sent, so it may end
		// just after the client saw the reply.
		var srv sdktrace.ReadOnlySpan
		eventually(t, "server span of "+hop.method, func() bool {
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
