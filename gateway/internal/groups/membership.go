package groups

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// groupMember reads the group and member parameters every membership command
// requires, in that order.
func groupMember(c *command.Call) (p param.Reader, group, member string) {
	p = param.Read(c.Req, c.Command)
	group, member = p.Required(param.Group), p.Required(param.Member)
	return p, group, member
}

// requiredGroup reads the group parameter of a command that needs nothing
// else; the error is the parameter's failure.
func requiredGroup(c *command.Call) (string, error) {
	p := param.Read(c.Req, c.Command)
	group := p.Required(param.Group)
	return group, p.Err()
}

// joinGroup is JOIN_GROUP.
func (g *Handlers) joinGroup(ctx context.Context, c *command.Call) ([]byte, error) {
	p, group, member := groupMember(c)
	resp, err := forward(ctx, g.r, p.Err(), group, coordinatorv1.CoordinatorServiceClient.JoinGroup,
		&coordinatorv1.JoinGroupRequest{Group: group, Member: member, Topic: c.Req.Value("topic")})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKUint(wire.AppendOK(c.Out), "generation", resp.GetGeneration())
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

// syncGroup is SYNC_GROUP.
func (g *Handlers) syncGroup(ctx context.Context, c *command.Call) ([]byte, error) {
	p, group, member := groupMember(c)
	gen := p.Generation()
	resp, err := forward(ctx, g.r, p.Err(), group, coordinatorv1.CoordinatorServiceClient.SyncGroup,
		&coordinatorv1.SyncGroupRequest{Group: group, Member: member, Generation: gen, Topic: c.Req.Value("topic")})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOK(c.Out)
	if resp.GetMultiTopic() {
		return appendTopicAssignments(out, resp.GetTopicAssignments()), nil
	}
	return wire.AppendOKList(out, "assignments", resp.GetAssignments()), nil
}

// heartbeat is HEARTBEAT; the generation is optional.
func (g *Handlers) heartbeat(ctx context.Context, c *command.Call) ([]byte, error) {
	p, group, member := groupMember(c)
	req := &coordinatorv1.HeartbeatRequest{Group: group, Member: member, Topic: c.Req.Value("topic")}
	if gen, ok := p.OptUint("generation", 0); ok {
		req.Generation = &gen
	}
	resp, err := forward(ctx, g.r, p.Err(), group, coordinatorv1.CoordinatorServiceClient.Heartbeat, req)
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "member", resp.GetMember())
	return wire.AppendOKUint(out, "generation", resp.GetGeneration()), nil
}

// leaveGroup is LEAVE_GROUP.
func (g *Handlers) leaveGroup(ctx context.Context, c *command.Call) ([]byte, error) {
	p, group, member := groupMember(c)
	resp, err := forward(ctx, g.r, p.Err(), group, coordinatorv1.CoordinatorServiceClient.LeaveGroup,
		&coordinatorv1.LeaveGroupRequest{Group: group, Member: member, Topic: c.Req.Value("topic")})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "group", group)
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

// groupStatus is GROUP_STATUS: JSON (spec 2.3; timestamps RFC 3339, the
// zero time when unknown).
func (g *Handlers) groupStatus(ctx context.Context, c *command.Call) ([]byte, error) {
	group, perr := requiredGroup(c)
	resp, err := forward(ctx, g.r, perr, group, coordinatorv1.CoordinatorServiceClient.GroupStatus,
		&coordinatorv1.GroupStatusRequest{Group: group})
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
	return append(c.Out, b...), nil
}
