package client

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// ClusterNode is one node of LIST_CLUSTER: a broker of any role (metad,
// partitiond, coordinatord, gateway), its internal RPC address, a
// gateway's client address, and whether metad holds its lease.
type ClusterNode struct {
	ID            string `json:"id"`
	Role          string `json:"role"`
	RPCAddress    string `json:"rpc_address"`
	ClientAddress string `json:"client_address,omitempty"`
	Live          bool   `json:"live"`
}

// ListCluster is LIST_CLUSTER: every registered node, sorted by role, then
// id.
func (c *Client) ListCluster(ctx context.Context) ([]ClusterNode, error) {
	r, err := c.ok(ctx, wire.CmdListCluster, params())
	if err != nil {
		return nil, err
	}
	var out []ClusterNode
	if err := json.Unmarshal([]byte(r.Value("brokers")), &out); err != nil {
		return nil, errcode.DecodeFailed.New("LIST_CLUSTER brokers do not decode: "+err.Error(), "payload", "ok_text")
	}
	if n, err := strconv.Atoi(r.Value("count")); err != nil || n != len(out) {
		return nil, errcode.DecodeFailed.New("LIST_CLUSTER count does not match its brokers", "payload", "ok_text", "count", r.Value("count"))
	}
	return out, nil
}

// ClusterStatusOptions are CLUSTER_STATUS's parameters.
type ClusterStatusOptions struct {
	// Internal includes the internal topics' partitions (__consumer_offsets).
	Internal bool
}

// ClusterStatusWith returns the CLUSTER_STATUS JSON document as received;
// DecodeClusterStatus reads Strata's fields from it.
func (c *Client) ClusterStatusWith(ctx context.Context, o ClusterStatusOptions) (json.RawMessage, error) {
	req := params()
	if o.Internal {
		req = params("internal", "true")
	}
	r, err := c.ok(ctx, wire.CmdClusterStatus, req)
	if err != nil {
		return nil, err
	}
	v, ok := r.Get("cluster")
	if !ok || !json.Valid([]byte(v)) {
		return nil, errcode.DecodeFailed.New("CLUSTER_STATUS reply carries no JSON", "payload", "ok_text")
	}
	return json.RawMessage(v), nil
}

// ClusterStatus is Strata's CLUSTER_STATUS document (docs/gateway.md).
type ClusterStatus = wire.ClusterStatus

// ClusterStatusNode is a broker of CLUSTER_STATUS.
type ClusterStatusNode = wire.ClusterNode

// ClusterStatusPartition is a partition of CLUSTER_STATUS. HWMSource is
// "leader" (the leader's answer, as LIST_OFFSETS) or "checkpoint" (metad's
// committed HWM, which may lag: the leader did not answer in time).
type ClusterStatusPartition = wire.ClusterPartition

// DecodeClusterStatus decodes a CLUSTER_STATUS document.
func DecodeClusterStatus(raw json.RawMessage) (ClusterStatus, error) {
	var s ClusterStatus
	if err := json.Unmarshal(raw, &s); err != nil {
		return ClusterStatus{}, errcode.DecodeFailed.New("CLUSTER_STATUS document does not decode: "+err.Error(), "payload", "json")
	}
	return s, nil
}
