package client

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// JoinResult is the JOIN_GROUP answer.
type JoinResult struct {
	Generation int64
	// Member is the actual member id (the server appends a suffix to the
	// requested one); every later group command uses it.
	Member      string
	Assignments []int32
	// TopicAssignments holds "<topic>:P<partition>" entries of multi-topic
	// groups.
	TopicAssignments []string
	Resumed          bool
}

// JoinGroup joins (registering a missing group against topic).
func (c *Client) JoinGroup(ctx context.Context, group, member, topic string) (JoinResult, error) {
	r, err := c.ok(ctx, wire.CmdJoinGroup, params("group", group, "member", member, "topic", topic))
	if err != nil {
		return JoinResult{}, err
	}
	gen, err := r.Int("generation")
	if err != nil {
		return JoinResult{}, err
	}
	jr := JoinResult{Generation: gen, Member: r.Value("member"), Resumed: r.Bool("resumed")}
	if v, ok := r.Get("assignments"); ok {
		if jr.Assignments, err = wire.ParseIntList(v); err != nil {
			return JoinResult{}, err
		}
	}
	if v, ok := r.Get("topic_assignments"); ok {
		jr.TopicAssignments = splitCSV(strings.Trim(v, "[]"))
	}
	return jr, nil
}

// SyncGroup returns the member's partitions for generation.
func (c *Client) SyncGroup(ctx context.Context, group, member string, generation int64, topic string) ([]int32, error) {
	r, err := c.ok(ctx, wire.CmdSyncGroup, params("group", group, "member", member,
		"generation", strconv.FormatInt(generation, 10), "topic", topic))
	if err != nil {
		return nil, err
	}
	return wire.ParseIntList(r.Value("assignments"))
}

// Heartbeat keeps the member alive; a stale generation is GEN_MISMATCH.
// It returns the server's current generation.
func (c *Client) Heartbeat(ctx context.Context, topic, group, member string, generation int64) (int64, error) {
	r, err := c.ok(ctx, wire.CmdHeartbeat, params("topic", topic, "group", group, "member", member,
		"generation", strconv.FormatInt(generation, 10)))
	if err != nil {
		return 0, err
	}
	if _, ok := r.Get("generation"); !ok {
		return generation, nil
	}
	return r.Int("generation")
}

// LeaveGroup removes the member.
func (c *Client) LeaveGroup(ctx context.Context, topic, group, member string) error {
	_, err := c.ok(ctx, wire.CmdLeaveGroup, params("topic", topic, "group", group, "member", member))
	return err
}

// CommitOffset commits next (the next offset to read) for one partition.
func (c *Client) CommitOffset(ctx context.Context, topic string, partition int32, group string, next uint64, member string, generation int64) error {
	_, err := c.ok(ctx, wire.CmdCommitOffset, params("topic", topic, "partition", strconv.Itoa(int(partition)),
		"group", group, "offset", strconv.FormatUint(next, 10), "member", member,
		"generation", strconv.FormatInt(generation, 10)))
	return err
}

// BatchCommit commits several partitions atomically (all or nothing) and
// returns how many entries the server applied.
func (c *Client) BatchCommit(ctx context.Context, topic, group, member string, generation int64, offsets []wire.PartitionOffset) (int, error) {
	list, err := wire.AppendOffsetList(nil, offsets)
	if err != nil {
		return 0, err
	}
	r, err := c.ok(ctx, wire.CmdBatchCommit, params("topic", topic, "group", group, "member", member,
		"generation", strconv.FormatInt(generation, 10), "offsets", string(list)))
	if err != nil {
		return 0, err
	}
	n, err := r.Int("batched")
	return int(n), err
}

// FetchOffset returns the committed next offset (0 when none).
func (c *Client) FetchOffset(ctx context.Context, topic string, partition int32, group string) (uint64, error) {
	r, err := c.ok(ctx, wire.CmdFetchOffset, params("topic", topic, "partition", strconv.Itoa(int(partition)), "group", group))
	if err != nil {
		return 0, err
	}
	return r.Uint("offset")
}

// DeleteGroup deletes a group without active members and its committed
// offsets (DELETE_GROUP, a Strata extension command; admin). A group with
// members is group_not_empty, an unknown one group_not_found.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	r, err := c.ok(ctx, wire.CmdDeleteGroup, params("group", group))
	if err != nil {
		return err
	}
	if !r.Bool("deleted") {
		return errcode.DecodeFailed.New("DELETE_GROUP reply lacks deleted=true", "payload", "ok_text", "reply", r.Text)
	}
	return nil
}

// ResetOffsets sets the committed next offsets of partitions of topic for a
// group without active members, down or up (RESET_OFFSETS, a Strata
// extension command; admin), and returns how many entries the server wrote.
// A missing group is registered against topic first. The list follows
// BATCH_COMMIT's rules (at most 1,024 entries, each partition once); any
// error changes nothing.
func (c *Client) ResetOffsets(ctx context.Context, group, topic string, offsets []wire.PartitionOffset) (int, error) {
	list, err := wire.AppendOffsetList(nil, offsets)
	if err != nil {
		return 0, err
	}
	r, err := c.ok(ctx, wire.CmdResetOffsets, params("group", group, "topic", topic, "offsets", string(list)))
	if err != nil {
		return 0, err
	}
	n, err := r.Int("reset")
	return int(n), err
}

// GroupStatus is the GROUP_STATUS JSON (spec 2.3).
type GroupStatus struct {
	GroupName      string          `json:"group_name"`
	TopicName      string          `json:"topic_name"`
	State          string          `json:"state"`
	Generation     int64           `json:"generation"`
	MemberCount    int             `json:"member_count"`
	PartitionCount int             `json:"partition_count"`
	Members        []GroupMember   `json:"members"`
	LastRebalance  json.RawMessage `json:"last_rebalance"`
	// Raw is the JSON as received.
	Raw json.RawMessage `json:"-"`
}

// GroupMember is one member in GROUP_STATUS.
type GroupMember struct {
	MemberID      string          `json:"member_id"`
	LastHeartbeat json.RawMessage `json:"last_heartbeat"`
	Assignments   []int32         `json:"assignments"`
}

// GroupStatus describes a group.
func (c *Client) GroupStatus(ctx context.Context, group string) (*GroupStatus, error) {
	s, err := c.answer(ctx, wire.CmdGroupStatus, params("group", group))
	if err != nil {
		return nil, err
	}
	// Some servers wrap the JSON as "OK status=<json>"; accept both.
	if strings.HasPrefix(s, "OK") {
		if r, err := wire.ParseOK(s); err == nil && len(r.Fields) == 1 {
			s = r.Fields[0].Value
		}
	}
	var g GroupStatus
	if err := decodeJSON(wire.CmdGroupStatus, "group_status", s, &g); err != nil {
		return nil, err
	}
	g.Raw = json.RawMessage(s)
	return &g, nil
}

// ListGroups returns the LIST_GROUPS answer as received (its shape is not
// fixed by the spec; Strata answers "OK count=<n> groups=<csv>").
func (c *Client) ListGroups(ctx context.Context) (Reply, error) {
	return c.ok(ctx, wire.CmdListGroups, params())
}

// Coordinator is the FIND_COORDINATOR answer.
type Coordinator struct {
	ID   string
	Host string
	Port int
}

// Addr returns host:port.
func (c Coordinator) Addr() string { return joinHostPort(c.Host, c.Port) }

func joinHostPort(h string, p int) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]:" + strconv.Itoa(p)
	}
	return h + ":" + strconv.Itoa(p)
}

// FindCoordinator returns the coordinator of a group (any broker answers).
func (c *Client) FindCoordinator(ctx context.Context, group string) (Coordinator, error) {
	r, err := c.ok(ctx, wire.CmdFindCoordinator, params("group", group))
	if err != nil {
		return Coordinator{}, err
	}
	port, err := r.Int("port")
	if err != nil {
		return Coordinator{}, err
	}
	return Coordinator{ID: r.Value("coordinator_id"), Host: r.Value("host"), Port: int(port)}, nil
}
