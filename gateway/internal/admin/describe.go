package admin

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// list is LIST: the visible application topics of the cache.
func (a *Handlers) list(_ context.Context, c *command.Call) ([]byte, error) {
	v := a.r.Cache().View()
	if !v.Ready() {
		return nil, errcode.ClusterMetadataUnavailable.New("topic metadata not synced with metad yet", "command", "LIST")
	}
	ts := route.ClientTopics(v)
	out := wire.AppendOKInt(wire.AppendOK(c.Out), "count", int64(len(ts)))
	out = append(out, " topics="...)
	for i, t := range ts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t.GetConfig().GetName()...)
	}
	return out, nil
}

// metadata is METADATA: one topic's configuration and leaders.
func (a *Handlers) metadata(ctx context.Context, c *command.Call) ([]byte, error) {
	name, t, err := a.requiredTopic(ctx, c)
	if err != nil {
		return nil, err
	}
	cfg := t.GetConfig()
	out := wire.AppendOKField(wire.AppendOK(c.Out), "topic", name)
	out = wire.AppendOKInt(out, "partitions", int64(cfg.GetPartitions()))
	// Every partition is served through a gateway, so the leader address a
	// client sees is this gateway's (any gateway routes to the real leader).
	out = append(out, " leaders="...)
	for i := range t.GetPartitions() {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, a.r.Advertised()...)
	}
	out = append(out, " epochs="...)
	for i, p := range t.GetPartitions() {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, p.GetLeaderEpoch(), 10)
	}
	out = wire.AppendOKUint(out, "revision", cfg.GetRevision())
	out = wire.AppendOKInt(out, "replication_factor", int64(cfg.GetReplicationFactor()))
	out = wire.AppendOKBool(out, "idempotent", cfg.GetIdempotent())
	out = wire.AppendOKBool(out, "event_sourcing", cfg.GetEventSourcing())
	out = appendTopicPolicy(out, cfg)
	return wire.AppendOKUint(out, "lifecycle_epoch", cfg.GetLifecycleEpoch()), nil
}

// requiredTopic looks up the topic named by the required topic parameter.
func (a *Handlers) requiredTopic(ctx context.Context, c *command.Call) (string, *metav1.Topic, error) {
	p := param.Read(c.Req, c.Command)
	name := p.Required(param.Topic)
	if err := p.Err(); err != nil {
		return "", nil, err
	}
	t, err := a.r.LookupTopic(ctx, name)
	return name, t, err
}

// describeJSON is the DESCRIBE envelope (WIRE-V2 9.3).
type describeJSON struct {
	Status     string              `json:"status"`
	Topic      string              `json:"topic"`
	Definition describeDefinition  `json:"definition"`
	Partitions []describePartition `json:"partitions"`
}

type describeDefinition struct {
	Name              string         `json:"name"`
	Revision          uint64         `json:"revision"`
	Partitions        int32          `json:"partitions"`
	ReplicationFactor int32          `json:"replication_factor"`
	Idempotent        bool           `json:"idempotent"`
	EventSourcing     bool           `json:"event_sourcing"`
	Policy            describePolicy `json:"policy"`
}

type describePolicy struct {
	CleanupPolicy string `json:"cleanup_policy"`
	Partitioner   string `json:"partitioner"`
	AuthPolicy    string `json:"auth_policy"`
}

type describePartition struct {
	ID       int32    `json:"id"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	ISR      []string `json:"isr"`
	LEO      uint64   `json:"leo"`
	HWM      uint64   `json:"hwm"`
}

// describe is DESCRIBE: the topic's definition and partitions as JSON.
func (a *Handlers) describe(ctx context.Context, c *command.Call) ([]byte, error) {
	name, t, err := a.requiredTopic(ctx, c)
	if err != nil {
		return nil, err
	}
	cfg := t.GetConfig()
	// Offsets are best effort: a partition whose leader is unreachable is
	// described with its committed HWM checkpoint.
	offs, _ := route.Offsets(ctx, a.r, t, nil)
	d := describeJSON{Status: "OK", Topic: name, Definition: describeDefinition{
		Name: cfg.GetName(), Revision: cfg.GetRevision(), Partitions: cfg.GetPartitions(), ReplicationFactor: cfg.GetReplicationFactor(),
		Idempotent: cfg.GetIdempotent(), EventSourcing: cfg.GetEventSourcing(),
		Policy: describePolicy{CleanupPolicy: cfg.GetCleanupPolicy(), Partitioner: cfg.GetPartitioner(), AuthPolicy: cfg.GetAuthPolicy()},
	}, Partitions: []describePartition{}}
	for _, p := range t.GetPartitions() {
		dp := describePartition{ID: p.GetId(), Replicas: nonNil(p.GetReplicas()), ISR: nonNil(p.GetIsr())}
		if p.GetLeader() != "" {
			dp.Leader = a.r.Advertised()
		}
		dp.LEO, dp.HWM = currentOffsets(offs, p)
		d.Partitions = append(d.Partitions, dp)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, errcode.Internal.New("describe: " + err.Error())
	}
	return append(c.Out, b...), nil
}

// currentOffsets returns a partition's LEO and HWM as its leader reported
// them in offs, or the committed HWM checkpoint for both when the leader did
// not answer.
func currentOffsets(offs map[int32]*partitionv1.PartitionOffsets, p *metav1.PartitionState) (leo, hwm uint64) {
	if o, ok := offs[p.GetId()]; ok && o.GetError() == nil {
		return o.GetLeo(), o.GetHwm()
	}
	return p.GetCommittedHwm(), p.GetCommittedHwm()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// listOffsets is LIST_OFFSETS: earliest, latest, LEO and HWM of one or
// every partition, from the partition leaders. With the Strata extension
// parameter timestamp=<unix ms>, each entry also carries time=<offset>:
// the first offset whose batch holds a timestamp at or after it, within
// [earliest, hwm] (hwm when nothing committed is that late), through
// partitiond's time index — what `strata consume --from @TIME` and
// `group reset-offsets --to-datetime` use.
func (a *Handlers) listOffsets(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	name := p.RequiredNamingCommand(param.Topic)
	part, hasPart := p.OptPartition()
	var at *int64
	if ts, ok := p.OptIntIfSet("timestamp", 0, math.MaxInt64); ok {
		at = &ts
	}
	// isolation=read_committed (a Strata extension parameter, as on
	// CONSUME) adds lso=<last stable offset> to each entry: the end of what
	// a read_committed reader sees, what its lag is measured against. Off
	// by default so SDK parsers see the documented entry unchanged.
	withLSO := false
	switch v := strings.ToLower(c.Req.Value("isolation")); v {
	case "", "read_uncommitted":
	case "read_committed":
		withLSO = true
	default:
		p.Check(param.Invalid("isolation", v, "must be read_committed or read_uncommitted"))
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	t, err := a.r.LookupTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	var parts []int32
	if hasPart {
		if int(part) >= len(t.GetPartitions()) {
			return nil, errcode.PartitionNotFound.New("partition does not exist", "topic", name, "partition", strconv.Itoa(int(part)))
		}
		parts = []int32{part}
	} else {
		for _, p := range t.GetPartitions() {
			parts = append(parts, p.GetId())
		}
	}
	var offs map[int32]*partitionv1.PartitionOffsets
	err = a.r.Retry(ctx, func() error {
		t, err = a.r.LookupTopic(ctx, name)
		if err != nil {
			return err
		}
		offs, err = route.OffsetsAt(ctx, a.r, t, parts, at)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "topic", name)
	out = wire.AppendOKInt(out, "partitions", int64(len(t.GetPartitions())))
	out = append(out, " offsets="...)
	for i, id := range parts {
		o, ok := offs[id]
		if !ok {
			return nil, errcode.PartitionNotFound.New("partition offsets unavailable", "topic", name, "partition", strconv.Itoa(int(id)))
		}
		if e := o.GetError(); e != nil {
			return nil, errcode.FromProto(e)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, 'P')
		out = strconv.AppendInt(out, int64(id), 10)
		out = strconv.AppendUint(append(out, ":earliest="...), o.GetEarliest(), 10)
		out = strconv.AppendUint(append(out, ":latest="...), o.GetLatest(), 10)
		out = strconv.AppendUint(append(out, ":leo="...), o.GetLeo(), 10)
		out = strconv.AppendUint(append(out, ":hwm="...), o.GetHwm(), 10)
		if at != nil {
			out = strconv.AppendUint(append(out, ":time="...), o.GetOffsetForTime(), 10)
		}
		if withLSO {
			out = strconv.AppendUint(append(out, ":lso="...), o.GetLso(), 10)
		}
	}
	return out, nil
}
