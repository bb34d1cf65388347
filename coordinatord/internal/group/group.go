package group

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// State values of GROUP_STATUS (spec 3.3); metrics use them lower-cased.
const (
	StateStable = "Stable"
	StateEmpty  = "Empty"
)

// Member is one active member (soft state: never persisted).
type Member struct {
	ID            string
	LastHeartbeat time.Time
	Assigned      []TP
}

// Group is one consumer group. Durable parts (Name, Selector, Partitions,
// Incarnation, Offsets) are rebuilt by replay; members and generations are
// soft state that restarts at generation 0 on a new coordinator, where the
// members' old ids answer member_not_found and they rejoin.
type Group struct {
	Name     string
	Selector Selector
	// Partitions is the concrete, sorted expansion of Selector.
	Partitions []TP
	// Incarnation identifies one registration lifetime: offsets written
	// under another incarnation (before a delete) are orphans on replay.
	Incarnation uint64
	Offsets     map[TP]uint64
	// Lifecycle is the topic lifecycle epoch (truncate count) each selected
	// topic had when its offsets were last valid; a higher epoch in metad
	// means the topic was truncated and those offsets are dropped.
	Lifecycle map[string]uint64
	// TxnMarks are the pending transactional offset marks by
	// transactional_id (durable, rebuilt by replay): partitions whose
	// committed offset a transaction in flight may still change.
	TxnMarks map[string]TxnMark

	Generation    uint64
	Members       map[string]*Member
	LastRebalance time.Time
	LastActivity  time.Time
}

// New returns a registered group without members.
func New(name string, sel Selector, parts []TP, incarnation uint64) *Group {
	return &Group{Name: name, Selector: sel.Normalize(), Partitions: SortTPs(slices.Clone(parts)),
		Incarnation: incarnation, Offsets: map[TP]uint64{}, Members: map[string]*Member{}, Lifecycle: map[string]uint64{},
		TxnMarks: map[string]TxnMark{}}
}

// TxnMark is a pending transactional offset mark (Kafka's pending
// transactional offset commit, KIP-447): the transaction (producer session
// and epoch) staged offsets of Partitions; until its commit writes them or
// its abort drops them, the committed offset of those partitions is
// unstable.
type TxnMark struct {
	ProducerID string
	Epoch      int64
	// Partitions are sorted and distinct.
	Partitions []TP
	// Marked is when the mark was first written.
	Marked time.Time
}

// Covers reports whether the mark names tp.
func (m TxnMark) Covers(tp TP) bool {
	_, ok := slices.BinarySearchFunc(m.Partitions, tp, cmpTP)
	return ok
}

// Same reports whether m and o belong to the same transaction.
func (m TxnMark) Same(o TxnMark) bool { return m.ProducerID == o.ProducerID && m.Epoch == o.Epoch }

// Merge returns the mark of transaction m after it staged parts as well:
// the union with cur when cur is the same transaction, m alone when cur is
// an earlier one (a transactional_id runs one transaction at a time, so
// an earlier transaction's mark is over). changed is false when cur
// already covers everything.
func (m TxnMark) Merge(cur TxnMark, had bool) (next TxnMark, changed bool) {
	if !had || !cur.Same(m) {
		m.Partitions = slices.Compact(SortTPs(slices.Clone(m.Partitions)))
		return m, true
	}
	next = cur
	for _, tp := range m.Partitions {
		if !next.Covers(tp) {
			next.Partitions = SortTPs(append(slices.Clone(next.Partitions), tp))
			changed = true
		}
	}
	return next, changed
}

// PendingTxn returns the transactional_id of a mark that covers tp.
func (g *Group) PendingTxn(tp TP) (string, bool) {
	for _, id := range slices.Sorted(maps.Keys(g.TxnMarks)) {
		if g.TxnMarks[id].Covers(tp) {
			return id, true
		}
	}
	return "", false
}

// State returns "Stable" with members, else "Empty".
func (g *Group) State() string {
	if len(g.Members) > 0 {
		return StateStable
	}
	return StateEmpty
}

// Topics returns the distinct topics of the expansion, sorted.
func (g *Group) Topics() []string {
	var out []string
	for _, tp := range g.Partitions {
		if len(out) == 0 || out[len(out)-1] != tp.Topic {
			out = append(out, tp.Topic)
		}
	}
	return out
}

// HasPartition reports whether tp is in the expansion.
func (g *Group) HasPartition(tp TP) bool {
	_, ok := slices.BinarySearchFunc(g.Partitions, tp, cmpTP)
	return ok
}

// JoinResult is the answer of Join.
type JoinResult struct {
	Member     string
	Generation uint64
	Assigned   []TP
	Resumed    bool
}

// checkTopic enforces topic_not_assigned_to_group; an empty topic is
// accepted (multi-topic groups omit it).
func (g *Group) checkTopic(topic string) error {
	if topic == "" || g.Selector.Matches(topic) {
		return nil
	}
	return errcode.TopicNotAssignedToGroup.New("topic is not selected by the group", "group", g.Name, "topic", topic)
}

// Join adds a member. clientID that names an existing member resumes it
// (same generation and assignment, resumed=true); any other id becomes a new
// member "<clientID>-NNNN" (suffix from suffix()) and starts a rebalance.
func (g *Group) Join(clientID, topic string, now time.Time, suffix func() int) (JoinResult, error) {
	if clientID == "" {
		return JoinResult{}, errcode.MissingParameter.New("member is required", "param", "member")
	}
	if err := g.checkTopic(topic); err != nil {
		return JoinResult{}, err
	}
	g.LastActivity = now
	if m, ok := g.Members[clientID]; ok {
		m.LastHeartbeat = now
		return JoinResult{Member: m.ID, Generation: g.Generation, Assigned: slices.Clone(m.Assigned), Resumed: true}, nil
	}
	var id string
	for range 100 {
		id = fmt.Sprintf("%s-%04d", clientID, suffix()%10000)
		if _, taken := g.Members[id]; !taken {
			break
		}
	}
	if _, taken := g.Members[id]; taken {
		return JoinResult{}, errcode.CoordinatorNotAvailable.New("no free member id suffix", "member", clientID)
	}
	g.Members[id] = &Member{ID: id, LastHeartbeat: now}
	g.rebalance(now)
	m := g.Members[id]
	return JoinResult{Member: id, Generation: g.Generation, Assigned: slices.Clone(m.Assigned)}, nil
}

func (g *Group) member(id string) (*Member, error) {
	if id == "" {
		return nil, errcode.MissingParameter.New("member is required", "param", "member")
	}
	m, ok := g.Members[id]
	if !ok {
		return nil, errcode.MemberNotFound.New("member is not active in the group", "member", id, "group", g.Name)
	}
	return m, nil
}

func (g *Group) checkGeneration(m string, requested uint64) error {
	if requested != g.Generation {
		return errcode.GenMismatch.New("stale generation: rejoin",
			"current", strconv.FormatUint(g.Generation, 10), "requested", strconv.FormatUint(requested, 10),
			"group", g.Name, "member", m)
	}
	return nil
}

// Sync returns the member's assignment in generation gen.
func (g *Group) Sync(member string, gen uint64, topic string, now time.Time) ([]TP, error) {
	if err := g.checkTopic(topic); err != nil {
		return nil, err
	}
	m, err := g.member(member)
	if err != nil {
		return nil, err
	}
	if err := g.checkGeneration(member, gen); err != nil {
		return nil, err
	}
	m.LastHeartbeat, g.LastActivity = now, now
	return slices.Clone(m.Assigned), nil
}

// Heartbeat renews the member's session; a given generation other than the
// current one is GEN_MISMATCH (the member must rejoin).
func (g *Group) Heartbeat(member, topic string, gen *uint64, now time.Time) (uint64, error) {
	if err := g.checkTopic(topic); err != nil {
		return 0, err
	}
	m, err := g.member(member)
	if err != nil {
		return 0, err
	}
	if gen != nil {
		if err := g.checkGeneration(member, *gen); err != nil {
			return 0, err
		}
	}
	m.LastHeartbeat, g.LastActivity = now, now
	return g.Generation, nil
}

// Leave removes the member and rebalances the rest.
func (g *Group) Leave(member, topic string, now time.Time) error {
	if err := g.checkTopic(topic); err != nil {
		return err
	}
	if _, err := g.member(member); err != nil {
		return err
	}
	delete(g.Members, member)
	g.LastActivity = now
	g.rebalance(now)
	return nil
}

// Expire removes members silent for longer than session and rebalances
// when any left. It returns the removed ids.
func (g *Group) Expire(now time.Time, session time.Duration) []string {
	var gone []string
	for id, m := range g.Members {
		if now.Sub(m.LastHeartbeat) > session {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	for _, id := range gone {
		delete(g.Members, id)
	}
	g.rebalance(now)
	slices.Sort(gone)
	return gone
}

// SetPartitions replaces the expansion (a topic grew, a pattern matched a
// new topic, a topic went away) and rebalances when it changed. Offsets of
// partitions that left the expansion are kept until tombstoned.
func (g *Group) SetPartitions(parts []TP, now time.Time) bool {
	parts = SortTPs(slices.Clone(parts))
	if slices.Equal(parts, g.Partitions) {
		return false
	}
	g.Partitions = parts
	if len(g.Members) > 0 {
		g.rebalance(now)
	}
	return true
}

// rebalance advances the generation and assigns every partition to at most
// one member: each member gets floor or ceil of partitions/members, keeping
// as many of its current partitions as its quota allows (sticky), and the
// extra ceil slots go to the members that already hold the most, so a
// membership change moves as few partitions as possible.
func (g *Group) rebalance(now time.Time) {
	g.Generation++
	g.LastRebalance = now
	ids := slices.Sorted(maps.Keys(g.Members))
	if len(ids) == 0 {
		return
	}
	valid := make(map[TP]bool, len(g.Partitions))
	for _, tp := range g.Partitions {
		valid[tp] = true
	}
	held := map[string][]TP{}
	taken := map[TP]bool{}
	for _, id := range ids {
		for _, tp := range g.Members[id].Assigned {
			if valid[tp] && !taken[tp] {
				taken[tp] = true
				held[id] = append(held[id], tp)
			}
		}
	}
	base, extra := len(g.Partitions)/len(ids), len(g.Partitions)%len(ids)
	byHeld := slices.Clone(ids)
	slices.SortStableFunc(byHeld, func(a, b string) int { return len(held[b]) - len(held[a]) })
	quota := map[string]int{}
	for i, id := range byHeld {
		quota[id] = base
		if i < extra {
			quota[id]++
		}
	}
	assigned := map[TP]bool{}
	for _, id := range ids {
		keep := held[id]
		if len(keep) > quota[id] {
			keep = keep[:quota[id]]
		}
		g.Members[id].Assigned = slices.Clone(keep)
		for _, tp := range keep {
			assigned[tp] = true
		}
	}
	var pool []TP
	for _, tp := range g.Partitions {
		if !assigned[tp] {
			pool = append(pool, tp)
		}
	}
	for _, id := range ids {
		m := g.Members[id]
		for len(m.Assigned) < quota[id] && len(pool) > 0 {
			m.Assigned = append(m.Assigned, pool[0])
			pool = pool[1:]
		}
		SortTPs(m.Assigned)
	}
}

// Owner returns the member assigned tp ("" when none).
func (g *Group) Owner(tp TP) string {
	for id, m := range g.Members {
		if slices.Contains(m.Assigned, tp) {
			return id
		}
	}
	return ""
}

// AssignedCount returns the partitions held by active members.
func (g *Group) AssignedCount() int {
	n := 0
	for _, m := range g.Members {
		n += len(m.Assigned)
	}
	return n
}

// Committed returns the committed next offset of tp.
func (g *Group) Committed(tp TP) (uint64, bool) {
	o, ok := g.Offsets[tp]
	return o, ok
}

// SetOffset applies a persisted commit.
func (g *Group) SetOffset(tp TP, off uint64) { g.Offsets[tp] = off }

// commitTopic resolves the topic a commit applies to.
func (g *Group) commitTopic(topic string) (string, error) {
	if topic == "" {
		if g.Selector.Topic != "" {
			return g.Selector.Topic, nil
		}
		return "", errcode.MissingTopic.New("topic is required for a multi-topic group", "param", "topic")
	}
	return topic, g.checkTopic(topic)
}

// checkFence runs the member and generation checks shared by both commits.
func (g *Group) checkFence(command, member string, gen *uint64) error {
	if member == "" {
		return errcode.MissingParameter.New("member is required", "param", "member", "command", command)
	}
	if gen == nil {
		return errcode.MissingGeneration.New("generation is required", "command", command)
	}
	if _, err := g.member(member); err != nil {
		return err
	}
	return g.checkGeneration(member, *gen)
}

func (g *Group) notOwner(tp TP, member string) error {
	return errcode.NotOwner.New("partition is not assigned to the member in this generation",
		"partition", strconv.FormatInt(int64(tp.Partition), 10), "member", member, "group", g.Name,
		"generation", strconv.FormatUint(g.Generation, 10), "topic", tp.Topic)
}

// CheckCommit validates COMMIT_OFFSET. write is false when the offset equals
// the committed one (idempotent: answer OK, write nothing).
func (g *Group) CheckCommit(topic string, partition int32, offset uint64, member string, gen *uint64) (tp TP, write bool, err error) {
	if err := g.checkFence("COMMIT_OFFSET", member, gen); err != nil {
		return TP{}, false, err
	}
	if topic, err = g.commitTopic(topic); err != nil {
		return TP{}, false, err
	}
	tp = TP{Topic: topic, Partition: partition}
	if !slices.Contains(g.Members[member].Assigned, tp) {
		return tp, false, g.notOwner(tp, member)
	}
	if cur, ok := g.Offsets[tp]; ok {
		if offset < cur {
			return tp, false, errcode.OffsetRegression.New("commit is below the committed offset",
				"reason", fmt.Sprintf("offset %d below committed %d", offset, cur),
				"committed", strconv.FormatUint(cur, 10), "requested", strconv.FormatUint(offset, 10))
		}
		if offset == cur {
			return tp, false, nil
		}
	}
	return tp, true, nil
}

// offsetEntries returns the entries of an offset list command (BATCH_COMMIT,
// RESET_OFFSETS) on topic: the structured entries, or raw parsed when there
// are none, at most 1,024 (invalid_batch_commit_entry with a reason), no
// negative partition, no partition twice (duplicate_partition); nothing at
// all is no_valid_offsets.
func (g *Group) offsetEntries(topic string, entries []wire.PartitionOffset, raw string) ([]wire.PartitionOffset, error) {
	if len(entries) == 0 {
		if raw == "" {
			return nil, errcode.NoValidOffsets.New("offsets is empty")
		}
		var err error
		if entries, err = wire.ParseOffsetList(raw); err != nil {
			return nil, err
		}
	}
	if len(entries) > wire.MaxOffsetEntries {
		return nil, errcode.InvalidBatchCommitEntry.New("more than 1,024 offset entries",
			"reason", "too_many_entries", "count", strconv.Itoa(len(entries)))
	}
	for _, e := range entries {
		if e.Partition < 0 {
			return nil, errcode.InvalidBatchCommitEntry.New("negative partition", "reason", "bad_partition",
				"entry", fmt.Sprintf("P%d:%d", e.Partition, e.Offset))
		}
	}
	if p, dup := wire.DuplicatePartition(entries); dup {
		return nil, errcode.DuplicatePartition.New("partition repeats in the list",
			"partition", strconv.FormatInt(int64(p), 10), "group", g.Name, "topic", topic)
	}
	return entries, nil
}

// BatchResult is what an accepted BATCH_COMMIT writes and answers.
type BatchResult struct {
	// Write holds the entries above their committed offset, to persist.
	Write map[TP]uint64
	// Batched is the answer count: entries written plus entries equal to
	// the committed offset (idempotent retries).
	Batched int
}

// CheckBatch validates BATCH_COMMIT (spec 4.5): member and generation
// first, then the entries (structured, or raw parsed here), duplicates,
// ownership of every partition; any failure rejects the whole batch.
// Entries below their committed offset leave it alone and are not counted;
// when nothing usable remains the answer is no_valid_offsets.
func (g *Group) CheckBatch(topic, member string, gen *uint64, entries []wire.PartitionOffset, raw string) (BatchResult, error) {
	if err := g.checkFence("BATCH_COMMIT", member, gen); err != nil {
		return BatchResult{}, err
	}
	topic, err := g.commitTopic(topic)
	if err != nil {
		return BatchResult{}, err
	}
	if entries, err = g.offsetEntries(topic, entries, raw); err != nil {
		return BatchResult{}, err
	}
	owned := make(map[TP]bool, len(g.Members[member].Assigned))
	for _, tp := range g.Members[member].Assigned {
		owned[tp] = true
	}
	for _, e := range entries {
		tp := TP{Topic: topic, Partition: e.Partition}
		if !owned[tp] {
			return BatchResult{}, g.notOwner(tp, member)
		}
	}
	res := BatchResult{Write: map[TP]uint64{}}
	for _, e := range entries {
		tp := TP{Topic: topic, Partition: e.Partition}
		cur, ok := g.Offsets[tp]
		switch {
		case ok && e.Offset < cur:
			continue
		case ok && e.Offset == cur:
		default:
			res.Write[tp] = e.Offset
		}
		res.Batched++
	}
	if res.Batched == 0 {
		return BatchResult{}, errcode.NoValidOffsets.New("every entry is below its committed offset",
			"reason", "all_entries_below_committed")
	}
	return res, nil
}

// CheckReset validates RESET_OFFSETS, the operator's reset of committed
// offsets (Kafka's kafka-consumer-groups --reset-offsets): the group has no
// active members (group_not_empty), topic is given (missing_topic) and
// selected by the group (topic_not_assigned_to_group), the entries follow
// BATCH_COMMIT's list rules, and every partition is in the group's expansion
// (partition_not_found). Offsets may move down or up, and an entry equal to
// the committed offset is written too. It returns every entry to write; any
// failure rejects the whole request.
func (g *Group) CheckReset(topic string, entries []wire.PartitionOffset, raw string) (map[TP]uint64, error) {
	if topic == "" {
		return nil, errcode.MissingTopic.New("topic is required", "param", "topic", "command", "RESET_OFFSETS")
	}
	if len(g.Members) > 0 {
		return nil, errcode.GroupNotEmpty.New("offsets can only be reset while the group has no active members",
			"group", g.Name, "members", strconv.Itoa(len(g.Members)))
	}
	if err := g.checkTopic(topic); err != nil {
		return nil, err
	}
	entries, err := g.offsetEntries(topic, entries, raw)
	if err != nil {
		return nil, err
	}
	out := make(map[TP]uint64, len(entries))
	for _, e := range entries {
		tp := TP{Topic: topic, Partition: e.Partition}
		if !g.HasPartition(tp) {
			return nil, errcode.PartitionNotFound.New("partition is not in the group's expansion of the topic",
				"topic", topic, "partition", strconv.FormatInt(int64(e.Partition), 10))
		}
		out[tp] = e.Offset
	}
	return out, nil
}

// CheckTxnOffsets checks offsets a transaction stages (SEND_OFFSETS_TO_TXN,
// and again before its commit) as BATCH_COMMIT would — member,
// generation, the topic, the entries, partition ownership — and returns the
// parsed entries with the topic they apply to. The offsets are committed
// once the transaction commits (CommitTxnOffsets).
func (g *Group) CheckTxnOffsets(topic, member string, gen *uint64, entries []wire.PartitionOffset, raw string) (string, []wire.PartitionOffset, error) {
	if err := g.checkFence("SEND_OFFSETS_TO_TXN", member, gen); err != nil {
		return "", nil, err
	}
	topic, err := g.commitTopic(topic)
	if err != nil {
		return "", nil, err
	}
	if entries, err = g.offsetEntries(topic, entries, raw); err != nil {
		return "", nil, err
	}
	for _, e := range entries {
		tp := TP{Topic: topic, Partition: e.Partition}
		if !slices.Contains(g.Members[member].Assigned, tp) {
			return "", nil, g.notOwner(tp, member)
		}
	}
	return topic, entries, nil
}
