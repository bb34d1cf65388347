// Package eventsourcing holds the gateway's event-sourcing commands
// (SERVICE-SPEC 2.5, 4.8): APPEND_STREAM, READ_STREAM, STREAM_VERSION,
// SAVE_SNAPSHOT, READ_SNAPSHOT, READ_STREAM_HISTORY, AGGREGATE_REPLAY_PROOF
// and AGGREGATE_EVENT_RANGE_READ. Each runs on the
// leader of the aggregate's partition (FNV-1a of the key, whatever the
// topic's partitioner) through partitiond's StreamService; the gateway
// builds the event record and the reply texts and envelopes.
// docs/event-sourcing.md describes the model.
package eventsourcing

import (
	"context"
	"strconv"

	"google.golang.org/grpc"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"
)

// The parameters event-sourcing commands require by name; the reference
// broker has no missing_<name> code for them.
var (
	keyParam     = param.Name{Key: "key", Missing: errcode.MissingParameter}
	versionParam = param.Name{Key: "version", Missing: errcode.MissingParameter}
)

// Handlers are the event-sourcing commands over a Router.
type Handlers struct {
	r route.Router
}

// New returns the event-sourcing commands routed through r.
func New(r route.Router) *Handlers { return &Handlers{r: r} }

// Register implements command.Family.
func (h *Handlers) Register(t *command.Table) {
	t.Handle(wire.CmdAppendStream, h.appendStream)
	t.Handle(wire.CmdReadStream, h.readStream)
	t.Handle(wire.CmdStreamVersion, h.streamVersion)
	t.Handle(wire.CmdSaveSnapshot, h.saveSnapshot)
	t.Handle(wire.CmdReadSnapshot, h.readSnapshot)
	t.Handle(wire.CmdReadStreamHistory, h.readStreamHistory)
	t.Handle(wire.CmdAggregateReplayProof, h.aggregateReplayProof)
	t.Handle(wire.CmdAggregateEventRangeRead, h.aggregateEventRangeRead)
	t.Handle(wire.CmdTxnAppendStream, h.txnAppendStream)
}

// stream is a resolved aggregate: its topic and partition.
type stream struct {
	topic *metav1.Topic
	name  string
	key   string
	part  int32
}

// lookup reads a stream command's topic and key, then what more reads
// (nil: nothing more), and resolves the aggregate's stream; a parameter
// error comes before any lookup.
func (h *Handlers) lookup(ctx context.Context, c *command.Call, more func(p *param.Reader)) (*stream, error) {
	p := param.Read(c.Req, c.Command)
	topic, key := p.Required(param.Topic), p.Required(keyParam)
	if more != nil {
		more(&p)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return h.resolve(ctx, topic, key)
}

// resolve looks the topic up and places the key: event sourcing must be on.
func (h *Handlers) resolve(ctx context.Context, topic, key string) (*stream, error) {
	t, err := h.r.LookupTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !t.GetConfig().GetEventSourcing() {
		return nil, errcode.EventSourcingNotEnabled.New("the topic was not created with event_sourcing=true", "topic", topic)
	}
	n := int32(len(t.GetPartitions()))
	if n == 0 {
		return nil, errcode.PartitionNotFound.New("topic has no partitions", "topic", topic)
	}
	return &stream{topic: t, name: topic, key: key, part: placement.KeyPartitionString(key, n)}, nil
}

// replay reports whether s's topic is an aggregate replay topic.
func (s *stream) replay() bool { return s.topic.GetConfig().GetAggregateReplay() }

// ref is the StreamRef of s at topic t's lifecycle epoch.
func (s *stream) ref(t *metav1.Topic) *streamv1.StreamRef {
	return &streamv1.StreamRef{Topic: s.name, Partition: s.part, LifecycleEpoch: t.GetConfig().GetLifecycleEpoch(), Key: s.key}
}

// StreamMethod is a StreamServiceClient method expression.
type StreamMethod[Req, Resp any] = func(streamv1.StreamServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// toLeader calls method on the leader of s's partition, following leader
// moves while the answer says the request was not applied (route.Retry and
// route.Reroutable), so even APPEND_STREAM is safe to repeat here.
func toLeader[Req, Resp any](ctx context.Context, r route.Router, s *stream, method StreamMethod[Req, Resp], build func(*metav1.Topic) Req) (Resp, error) {
	var resp Resp
	err := r.Retry(ctx, func() error {
		t, leader, err := r.PartitionLeader(ctx, s.name, s.part)
		if err != nil {
			return err
		}
		cc, err := r.Conn(leader)
		if err != nil {
			return err
		}
		resp, err = method(streamv1.NewStreamServiceClient(cc), ctx, build(t))
		return route.LeaderErr(r, s.name, err)
	})
	return resp, err
}

func utoa(v uint64) string { return strconv.FormatUint(v, 10) }
