package server

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strataio/strata/gateway/internal/routing"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/ring"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// defaultTxnShards applies when the cluster has not announced its shard
// count (spec 4.7 default).
const defaultTxnShards = 50

func (g *Role) cmdFindCoordinator(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	var owner string
	if group := r.Value("group"); group != "" {
		var err error
		if owner, err = g.groupCoordinator(group); err != nil {
			return nil, err
		}
	} else if txn := r.Value("transactional_id"); txn != "" {
		shards := g.meta.Cache().View().TxnShards
		if shards == 0 {
			shards = defaultTxnShards
		}
		owner = g.coordinatorRing().Owner(ring.TxnShardKey(routing.TxnShard(txn, shards)))
		if owner == "" {
			return nil, errcode.CoordinatorNotAvailable.New("no live coordinatord", "transactional_id", txn)
		}
	} else {
		return nil, errcode.Lookup("missing_group").New("group or transactional_id is required", "param", "group")
	}
	// The client talks to coordinators through gateways: host and port are
	// this gateway's client address, which routes to the owner.
	host, port, err := net.SplitHostPort(g.advertised())
	if err != nil {
		return nil, errcode.Internal.New("advertised client address: " + err.Error())
	}
	out = wire.AppendOKField(wire.AppendOK(out), "coordinator_id", owner)
	out = wire.AppendOKField(out, "host", host)
	return wire.AppendOKField(out, "port", port), nil
}

func (g *Role) cmdRegisterGroup(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	req := &coordinatorv1.RegisterGroupRequest{Group: group, Topic: r.Value("topic"), Pattern: r.Value("pattern")}
	if v := r.Value("topics"); v != "" {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				req.Topics = append(req.Topics, t)
			}
		}
	}
	n := 0
	for _, set := range []bool{req.Topic != "", len(req.Topics) > 0, req.Pattern != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errcode.Lookup("invalid_group_selector").New("exactly one of topic, topics or pattern is required", "group", group)
	}
	var resp *coordinatorv1.RegisterGroupResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.RegisterGroup(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKField(wire.AppendOK(out), "group", group)
	out = wire.AppendOKInt(out, "partitions", int64(len(resp.GetPartitions())))
	return wire.AppendOKBool(out, "created", resp.GetCreated()), nil
}

// appendTopicAssignments writes " topic_assignments=<topic>:P<p>,..." for
// multi-topic groups.
func appendTopicAssignments(out []byte, tps []*coordinatorv1.TopicPartition) []byte {
	out = append(out, " topic_assignments="...)
	for i, tp := range tps {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(out, tp.GetTopic()...), ":P"...)
		out = strconv.AppendInt(out, int64(tp.GetPartition()), 10)
	}
	return out
}

func (g *Role) cmdJoinGroup(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	member, err := required(r, "member")
	if err != nil {
		return nil, err
	}
	var resp *coordinatorv1.JoinGroupResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: group, Member: member, Topic: r.Value("topic")})
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKUint(wire.AppendOK(out), "generation", resp.GetGeneration())
	out = wire.AppendOKField(out, "member", resp.GetMember())
	if resp.GetMultiTopic() {
		out = appendTopicAssignments(out, resp.GetTopicAssignments())
	} else {
		out = wire.AppendOKList(out, "assignments", resp.GetAssignments())
	}
	if resp.GetResumed() {
		out = wire.AppendOKBool(out, "resumed", true)
	}
	return out, nil
}

// generationParam parses a required generation: missing is
// missing_generation (spec 7), malformed invalid_parameter.
func generationParam(r *wire.Request, cmd string) (uint64, error) {
	v, ok := r.Get("generation")
	if !ok || v == "" {
		return 0, errcode.MissingGeneration.New("generation is required", "command", cmd)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, invalid("generation", v, "must be a non-negative integer")
	}
	return n, nil
}

func (g *Role) cmdSyncGroup(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	member, err := required(r, "member")
	if err != nil {
		return nil, err
	}
	gen, err := generationParam(r, "SYNC_GROUP")
	if err != nil {
		return nil, err
	}
	var resp *coordinatorv1.SyncGroupResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.SyncGroup(ctx, &coordinatorv1.SyncGroupRequest{Group: group, Member: member, Generation: gen, Topic: r.Value("topic")})
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOK(out)
	if resp.GetMultiTopic() {
		return appendTopicAssignments(out, resp.GetTopicAssignments()), nil
	}
	return wire.AppendOKList(out, "assignments", resp.GetAssignments()), nil
}

func (g *Role) cmdHeartbeat(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	member, err := required(r, "member")
	if err != nil {
		return nil, err
	}
	req := &coordinatorv1.HeartbeatRequest{Group: group, Member: member, Topic: r.Value("topic")}
	if gen, ok, err := optUint(r, "generation", 0); err != nil {
		return nil, err
	} else if ok {
		req.Generation = &gen
	}
	var resp *coordinatorv1.HeartbeatResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.Heartbeat(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKField(wire.AppendOK(out), "member", resp.GetMember())
	return wire.AppendOKUint(out, "generation", resp.GetGeneration()), nil
}

func (g *Role) cmdLeaveGroup(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	member, err := required(r, "member")
	if err != nil {
		return nil, err
	}
	var resp *coordinatorv1.LeaveGroupResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: group, Member: member, Topic: r.Value("topic")})
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKField(wire.AppendOK(out), "group", group)
	m := resp.GetMember()
	if m == "" {
		m = member
	}
	out = wire.AppendOKField(out, "member", m)
	return wire.AppendOKBool(out, "left", true), nil
}

type groupStatusJSON struct {
	GroupName      string            `json:"group_name"`
	TopicName      string            `json:"topic_name"`
	State          string            `json:"state"`
	Generation     uint64            `json:"generation"`
	MemberCount    int32             `json:"member_count"`
	PartitionCount int32             `json:"partition_count"`
	Members        []groupMemberJSON `json:"members"`
	LastRebalance  time.Time         `json:"last_rebalance"`
}

type groupMemberJSON struct {
	MemberID      string    `json:"member_id"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Assignments   []int32   `json:"assignments"`
}

func unixMillis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (g *Role) cmdGroupStatus(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	var resp *coordinatorv1.GroupStatusResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: group})
		return err
	})
	if err != nil {
		return nil, err
	}
	topic := resp.GetTopicName()
	if topic == "" && len(resp.GetTopics()) > 0 {
		topic = strings.Join(resp.GetTopics(), ",")
	}
	if topic == "" {
		topic = resp.GetPattern()
	}
	st := groupStatusJSON{GroupName: resp.GetGroupName(), TopicName: topic, State: resp.GetState(), Generation: resp.GetGeneration(),
		MemberCount: resp.GetMemberCount(), PartitionCount: resp.GetPartitionCount(), Members: []groupMemberJSON{},
		LastRebalance: unixMillis(resp.GetLastRebalanceUnixMs())}
	for _, m := range resp.GetMembers() {
		as := m.GetAssignments()
		if as == nil {
			as = []int32{}
		}
		st.Members = append(st.Members, groupMemberJSON{MemberID: m.GetMemberId(), LastHeartbeat: unixMillis(m.GetLastHeartbeatUnixMs()), Assignments: as})
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, errcode.Internal.New("group status: " + err.Error())
	}
	return append(out, b...), nil
}

// cmdListGroups asks every live coordinatord (each owns part of the groups)
// and answers `OK count=<n> groups=<csv>` sorted by name.
func (g *Role) cmdListGroups(ctx context.Context, out []byte) ([]byte, error) {
	nodes := g.meta.Cache().View().Nodes(metav1.NodeRole_NODE_ROLE_COORDINATORD, true)
	if len(nodes) == 0 {
		return nil, errcode.CoordinatorNotAvailable.New("no live coordinatord")
	}
	seen := map[string]bool{}
	var names []string
	for _, n := range nodes {
		cc, err := g.env.Clients.Get(n.GetRpcAddress())
		if err != nil {
			return nil, err
		}
		resp, err := coordinatorv1.NewCoordinatorServiceClient(cc).ListGroups(ctx, &coordinatorv1.ListGroupsRequest{})
		if err != nil {
			return nil, err
		}
		for _, s := range resp.GetGroups() {
			if !seen[s.GetGroup()] {
				seen[s.GetGroup()] = true
				names = append(names, s.GetGroup())
			}
		}
	}
	sortStrings(names)
	out = wire.AppendOKInt(wire.AppendOK(out), "count", int64(len(names)))
	return wire.AppendOKField(out, "groups", strings.Join(names, ",")), nil
}

func (g *Role) cmdCommitOffset(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	topic, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	if _, err := required(r, "partition"); err != nil {
		return nil, err
	}
	part, _, err := partitionParam(r, "COMMIT_OFFSET")
	if err != nil {
		return nil, err
	}
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	if _, err := required(r, "offset"); err != nil {
		return nil, err
	}
	offset, _, err := optUint(r, "offset", 0)
	if err != nil {
		return nil, err
	}
	member, err := required(r, "member")
	if err != nil {
		return nil, err
	}
	gen, err := generationParam(r, "COMMIT_OFFSET")
	if err != nil {
		return nil, err
	}
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) error {
		_, err := c.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: group, Topic: topic, Partition: part, Offset: offset, Member: member, Generation: &gen})
		return err
	})
	if err != nil {
		return nil, err
	}
	return wire.AppendOK(out), nil
}

// batchOffsets reads the raw list of BATCH_COMMIT (and RESET_OFFSETS): the
// offsets field, or (as the Python and Java SDKs send BATCH_COMMIT's)
// exactly one positional. The coordinator parses it after checking member
// and generation (spec 4.5 order), so the gateway forwards the text
// unparsed.
func batchOffsets(r *wire.Request) (string, error) {
	v, ok := r.Get("offsets")
	if !ok {
		if len(r.Positionals) != 1 {
			return "", errcode.InvalidBatchCommitEntry.New("offsets is required as P<partition>:<offset>,...", "reason", "missing_offsets")
		}
		v = r.Positionals[0]
	}
	if len(v) > 64<<10 {
		// 1,024 entries of P<int32>:<uint64> fit in 32 KiB; refuse more
		// before it travels.
		return "", errcode.InvalidBatchCommitEntry.New("offset list too long", "reason", "too_long")
	}
	return v, nil
}

func (g *Role) cmdBatchCommit(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	topic, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	member, err := required(r, "member")
	if err != nil {
		return nil, err
	}
	gen, err := generationParam(r, "BATCH_COMMIT")
	if err != nil {
		return nil, err
	}
	list, err := batchOffsets(r)
	if err != nil {
		return nil, err
	}
	req := &coordinatorv1.BatchCommitRequest{Group: group, Topic: topic, Member: member, Generation: &gen, OffsetsList: list}
	var resp *coordinatorv1.BatchCommitResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.BatchCommit(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return wire.AppendOKInt(wire.AppendOK(out), "batched", int64(resp.GetBatched())), nil
}

func (g *Role) cmdFetchOffset(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	topic, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	if _, err := required(r, "partition"); err != nil {
		return nil, err
	}
	part, _, err := partitionParam(r, "FETCH_OFFSET")
	if err != nil {
		return nil, err
	}
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	var resp *coordinatorv1.FetchOffsetResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: group, Topic: topic, Partition: part})
		return err
	})
	if err != nil {
		return nil, err
	}
	return wire.AppendOKUint(wire.AppendOK(out), "offset", resp.GetOffset()), nil
}

// cmdDeleteGroup is DELETE_GROUP (Strata extension command, admin): the
// coordinator tombstones the group's offsets, then the group; a group with
// active members is group_not_empty.
func (g *Role) cmdDeleteGroup(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) error {
		_, err := c.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: group})
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKField(wire.AppendOK(out), "group", group)
	return wire.AppendOKBool(out, "deleted", true), nil
}

// cmdResetOffsets is RESET_OFFSETS (Strata extension command, admin): set
// committed offsets of a group without active members, down or up. The
// offset list follows BATCH_COMMIT's rules and travels raw; the coordinator
// parses and checks it.
func (g *Role) cmdResetOffsets(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	group, err := required(r, "group")
	if err != nil {
		return nil, err
	}
	topic, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	list, err := batchOffsets(r)
	if err != nil {
		return nil, err
	}
	req := &coordinatorv1.ResetOffsetsRequest{Group: group, Topic: topic, OffsetsList: list}
	var resp *coordinatorv1.ResetOffsetsResponse
	err = g.callCoordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.ResetOffsets(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKField(wire.AppendOK(out), "group", group)
	out = wire.AppendOKField(out, "topic", topic)
	return wire.AppendOKInt(out, "reset", int64(resp.GetEntries())), nil
}

func sortStrings(s []string) { slices.Sort(s) }
