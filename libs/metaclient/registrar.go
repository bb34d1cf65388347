package metaclient

import (
	"context"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Register announces node to metad, retrying until it succeeds or ctx ends.
// It returns the lease timeout metad granted.
func (c *Client) Register(ctx context.Context, node *metav1.Node) (time.Duration, error) {
	resp, err := Invoke(ctx, c, metav1.MetadataServiceClient.RegisterNode, &metav1.RegisterNodeRequest{Node: node})
	if err != nil {
		return 0, err
	}
	return time.Duration(resp.GetLeaseTimeoutMs()) * time.Millisecond, nil
}

// KeepAlive registers node and renews its lease at a third of the lease
// timeout until ctx ends, re-registering when metad forgot the node (lease
// expired or metad state rebuilt). Errors are logged and retried; it returns
// ctx.Err().
func (c *Client) KeepAlive(ctx context.Context, node *metav1.Node) error {
	for ctx.Err() == nil {
		lease, err := c.Register(ctx, node)
		if err != nil {
			c.log.Warn("node registration failed", "node", node.GetId(), "err", err)
			pace.Sleep(ctx, time.Second)
			continue
		}
		interval := max(lease/3, 100*time.Millisecond)
		for ctx.Err() == nil {
			pace.Sleep(ctx, interval)
			if ctx.Err() != nil {
				break
			}
			r, err := Invoke(ctx, c, metav1.MetadataServiceClient.NodeHeartbeat,
				&metav1.NodeHeartbeatRequest{NodeId: node.GetId(), Incarnation: node.GetIncarnation()})
			if err == nil && r.GetLeaseTimeoutMs() > 0 {
				interval = max(time.Duration(r.GetLeaseTimeoutMs())*time.Millisecond/3, 100*time.Millisecond)
			}
			if errcode.CodeOf(err) == errcode.NodeNotFound.Name() {
				break // re-register
			}
			if err != nil {
				c.log.Warn("node heartbeat failed", "node", node.GetId(), "err", err)
			}
		}
	}
	return ctx.Err()
}
