package fsm

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// spec is one row of the command table.
type spec struct {
	typ    Type
	name   string
	newMsg func() proto.Message
	apply  func(tx *txn, payload proto.Message) (any, error)
}

// registry is the command table: every command metad replicates, its
// payload type and its handler. Handlers return the response the proposer
// hands back to its caller (a metav1 response message, or a Go struct for
// commands no RPC answers directly).
var registry = map[Type]*spec{}

// typeByMessage maps a payload message type to its command type for Encode.
var typeByMessage = map[protoreflect.FullName]Type{}

func init() {
	add(TypeInitCluster, "INIT_CLUSTER", applyInitCluster)
	add(TypeCreateTopic, "CREATE_TOPIC", applyCreateTopic)
	add(TypeAlterTopicConfig, "ALTER_TOPIC_CONFIG", applyAlterTopicConfig)
	add(TypeDeleteTopic, "DELETE_TOPIC", applyDeleteTopic)
	add(TypeTruncateTopic, "TRUNCATE_TOPIC", applyTruncateTopic)
	add(TypeReportCleanup, "REPORT_CLEANUP", applyReportCleanup)
	add(TypeRegisterNode, "REGISTER_NODE", applyRegisterNode)
	add(TypeNodeHeartbeat, "NODE_HEARTBEAT", applyNodeHeartbeat)
	add(TypeReconcile, "RECONCILE", applyReconcile)
	add(TypeElectLeader, "ELECT_LEADER", applyElectLeader)
	add(TypeAlterIsr, "ALTER_ISR", applyAlterIsr)
	add(TypeCheckpointHwm, "CHECKPOINT_HWM", applyCheckpointHwm)
	add(TypeShutdownNode, "SHUTDOWN_NODE", applyShutdownNode)
}

// add registers a typed handler. Each payload message type belongs to
// exactly one command, so Encode can infer the type.
func add[T proto.Message, R any](typ Type, name string, fn func(*txn, T) (R, error)) {
	var zero T
	full := zero.ProtoReflect().Descriptor().FullName()
	if _, dup := registry[typ]; dup {
		panic("fsm: duplicate command type " + name)
	}
	if _, dup := typeByMessage[full]; dup {
		panic("fsm: payload " + string(full) + " registered twice")
	}
	registry[typ] = &spec{
		typ:    typ,
		name:   name,
		newMsg: func() proto.Message { return zero.ProtoReflect().New().Interface() },
		apply: func(tx *txn, m proto.Message) (any, error) {
			r, err := fn(tx, m.(T))
			if err != nil {
				return nil, err
			}
			return r, nil
		},
	}
	typeByMessage[full] = typ
}
