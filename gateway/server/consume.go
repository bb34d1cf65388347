package server

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
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
	// maxFetchWait is the broker-side cap on a CONSUME long poll.
	maxFetchWait = 30 * time.Second
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

func parseReadArgs(r *wire.Request, cmd string, stream bool) (readArgs, error) {
	var a readArgs
	var err error
	if a.topic, err = required(r, "topic"); err != nil {
		return a, err
	}
	if _, err = required(r, "partition"); err != nil {
		return a, err
	}
	if a.partition, _, err = partitionParam(r, cmd); err != nil {
		return a, err
	}
	if !stream {
		if _, err = required(r, "offset"); err != nil {
			return a, err
		}
	}
	if a.offset, a.hasOffset, err = optUint(r, "offset", 0); err != nil {
		return a, err
	}
	if stream {
		// STREAM names the group whose committed offset it resumes from.
		if _, err = required(r, "group"); err != nil {
			return a, err
		}
		a.member = r.Value("member")
	} else if a.member, err = required(r, "member"); err != nil {
		return a, err
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
		return a, invalid("autoOffsetReset", v, "must be earliest or latest")
	}
	switch v := strings.ToLower(r.Value("isolation")); v {
	case "", "read_committed":
		a.isolation = partitionv1.Isolation_ISOLATION_READ_COMMITTED
	case "read_uncommitted":
		a.isolation = partitionv1.Isolation_ISOLATION_READ_UNCOMMITTED
	default:
		return a, invalid("isolation", v, "must be read_committed or read_uncommitted")
	}
	b, err := optInt(r, "batch", maxFetchRecords, 1, 1<<31-1)
	if err != nil {
		return a, err
	}
	a.batch = uint32(min(b, maxFetchRecords))
	w, err := optInt(r, "wait_ms", 0, 0, 1<<31-1)
	if err != nil {
		return a, err
	}
	a.wait = min(time.Duration(w)*time.Millisecond, maxFetchWait)
	return a, nil
}

// matchTopics resolves a topic parameter: a name (which must exist) or a
// '*'/'?' pattern over the visible application topics, sorted.
func (g *Role) matchTopics(ctx context.Context, pattern string) ([]*metav1.Topic, error) {
	if !isPattern(pattern) {
		t, err := g.lookupTopic(ctx, pattern)
		if err != nil {
			return nil, err
		}
		return []*metav1.Topic{t}, nil
	}
	if !g.meta.Cache().View().Ready() {
		return nil, errcode.ClusterMetadataUnavailable.New("topic metadata not synced with metad yet", "command", "CONSUME")
	}
	if len(pattern) > 256 {
		return nil, invalid("topic", pattern, "pattern is longer than 256 bytes")
	}
	var out []*metav1.Topic
	for _, t := range g.clientTopics() {
		if matchPattern(pattern, t.GetConfig().GetName()) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, errcode.TopicNotFound.New("no topic matches the pattern", "topic", clip(pattern))
	}
	return out, nil
}

// startOffset applies the start-offset precedence of spec 4.5: the group's
// committed offset, else the explicit offset, else autoOffsetReset (latest:
// the LIST_OFFSETS latest value; earliest: 0).
func (g *Role) startOffset(ctx context.Context, t *metav1.Topic, a *readArgs) (uint64, error) {
	var resp *coordinatorv1.FetchOffsetResponse
	err := g.callCoordinator(ctx, a.group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: a.group, Topic: t.GetConfig().GetName(), Partition: a.partition})
		return err
	})
	if err != nil {
		return 0, err
	}
	if resp.GetFound() {
		return resp.GetOffset(), nil
	}
	if a.hasOffset {
		return a.offset, nil
	}
	if a.latest {
		offs, err := g.offsets(ctx, t, []int32{a.partition})
		if err != nil {
			return 0, err
		}
		if o, ok := offs[a.partition]; ok && o.GetError() == nil {
			return o.GetLatest(), nil
		}
	}
	return 0, nil
}

// fetch reads from the partition leader, following leader moves.
func (g *Role) fetch(ctx context.Context, topic string, part int32, offset uint64, max uint32, wait time.Duration, iso partitionv1.Isolation) (*partitionv1.FetchResponse, error) {
	var resp *partitionv1.FetchResponse
	err := g.retryRoute(ctx, func() error {
		t, leader, err := g.partitionLeader(ctx, topic, part)
		if err != nil {
			return err
		}
		pc, err := g.partitionClient(leader)
		if err != nil {
			return err
		}
		resp, err = pc.Fetch(ctx, &partitionv1.FetchRequest{Topic: topic, Partition: part, Offset: offset, MaxRecords: max,
			MaxBytes: maxFetchBytes, WaitMs: uint32(wait / time.Millisecond), Isolation: iso, LifecycleEpoch: t.GetConfig().GetLifecycleEpoch()})
		return err
	})
	return resp, err
}

// batchBuilders pools the builders of consume replies.
var batchBuilders = sync.Pool{New: func() any { return new(wire.BatchBuilder) }}

// appendBatch encodes a fetched record set as a CBV2 batch into out: the
// records are copied once, as stored (offsets already assigned).
func appendBatch(out []byte, topic string, part int32, resp *partitionv1.FetchResponse) ([]byte, error) {
	bb := batchBuilders.Get().(*wire.BatchBuilder)
	defer batchBuilders.Put(bb)
	if err := bb.Reset(out, wire.BatchHeader{Topic: topic, Partition: part, Acks: "1"}); err != nil {
		return nil, err
	}
	if len(resp.GetRecords()) > 0 {
		if err := bb.AppendRecords(resp.GetRecords()); err != nil {
			return nil, err
		}
	}
	return bb.Bytes()
}

func (g *Role) cmdConsume(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	a, err := parseReadArgs(r, "CONSUME", false)
	if err != nil {
		return nil, err
	}
	topics, err := g.matchTopics(ctx, a.topic)
	if err != nil {
		return nil, err
	}
	// A batch frame carries one topic, so a pattern is served by the first
	// matching topic (in name order) that has records at its start offset.
	starts := make([]uint64, len(topics))
	for i, t := range topics {
		if int(a.partition) >= len(t.GetPartitions()) {
			if len(topics) == 1 {
				return nil, errcode.PartitionNotFound.New("partition does not exist", "topic", t.GetConfig().GetName(), "partition", strconv.Itoa(int(a.partition)))
			}
			starts[i] = ^uint64(0)
			continue
		}
		if starts[i], err = g.startOffset(ctx, t, &a); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(a.wait)
	for {
		for i, t := range topics {
			if starts[i] == ^uint64(0) {
				continue
			}
			wait := time.Duration(0)
			if len(topics) == 1 {
				wait = a.wait // one topic: let the leader long-poll
			}
			name := t.GetConfig().GetName()
			resp, err := g.fetch(ctx, name, a.partition, starts[i], a.batch, wait, a.isolation)
			if err != nil {
				return nil, err
			}
			if resp.GetRecordCount() > 0 || len(topics) == 1 {
				g.m.consumeRecords.Add(float64(resp.GetRecordCount()))
				g.m.consumeBytes.Add(float64(len(resp.GetRecords())))
				return appendBatch(out, name, a.partition, resp)
			}
		}
		if !time.Now().Before(deadline) {
			return appendBatch(out, topics[0].GetConfig().GetName(), a.partition, &partitionv1.FetchResponse{})
		}
		select {
		case <-ctx.Done():
			return nil, errcode.From(ctx.Err())
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}
