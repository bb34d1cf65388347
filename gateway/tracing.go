package gateway

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/libs/wire"
)

// messagingOps names the commands that are messaging operations in the
// OpenTelemetry messaging semantic conventions: the span is named
// "<operation> <destination>" and carries messaging.operation.type. Other
// commands (admin, groups) keep their command name.
var messagingOps = map[wire.Command]struct{ name, kind string }{
	wire.CmdPublish:        {"publish", "send"},
	wire.CmdTxnPublish:     {"publish", "send"},
	wire.CmdAppendStream:   {"publish", "send"},
	wire.CmdConsume:        {"receive", "receive"},
	wire.CmdStream:         {"receive", "receive"},
	wire.CmdReadStream:     {"receive", "receive"},
	wire.CmdCommitOffset:   {"commit", "settle"},
	wire.CmdBatchCommit:    {"commit", "settle"},
	wire.CmdFetchOffset:    {"fetch_offset", ""},
	wire.CmdListOffsets:    {"list_offsets", ""},
	wire.CmdBrowseMessages: {"receive", "receive"},
}

// paramValues is the part of a decoded request commandSpan reads.
type paramValues interface{ Value(string) string }

// commandSpan returns the name and options of a client command's span:
// messaging semantic-convention attributes (system, operation, destination,
// partition, consumer group) and telemetry.CommandAttribute, which makes
// the command a sampled root while background work is not.
func commandSpan(cmd wire.Command, r paramValues) (string, []trace.SpanStartOption) {
	name := cmd.String()
	opName := name
	attrs := []attribute.KeyValue{telemetry.CommandAttribute.String(name), attribute.String("messaging.system", "strata")}
	if op, ok := messagingOps[cmd]; ok {
		opName = op.name
		if op.kind != "" {
			attrs = append(attrs, attribute.String("messaging.operation.type", op.kind))
		}
	}
	attrs = append(attrs, attribute.String("messaging.operation.name", opName))
	spanName := opName
	if topic := r.Value("topic"); topic != "" {
		spanName += " " + topic
		attrs = append(attrs, attribute.String("messaging.destination.name", topic))
	}
	if p := r.Value("partition"); p != "" {
		attrs = append(attrs, attribute.String("messaging.destination.partition.id", p))
	}
	if g := r.Value("group"); g != "" {
		attrs = append(attrs, attribute.String("messaging.consumer.group.name", g))
	}
	return spanName, []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
}
