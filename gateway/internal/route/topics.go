package route

import (
	"context"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Visible reports whether a topic exists for clients: DELETING topics are
// treated as absent.
func Visible(t *metav1.Topic) bool {
	return t != nil && t.GetConfig().GetState() != metav1.TopicState_TOPIC_STATE_DELETING
}

// ClientTopics lists the visible application topics of v (internal topics
// are the broker's own).
func ClientTopics(v *metaclient.View) []*metav1.Topic {
	var out []*metav1.Topic
	for _, t := range v.Topics() {
		if Visible(t) && !t.GetConfig().GetInternal() {
			out = append(out, t)
		}
	}
	return out
}

// Offsets asks each partition leader for the offsets of its partitions of t
// (all partitions when parts is nil). A per-partition error that is
// Reroutable (NOT_LEADER, lifecycle_epoch_pending while a truncate is
// applied) is returned as the error too, so a caller may Retry.
func Offsets(ctx context.Context, r Router, t *metav1.Topic, parts []int32) (map[int32]*partitionv1.PartitionOffsets, error) {
	return OffsetsAt(ctx, r, t, parts, nil)
}

// OffsetsAt is Offsets that, with timestampMs, also asks each leader for
// the offset of that time (PartitionOffsets.offset_for_time).
func OffsetsAt(ctx context.Context, r Router, t *metav1.Topic, parts []int32, timestampMs *int64) (map[int32]*partitionv1.PartitionOffsets, error) {
	if parts == nil {
		for _, p := range t.GetPartitions() {
			parts = append(parts, p.GetId())
		}
	}
	byLeader := map[string][]int32{}
	for _, id := range parts {
		if int(id) >= len(t.GetPartitions()) {
			continue
		}
		leader := t.GetPartitions()[id].GetLeader()
		byLeader[leader] = append(byLeader[leader], id)
	}
	out := make(map[int32]*partitionv1.PartitionOffsets, len(parts))
	var firstErr error
	for leader, ids := range byLeader {
		if leader == "" {
			if firstErr == nil {
				firstErr = errcode.LeaderNotFound.New("partition has no leader", "topic", t.GetConfig().GetName(), "partition", strconv.Itoa(int(ids[0])))
			}
			continue
		}
		pc, err := r.Partition(leader)
		if err == nil {
			var resp *partitionv1.ListOffsetsResponse
			resp, err = pc.ListOffsets(ctx, &partitionv1.ListOffsetsRequest{Topic: t.GetConfig().GetName(), Partitions: ids, TimestampMs: timestampMs})
			if err == nil {
				for _, o := range resp.GetPartitions() {
					out[o.GetPartition()] = o
					if e := o.GetError(); e != nil && firstErr == nil && Reroutable(errcode.FromProto(e)) {
						firstErr = errcode.FromProto(e)
					}
				}
				continue
			}
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return out, firstErr
}
