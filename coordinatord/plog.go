package coordinatord

import (
	"context"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// leaderClient sends offsets-partition calls to the partition's current
// leader as the metad cache knows it; every attempt re-resolves, so a leader
// change is followed on the offsetlog retry.
type leaderClient struct {
	r     *Role
	topic string
	p     int32
}

func (c leaderClient) client() (partitionv1.PartitionServiceClient, error) {
	v := c.r.meta.Cache().View()
	_, ps, ok := v.Partition(c.topic, c.p)
	if !ok || ps.GetLeader() == "" {
		return nil, errcode.LeaderNotFound.New("offsets partition has no leader", "topic", c.topic, "partition", strconv.Itoa(int(c.p)))
	}
	n, ok := v.Node(ps.GetLeader())
	if !ok || n.GetRpcAddress() == "" {
		return nil, errcode.LeaderNotFound.New("offsets partition leader has no address", "topic", c.topic, "leader", ps.GetLeader())
	}
	conn, err := c.r.env.Clients.Get(n.GetRpcAddress())
	if err != nil {
		return nil, errcode.LeaderNotFound.New("dial offsets partition leader: " + err.Error())
	}
	return partitionv1.NewPartitionServiceClient(conn), nil
}

func (c leaderClient) Append(ctx context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	return cl.Append(ctx, req)
}

func (c leaderClient) Fetch(ctx context.Context, req *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	return cl.Fetch(ctx, req)
}

func (c leaderClient) ListOffsets(ctx context.Context, req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	return cl.ListOffsets(ctx, req)
}

// listOffsets asks the leader of topic/partition for its offsets.
func (r *Role) listOffsets(ctx context.Context, addr, topic string, parts []int32) ([]*partitionv1.PartitionOffsets, error) {
	conn, err := r.env.Clients.Get(addr)
	if err != nil {
		return nil, err
	}
	resp, err := partitionv1.NewPartitionServiceClient(conn).ListOffsets(ctx, &partitionv1.ListOffsetsRequest{Topic: topic, Partitions: parts})
	if err != nil {
		return nil, err
	}
	return resp.GetPartitions(), nil
}
