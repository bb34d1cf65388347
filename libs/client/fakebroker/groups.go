package fakebroker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// groupCommand answers the group commands (b.mu held). Groups are
// single-topic; partitions are dealt round robin over the sorted members on
// every join and leave, and each change bumps the generation.
func (b *Broker) groupCommand(cmd wire.Command, r *wire.Request) (string, *errcode.Error) {
	name := r.Value("group")
	if cmd == wire.CmdListGroups {
		names := make([]string, 0, len(b.groups))
		for n := range b.groups {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Sprintf("OK count=%d groups=%s", len(names), join(names)), nil
	}
	if name == "" {
		return "", errcode.MissingParameter.New("group required", "param", "group")
	}
	g := b.groups[name]
	switch cmd {
	case wire.CmdJoinGroup:
		member := r.Value("member")
		if member == "" {
			return "", errcode.MissingParameter.New("member required", "param", "member")
		}
		if g == nil {
			t, e := b.topic(r)
			if e != nil {
				return "", e
			}
			g = &group{name: name, topic: t.name, assign: map[string][]int32{}, beats: map[string]time.Time{}}
			b.groups[name] = g
		}
		resumed := slices.Contains(g.members, member)
		actual := member
		if !resumed {
			actual = fmt.Sprintf("%s-%04d", member, rand.IntN(10000))
			g.members = append(g.members, actual)
			b.rebalance(g)
		}
		g.beats[actual] = time.Now()
		out := wire.AppendOKInt([]byte("OK"), "generation", g.generation)
		out = wire.AppendOKField(out, "member", actual)
		out = wire.AppendOKList(out, "assignments", g.assign[actual])
		if resumed {
			out = wire.AppendOKBool(out, "resumed", true)
		}
		return string(out), nil
	case wire.CmdGroupStatus:
		if g == nil {
			return "", errcode.GroupNotFound.New("group not found", "group", name)
		}
		type m struct {
			MemberID      string  `json:"member_id"`
			LastHeartbeat string  `json:"last_heartbeat"`
			Assignments   []int32 `json:"assignments"`
		}
		st := struct {
			GroupName      string `json:"group_name"`
			TopicName      string `json:"topic_name"`
			State          string `json:"state"`
			Generation     int64  `json:"generation"`
			MemberCount    int    `json:"member_count"`
			PartitionCount int    `json:"partition_count"`
			Members        []m    `json:"members"`
			LastRebalance  string `json:"last_rebalance"`
		}{GroupName: g.name, TopicName: g.topic, State: "Stable", Generation: g.generation,
			MemberCount: len(g.members), Members: []m{}, LastRebalance: g.rebalance.UTC().Format(time.RFC3339Nano)}
		if t := b.topics[g.topic]; t != nil {
			st.PartitionCount = len(t.parts)
		}
		if len(g.members) == 0 {
			st.State = "Empty"
		}
		for _, id := range g.members {
			st.Members = append(st.Members, m{MemberID: id, LastHeartbeat: g.beats[id].UTC().Format(time.RFC3339Nano), Assignments: g.assign[id]})
		}
		js, _ := json.Marshal(st)
		return string(js), nil
	case wire.CmdFetchOffset:
		p, e := partitionParam(r)
		if e != nil {
			return "", e
		}
		return "OK offset=" + strconv.FormatUint(b.offsets[offKey(r.Value("topic"), name, p)], 10), nil
	case wire.CmdDeleteGroup:
		if g == nil {
			return "", errcode.GroupNotFound.New("group not found", "group", name)
		}
		if len(g.members) > 0 {
			return "", errcode.GroupNotEmpty.New("group has active members", "group", name, "members", strconv.Itoa(len(g.members)))
		}
		delete(b.groups, name)
		for k := range b.offsets {
			if strings.HasPrefix(k, g.topic+"\x00"+name+"\x00") {
				delete(b.offsets, k)
			}
		}
		return "OK group=" + name + " deleted=true", nil
	case wire.CmdResetOffsets:
		return b.resetOffsets(g, name, r)
	}
	if g == nil {
		return "", errcode.GroupNotFound.New("group not found", "group", name)
	}
	member := r.Value("member")
	if !slices.Contains(g.members, member) {
		return "", errcode.MemberNotFound.New("member not found", "member", member, "group", name)
	}
	if cmd == wire.CmdLeaveGroup {
		g.members = slices.DeleteFunc(g.members, func(s string) bool { return s == member })
		delete(g.beats, member)
		b.rebalance(g)
		return "OK group=" + name + " member=" + member + " left=true", nil
	}
	genText, hasGen := r.Get("generation")
	gen, err := strconv.ParseInt(genText, 10, 64)
	if hasGen && err != nil {
		return "", errcode.InvalidParameter.New("bad generation", "param", "generation", "value", genText)
	}
	if !hasGen && cmd != wire.CmdHeartbeat {
		return "", errcode.MissingGeneration.New("generation required", "command", cmd.String())
	}
	if hasGen && gen != g.generation {
		return "", errcode.GenMismatch.New("stale generation", "current", strconv.FormatInt(g.generation, 10),
			"requested", genText, "group", name, "member", member)
	}
	switch cmd {
	case wire.CmdSyncGroup:
		return string(wire.AppendOKList([]byte("OK"), "assignments", g.assign[member])), nil
	case wire.CmdHeartbeat:
		g.beats[member] = time.Now()
		return fmt.Sprintf("OK member=%s generation=%d", member, g.generation), nil
	case wire.CmdCommitOffset:
		p, e := partitionParam(r)
		if e != nil {
			return "", e
		}
		off, err := strconv.ParseUint(r.Value("offset"), 10, 64)
		if err != nil {
			return "", errcode.InvalidParameter.New("bad offset", "param", "offset")
		}
		if e := b.commit(g, member, p, off, r.Value("topic")); e != nil {
			return "", e
		}
		return "OK", nil
	case wire.CmdBatchCommit:
		list := r.Value("offsets")
		if list == "" && len(r.Positionals) == 1 {
			list = r.Positionals[0]
		}
		offs, err := wire.ParseOffsetList(list)
		if err != nil {
			return "", errcode.From(err)
		}
		if p, dup := wire.DuplicatePartition(offs); dup {
			return "", errcode.DuplicatePartition.New("partition repeats", "partition", strconv.Itoa(int(p)), "group", name, "topic", g.topic)
		}
		for _, o := range offs {
			if !slices.Contains(g.assign[member], o.Partition) {
				return "", errcode.NotOwner.New("partition not owned", "partition", strconv.Itoa(int(o.Partition)), "member", member, "group", name, "generation", genText)
			}
			if cur := b.offsets[offKey(g.topic, name, o.Partition)]; o.Offset < cur {
				return "", errcode.OffsetRegression.New("commit below stored offset", "reason", "regression")
			}
		}
		for _, o := range offs {
			b.offsets[offKey(g.topic, name, o.Partition)] = o.Offset
		}
		return "OK batched=" + strconv.Itoa(len(offs)), nil
	}
	return "", errcode.UnsupportedFeature.New("not implemented by the fake broker", "command", cmd.String())
}

// resetOffsets answers RESET_OFFSETS (b.mu held): a missing group is
// registered against the topic; a group with members is group_not_empty;
// offsets may move down or up; any error changes nothing.
func (b *Broker) resetOffsets(g *group, name string, r *wire.Request) (string, *errcode.Error) {
	t, e := b.topic(r)
	if e != nil {
		return "", e
	}
	if g != nil && len(g.members) > 0 {
		return "", errcode.GroupNotEmpty.New("group has active members", "group", name, "members", strconv.Itoa(len(g.members)))
	}
	if g != nil && g.topic != t.name {
		return "", errcode.TopicNotAssignedToGroup.New("topic not assigned to group", "group", name, "topic", t.name)
	}
	offs, err := wire.ParseOffsetList(r.Value("offsets"))
	if err != nil {
		return "", errcode.From(err)
	}
	if p, dup := wire.DuplicatePartition(offs); dup {
		return "", errcode.DuplicatePartition.New("partition repeats", "partition", strconv.Itoa(int(p)), "group", name, "topic", t.name)
	}
	for _, o := range offs {
		if int(o.Partition) >= len(t.parts) {
			return "", errcode.PartitionNotFound.New("no such partition", "topic", t.name, "partition", strconv.Itoa(int(o.Partition)))
		}
	}
	if g == nil {
		b.groups[name] = &group{name: name, topic: t.name, assign: map[string][]int32{}, beats: map[string]time.Time{}}
	}
	for _, o := range offs {
		b.offsets[offKey(t.name, name, o.Partition)] = o.Offset
	}
	return "OK group=" + name + " topic=" + t.name + " reset=" + strconv.Itoa(len(offs)), nil
}

func (b *Broker) commit(g *group, member string, p int32, off uint64, topicName string) *errcode.Error {
	if topicName != g.topic {
		return errcode.TopicNotAssignedToGroup.New("topic not assigned to group", "topic", topicName)
	}
	if !slices.Contains(g.assign[member], p) {
		return errcode.NotOwner.New("partition not owned", "partition", strconv.Itoa(int(p)), "member", member, "group", g.name)
	}
	k := offKey(g.topic, g.name, p)
	if off < b.offsets[k] {
		return errcode.OffsetRegression.New("commit below stored offset", "reason", "regression")
	}
	b.offsets[k] = off
	return nil
}

func partitionParam(r *wire.Request) (int32, *errcode.Error) {
	v := r.Value("partition")
	p, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || p < 0 {
		return 0, errcode.InvalidPartition.New("bad partition", "command", "fake", "partition", v)
	}
	return int32(p), nil
}

func (b *Broker) rebalance(g *group) {
	g.generation++
	g.rebalance = time.Now()
	sort.Strings(g.members)
	g.assign = map[string][]int32{}
	for _, m := range g.members {
		g.assign[m] = []int32{}
	}
	t := b.topics[g.topic]
	if t == nil || len(g.members) == 0 {
		return
	}
	for p := range t.parts {
		m := g.members[p%len(g.members)]
		g.assign[m] = append(g.assign[m], int32(p))
	}
}
