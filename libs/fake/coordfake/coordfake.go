package coordfake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// Options configures a fake coordinatord. The zero value is node "c1"
// that every role may call.
type Options struct {
	// ID is the fake's node id (its certificate); default "c1".
	ID string
	// Callers are the roles allowed to call; empty allows every role.
	Callers []pki.Role
	// Telemetry traces the fake's server side (zero: off).
	Telemetry rpc.Telemetry
}

type tp struct {
	topic string
	p     int32
}

type member struct {
	id       string
	assigned []int32
	lastBeat time.Time
}

type group struct {
	topics     []string
	pattern    string
	generation uint64
	members    []*member // in join order
	offsets    map[tp]uint64
}

// Server is the fake coordinatord. Its CoordinatorService methods may also
// be called directly (without gRPC) to set up groups.
type Server struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	fakerpc.Controls
	*fakerpc.Server // Addr, Stop, Dial

	o Options

	mu         sync.Mutex
	groups     map[string]*group
	partitions map[string]int32 // topic -> partition count (default 1)
	joins      int
}

// Start serves a fake coordinatord on loopback with a coordinatord
// certificate of ca until the test ends.
func Start(t testing.TB, ca *pkitest.PKI, o Options) *Server {
	t.Helper()
	if o.ID == "" {
		o.ID = "c1"
	}
	s := &Server{o: o, groups: map[string]*group{}, partitions: map[string]int32{}}
	s.Server = fakerpc.Serve(t, ca, fakerpc.Options{Role: pki.RoleCoordinatord, ID: o.ID, Callers: o.Callers, Telemetry: o.Telemetry},
		fakerpc.Service{Desc: &coordinatorv1.CoordinatorService_ServiceDesc, Impl: s, Controls: &s.Controls})
	return s
}

// SetPartitions sets how many partitions a topic has for the assignments
// (default 1).
func (s *Server) SetPartitions(topic string, n int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partitions[topic] = n
}

// Committed returns a group's committed offset of a partition.
func (s *Server) Committed(groupName, topic string, p int32) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupName]
	if !ok {
		return 0, false
	}
	o, ok := g.offsets[tp{topic, p}]
	return o, ok
}

// groupLocked returns a group, creating it on topics when absent.
func (s *Server) groupLocked(name string, topics ...string) *group {
	g, ok := s.groups[name]
	if !ok {
		g = newGroup(topics...)
		s.groups[name] = g
	}
	return g
}

func newGroup(topics ...string) *group {
	return &group{topics: slices.Compact(slices.Sorted(slices.Values(topics))), offsets: map[tp]uint64{}}
}

func (g *group) topic() string {
	if len(g.topics) == 0 {
		return ""
	}
	return g.topics[0]
}

func (g *group) member(id string) *member {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// rebalanceLocked starts a new generation and deals the first topic's
// partitions round robin over the members in join order.
func (s *Server) rebalanceLocked(g *group) {
	g.generation++
	n := s.partitions[g.topic()]
	if n == 0 {
		n = 1
	}
	for _, m := range g.members {
		m.assigned = nil
	}
	if len(g.members) == 0 {
		return
	}
	for p := range n {
		m := g.members[int(p)%len(g.members)]
		m.assigned = append(m.assigned, p)
	}
}

func genMismatch(g *group, groupName, memberID string, requested uint64) error {
	return errcode.GenMismatch.New("stale generation", "current", strconv.FormatUint(g.generation, 10),
		"requested", strconv.FormatUint(requested, 10), "group", groupName, "member", memberID)
}

func notEmpty(groupName string, g *group) error {
	return errcode.GroupNotEmpty.New("group has active members", "group", groupName, "members", strconv.Itoa(len(g.members)))
}

func notFound(groupName string) error {
	return errcode.GroupNotFound.New("group is not registered", "group", groupName)
}

// RegisterGroup registers a group on its topics (no members).
func (s *Server) RegisterGroup(_ context.Context, req *coordinatorv1.RegisterGroupRequest) (*coordinatorv1.RegisterGroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, existed := s.groups[req.GetGroup()]
	topics := req.GetTopics()
	if req.GetTopic() != "" {
		topics = append(slices.Clone(topics), req.GetTopic())
	}
	g := s.groupLocked(req.GetGroup(), topics...)
	if !existed {
		g.pattern = req.GetPattern()
	}
	out := &coordinatorv1.RegisterGroupResponse{Group: req.GetGroup(), Created: !existed}
	for _, t := range g.topics {
		for p := range max(s.partitions[t], 1) {
			out.Partitions = append(out.Partitions, &coordinatorv1.TopicPartition{Topic: t, Partition: p})
		}
	}
	return out, nil
}

// JoinGroup adds a member (id: the requested name, "-" and four digits)
// and starts a new generation.
func (s *Server) JoinGroup(_ context.Context, req *coordinatorv1.JoinGroupRequest) (*coordinatorv1.JoinGroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groupLocked(req.GetGroup(), req.GetTopic())
	s.joins++
	m := &member{id: fmt.Sprintf("%s-%04d", req.GetMember(), 1000+s.joins), lastBeat: time.Now()}
	g.members = append(g.members, m)
	s.rebalanceLocked(g)
	return &coordinatorv1.JoinGroupResponse{Generation: g.generation, Member: m.id, Assignments: slices.Clone(m.assigned)}, nil
}

// memberLocked finds a member of the current generation (generation 0:
// any).
func (s *Server) memberLocked(groupName, memberID string, generation uint64) (*group, *member, error) {
	g, ok := s.groups[groupName]
	if !ok {
		return nil, nil, notFound(groupName)
	}
	m := g.member(memberID)
	if m == nil {
		return nil, nil, errcode.MemberNotFound.New("not a member of the group", "group", groupName, "member", memberID)
	}
	if generation != 0 && generation != g.generation {
		return nil, nil, genMismatch(g, groupName, memberID, generation)
	}
	return g, m, nil
}

// SyncGroup returns the member's assignment of the current generation.
func (s *Server) SyncGroup(_ context.Context, req *coordinatorv1.SyncGroupRequest) (*coordinatorv1.SyncGroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, m, err := s.memberLocked(req.GetGroup(), req.GetMember(), req.GetGeneration())
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.SyncGroupResponse{Assignments: slices.Clone(m.assigned)}, nil
}

// Heartbeat keeps a member; a stale generation answers generation_mismatch.
func (s *Server) Heartbeat(_ context.Context, req *coordinatorv1.HeartbeatRequest) (*coordinatorv1.HeartbeatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, m, err := s.memberLocked(req.GetGroup(), req.GetMember(), req.GetGeneration())
	if err != nil {
		return nil, err
	}
	m.lastBeat = time.Now()
	return &coordinatorv1.HeartbeatResponse{Member: m.id, Generation: g.generation}, nil
}

// LeaveGroup removes a member and starts a new generation.
func (s *Server) LeaveGroup(_ context.Context, req *coordinatorv1.LeaveGroupRequest) (*coordinatorv1.LeaveGroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, m, err := s.memberLocked(req.GetGroup(), req.GetMember(), 0)
	if err != nil {
		return nil, err
	}
	g.members = slices.DeleteFunc(g.members, func(x *member) bool { return x == m })
	s.rebalanceLocked(g)
	return &coordinatorv1.LeaveGroupResponse{Group: req.GetGroup(), Member: m.id}, nil
}

func state(g *group) string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// GroupStatus describes a group and its members.
func (s *Server) GroupStatus(_ context.Context, req *coordinatorv1.GroupStatusRequest) (*coordinatorv1.GroupStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[req.GetGroup()]
	if !ok {
		return nil, notFound(req.GetGroup())
	}
	out := &coordinatorv1.GroupStatusResponse{GroupName: req.GetGroup(), TopicName: g.topic(), Topics: slices.Clone(g.topics),
		Pattern: g.pattern, State: state(g), Generation: g.generation, MemberCount: int32(len(g.members)),
		PartitionCount: max(s.partitions[g.topic()], 1)}
	for _, m := range g.members {
		out.Members = append(out.Members, &coordinatorv1.GroupMember{MemberId: m.id, LastHeartbeatUnixMs: m.lastBeat.UnixMilli(),
			Assignments: slices.Clone(m.assigned)})
	}
	return out, nil
}

// ListGroups summarises every group, by name.
func (s *Server) ListGroups(context.Context, *coordinatorv1.ListGroupsRequest) (*coordinatorv1.ListGroupsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &coordinatorv1.ListGroupsResponse{}
	for _, name := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[name]
		out.Groups = append(out.Groups, &coordinatorv1.GroupSummary{Group: name, Topics: slices.Clone(g.topics), State: state(g),
			MemberCount: int32(len(g.members)), Generation: g.generation})
	}
	return out, nil
}

// DeleteGroup removes a group without members and its offsets.
func (s *Server) DeleteGroup(_ context.Context, req *coordinatorv1.DeleteGroupRequest) (*coordinatorv1.DeleteGroupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[req.GetGroup()]
	if !ok {
		return nil, notFound(req.GetGroup())
	}
	if len(g.members) > 0 {
		return nil, notEmpty(req.GetGroup(), g)
	}
	delete(s.groups, req.GetGroup())
	return &coordinatorv1.DeleteGroupResponse{Deleted: true}, nil
}

// CommitOffset stores one offset; with a generation it must be current.
func (s *Server) CommitOffset(_ context.Context, req *coordinatorv1.CommitOffsetRequest) (*coordinatorv1.CommitOffsetResponse, error) {
	one := func() ([]wire.PartitionOffset, error) {
		return []wire.PartitionOffset{{Partition: req.GetPartition(), Offset: req.GetOffset()}}, nil
	}
	_, _, err := s.storeOffsets(req.GetGroup(), req.GetTopic(), currentGeneration(req.GetGroup(), req.GetMember(), req.Generation), one)
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.CommitOffsetResponse{}, nil
}

// BatchCommit stores several offsets of one topic at once; with a
// generation it must be current, which is checked before the entries (as
// coordinatord does, spec 4.5).
func (s *Server) BatchCommit(_ context.Context, req *coordinatorv1.BatchCommitRequest) (*coordinatorv1.BatchCommitResponse, error) {
	n, _, err := s.storeOffsets(req.GetGroup(), req.GetTopic(), currentGeneration(req.GetGroup(), req.GetMember(), req.Generation),
		offsetList(req.GetGroup(), req.GetTopic(), req.GetOffsetsList(), req.GetOffsets()))
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.BatchCommitResponse{Batched: int32(n)}, nil
}

// ResetOffsets overwrites offsets of a group without members (creating the
// group when absent); a group with members is refused before the entries
// are read, as coordinatord does.
func (s *Server) ResetOffsets(_ context.Context, req *coordinatorv1.ResetOffsetsRequest) (*coordinatorv1.ResetOffsetsResponse, error) {
	empty := func(g *group) error {
		if len(g.members) > 0 {
			return notEmpty(req.GetGroup(), g)
		}
		return nil
	}
	n, created, err := s.storeOffsets(req.GetGroup(), req.GetTopic(), empty,
		offsetList(req.GetGroup(), req.GetTopic(), req.GetOffsetsList(), req.GetOffsets()))
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.ResetOffsetsResponse{Entries: int32(n), Created: created}, nil
}

// offsetList reads the offsets of a batch (the list form wins) and refuses
// a partition named twice.
func offsetList(groupName, topic, list string, offsets []*coordinatorv1.PartitionOffset) func() ([]wire.PartitionOffset, error) {
	return func() ([]wire.PartitionOffset, error) {
		var out []wire.PartitionOffset
		if list != "" {
			var err error
			if out, err = wire.ParseOffsetList(list); err != nil {
				return nil, err
			}
		} else {
			for _, o := range offsets {
				out = append(out, wire.PartitionOffset{Partition: o.GetPartition(), Offset: o.GetOffset()})
			}
		}
		if p, dup := wire.DuplicatePartition(out); dup {
			return nil, errcode.DuplicatePartition.New("partition named twice", "partition", strconv.Itoa(int(p)), "group", groupName, "topic", topic)
		}
		return out, nil
	}
}

// currentGeneration is the check of a commit: a generation, when given,
// must be the group's current one.
func currentGeneration(groupName, memberID string, generation *uint64) func(*group) error {
	return func(g *group) error {
		if generation != nil && *generation != g.generation {
			return genMismatch(g, groupName, memberID, *generation)
		}
		return nil
	}
}

// storeOffsets writes the entries of one topic once check accepts the
// group (created on the topic when absent, and kept only when the write
// happens); it returns how many it wrote and whether the group is new.
func (s *Server) storeOffsets(groupName, topic string, check func(*group) error, entries func() ([]wire.PartitionOffset, error)) (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, existed := s.groups[groupName]
	if !existed {
		g = newGroup(topic)
	}
	if err := check(g); err != nil {
		return 0, false, err
	}
	list, err := entries()
	if err != nil {
		return 0, false, err
	}
	s.groups[groupName] = g
	for _, o := range list {
		g.offsets[tp{topic, o.Partition}] = o.Offset
	}
	return len(list), !existed, nil
}

// FetchOffset returns a committed offset.
func (s *Server) FetchOffset(_ context.Context, req *coordinatorv1.FetchOffsetRequest) (*coordinatorv1.FetchOffsetResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[req.GetGroup()]
	if !ok {
		return &coordinatorv1.FetchOffsetResponse{}, nil
	}
	o, found := g.offsets[tp{req.GetTopic(), req.GetPartition()}]
	return &coordinatorv1.FetchOffsetResponse{Offset: o, Found: found}, nil
}

// TopicActivity names the groups with members on a topic.
func (s *Server) TopicActivity(_ context.Context, req *coordinatorv1.TopicActivityRequest) (*coordinatorv1.TopicActivityResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &coordinatorv1.TopicActivityResponse{}
	for _, name := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[name]
		if len(g.members) > 0 && slices.Contains(g.topics, req.GetTopic()) {
			out.ActiveMembers = true
			out.Groups = append(out.Groups, name)
		}
	}
	return out, nil
}
