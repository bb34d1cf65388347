package records

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

const (
	defaultGroup = "default-group"
	// maxFetchRecords is the broker-side cap per CONSUME/STREAM fetch
	// (WIRE-V2 section 3; also the spec's default batch).
	maxFetchRecords = 8192
	// MaxFetchWait is the broker-side cap on a CONSUME long poll; the
	// gateway adds it to CONSUME's request timeout.
	MaxFetchWait = 30 * time.Second
	// maxFetchBytes bounds one fetch so the batch frame stays within what
	// every public SDK accepts.
	maxFetchBytes = wire.PublicMaxPayload - (1 << 20)
)

// readArgs are the parsed parameters of CONSUME and STREAM.
type readArgs struct {
	topic     string
	partition int32
	group     string
	member    string
	hasOffset bool
	offset    uint64
	latest    bool // autoOffsetReset=latest
	isolation partitionv1.Isolation
	batch     uint32
	wait      time.Duration
}

// parseReadArgs reads CONSUME's parameters, or STREAM's (stream: the offset
// is optional, the group required and the member optional).
func parseReadArgs(r *wire.Request, cmd wire.Command, stream bool) (readArgs, error) {
	var a readArgs
	p := param.Read(r, cmd)
	a.topic, a.partition = p.Required(param.Topic), p.Partition()
	if stream {
		a.offset, a.hasOffset = p.OptUint("offset", 0)
		// STREAM names the group whose committed offset it resumes from.
		p.Required(param.Group)
		a.member = r.Value("member")
	} else {
		a.offset, a.hasOffset = p.RequiredUint(param.Offset), true
		a.member = p.Required(param.Member)
	}
	a.group = r.Value("group")
	if a.group == "" || a.group == "-" {
		a.group = defaultGroup
	}
	switch v := strings.ToLower(r.Value("autoOffsetReset")); v {
	case "", "earliest":
	case "latest":
		a.latest = true
	default:
		p.Check(param.Invalid("autoOffsetReset", v, "must be earliest or latest"))
	}
	switch v := strings.ToLower(r.Value("isolation")); v {
	case "", "read_committed":
		a.isolation = partitionv1.Isolation_ISOLATION_READ_COMMITTED
	case "read_uncommitted":
		a.isolation = partitionv1.Isolation_ISOLATION_READ_UNCOMMITTED
	default:
		p.Check(param.Invalid("isolation", v, "must be read_committed or read_uncommitted"))
	}
	a.batch = uint32(min(p.OptInt("batch", maxFetchRecords, 1, 1<<31-1), maxFetchRecords))
	a.wait = min(time.Duration(p.OptInt("wait_ms", 0, 0, 1<<31-1))*time.Millisecond, MaxFetchWait)
	return a, p.Err()
}

// matchTopics resolves a topic parameter: a name (which must exist) or a
// '*'/'?' pattern over the visible application topics, sorted.
func (h *Handlers) matchTopics(ctx context.Context, pattern string) ([]*metav1.Topic, error) {
	if !isPattern(pattern) {
		t, err := h.r.LookupTopic(ctx, pattern)
		if err != nil {
			return nil, err
		}
		return []*metav1.Topic{t}, nil
	}
	v := h.r.Cache().View()
	if !v.Ready() {
		return nil, errcode.ClusterMetadataUnavailable.New("topic metadata not synced with metad yet", "command", "CONSUME")
	}
	if len(pattern) > 256 {
		return nil, param.Invalid("topic", pattern, "pattern is longer than 256 bytes")
	}
	var out []*metav1.Topic
	for _, t := range route.ClientTopics(v) {
		if matchPattern(pattern, t.GetConfig().GetName()) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, errcode.TopicNotFound.New("no topic matches the pattern", "topic", param.Clip(pattern))
	}
	return out, nil
}

// startOffset is where a group read begins (placement.Start: the later of
// the committed and the requested offset), else autoOffsetReset (latest: the
// LIST_OFFSETS latest value; earliest: 0).
func (h *Handlers) startOffset(ctx context.Context, t *metav1.Topic, a *readArgs) (uint64, error) {
	resp, err := route.FetchCommitted(ctx, h.r, &coordinatorv1.FetchOffsetRequest{Group: a.group, Topic: t.GetConfig().GetName(), Partition: a.partition})
	if err != nil {
		return 0, err
	}
	start := placement.Start{Committed: resp.GetOffset(), HasCommitted: resp.GetFound(), Requested: a.offset, HasRequested: a.hasOffset}
	if off, ok := start.Offset(); ok {
		return off, nil
	}
	if a.latest {
		offs, err := route.Offsets(ctx, h.r, t, []int32{a.partition})
		if err != nil {
			return 0, err
		}
		if o, ok := offs[a.partition]; ok && o.GetError() == nil {
			return o.GetLatest(), nil
		}
	}
	return 0, nil
}

// readFromStart fetches one partition of t from the group's start offset
// (startOffset) with a.wait of long poll. CONSUME always names an offset,
// and the start is that offset unless the group committed a later one, so
// the fetch at the requested offset starts at once, concurrently with the
// coordinator's FetchOffset (a full round trip that used to come first).
// When the committed offset is not past the requested one — a consumer
// polling with its last delivered offset + 1 — that fetch is exactly the
// read the sequential path would make, and is the answer; otherwise it is
// cancelled (ending its long poll at the leader) and awaited, and the read
// starts at the committed offset. Whatever decides the start, a fetch at
// the offset it picks is the one the sequential path makes.
func (h *Handlers) readFromStart(ctx context.Context, t *metav1.Topic, a *readArgs) (*partitionv1.FetchResponse, error) {
	name := t.GetConfig().GetName()
	type result struct {
		resp *partitionv1.FetchResponse
		err  error
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	spec := make(chan result, 1)
	go func() {
		resp, err := h.fetch(sctx, name, a.partition, a.offset, a.batch, a.wait, a.isolation)
		spec <- result{resp, err}
	}()
	start, err := h.startOffset(ctx, t, a)
	if err == nil && start == a.offset {
		r := <-spec
		return r.resp, r.err
	}
	cancel()
	<-spec // never leave the fetch running past the request
	if err != nil {
		return nil, err
	}
	return h.fetch(ctx, name, a.partition, start, a.batch, a.wait, a.isolation)
}

// maxGapHops bounds the re-reads of one fetch across record-less gaps.
const maxGapHops = 64

// fetch reads from the partition leader, following leader moves. An answer
// with no records whose next offset moved on is a gap a client cannot see
// past (control markers and aborted transactions under read_committed,
// compaction holes): the read goes on from there, so a client polling at
// the offset after its last record never stays stuck in front of a marker.
func (h *Handlers) fetch(ctx context.Context, topic string, part int32, offset uint64, max uint32, wait time.Duration, iso partitionv1.Isolation) (*partitionv1.FetchResponse, error) {
	for range maxGapHops {
		resp, err := h.fetchOnce(ctx, topic, part, offset, max, wait, iso)
		if err != nil || resp.GetRecordCount() > 0 || resp.GetNextOffset() <= offset {
			return resp, err
		}
		offset = resp.GetNextOffset()
	}
	return h.fetchOnce(ctx, topic, part, offset, max, wait, iso)
}

func (h *Handlers) fetchOnce(ctx context.Context, topic string, part int32, offset uint64, max uint32, wait time.Duration, iso partitionv1.Isolation) (*partitionv1.FetchResponse, error) {
	return route.ToLeader(ctx, h.r, topic, part, partitionv1.PartitionServiceClient.Fetch, func(t *metav1.Topic) *partitionv1.FetchRequest {
		return &partitionv1.FetchRequest{Topic: topic, Partition: part, Offset: offset, MaxRecords: max,
			MaxBytes: maxFetchBytes, WaitMs: uint32(wait / time.Millisecond), Isolation: iso, LifecycleEpoch: t.GetConfig().GetLifecycleEpoch()}
	})
}

// batchBuilders pools the builders of consume replies.
var batchBuilders = sync.Pool{New: func() any { return new(wire.BatchBuilder) }}

// appendBatch encodes a fetched record set as a CBV2 batch into out: the
// records are copied once, as stored (offsets already assigned). The
// fetched buffer then goes back to the transport pool (rpc.RecycleRecords):
// resp.Records is nil afterwards and the reply holds the only copy.
func appendBatch(out []byte, topic string, part int32, resp *partitionv1.FetchResponse) ([]byte, error) {
	bb := batchBuilders.Get().(*wire.BatchBuilder)
	defer batchBuilders.Put(bb)
	if err := bb.Reset(out, wire.BatchHeader{Topic: topic, Partition: part, Acks: "1"}); err != nil {
		return nil, err
	}
	recs := resp.GetRecords()
	if len(recs) > 0 {
		resp.Records = nil
		defer rpc.RecycleRecords(recs)
		if err := bb.AppendRecords(recs); err != nil {
			return nil, err
		}
	}
	return bb.Bytes()
}

// countDelivered counts records and bytes of a fetch delivered to a client.
func (h *Handlers) countDelivered(topic string, records uint32, bytes int) {
	h.m.ConsumeRecords.WithLabelValues(topic).Add(float64(records))
	h.m.ConsumeBytes.WithLabelValues(topic).Add(float64(bytes))
}

// consume is CONSUME: one batch from the start offset, long-polling up to
// wait_ms for records.
func (h *Handlers) consume(ctx context.Context, c *command.Call) ([]byte, error) {
	a, err := parseReadArgs(c.Req, c.Command, false)
	if err != nil {
		return nil, err
	}
	topics, err := h.matchTopics(ctx, a.topic)
	if err != nil {
		return nil, err
	}
	if len(topics) == 1 {
		t := topics[0]
		if int(a.partition) >= len(t.GetPartitions()) {
			return nil, errcode.PartitionNotFound.New("partition does not exist", "topic", t.GetConfig().GetName(), "partition", strconv.Itoa(int(a.partition)))
		}
		resp, err := h.readFromStart(ctx, t, &a)
		if err != nil {
			return nil, err
		}
		h.countDelivered(t.GetConfig().GetName(), resp.GetRecordCount(), len(resp.GetRecords()))
		return appendBatch(c.Out, t.GetConfig().GetName(), a.partition, resp)
	}
	// A batch frame carries one topic, so a pattern is served by the first
	// matching topic (in name order) that has records at its start offset.
	starts := make([]uint64, len(topics))
	for i, t := range topics {
		if int(a.partition) >= len(t.GetPartitions()) {
			starts[i] = ^uint64(0)
			continue
		}
		if starts[i], err = h.startOffset(ctx, t, &a); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(a.wait)
	for {
		for i, t := range topics {
			if starts[i] == ^uint64(0) {
				continue
			}
			// Several topics: poll each without waiting at a leader.
			name := t.GetConfig().GetName()
			resp, err := h.fetch(ctx, name, a.partition, starts[i], a.batch, 0, a.isolation)
			if err != nil {
				return nil, err
			}
			if resp.GetRecordCount() > 0 {
				h.countDelivered(name, resp.GetRecordCount(), len(resp.GetRecords()))
				return appendBatch(c.Out, name, a.partition, resp)
			}
		}
		if !time.Now().Before(deadline) {
			return appendBatch(c.Out, topics[0].GetConfig().GetName(), a.partition, &partitionv1.FetchResponse{})
		}
		select {
		case <-ctx.Done():
			return nil, errcode.From(ctx.Err())
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}
