package fsm

import (
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Topic defaults and limits (spec 2.1, 8).
const (
	DefaultPartitions        = 4
	DefaultReplicationFactor = 3
	DefaultCleanupPolicy     = "delete"
	DefaultPartitioner       = "hash_key"
	DefaultAuthPolicy        = "open"
	// MaxPartitions bounds one topic's partition count so a single CREATE
	// cannot blow up the replicated state (the spec sets no limit).
	MaxPartitions = 10000
	// MaxTopicNameLen is the spec's portable name limit.
	MaxTopicNameLen = 249
)

var (
	cleanupPolicies = []string{"delete", "compact", "delete,compact"}
	partitioners    = []string{"hash_key", "round_robin"}
	authPolicies    = []string{"open", "deny_write", "deny_read", "acl"}
)

// ValidTopicName reports whether name meets the portable contract: 1-249
// ASCII letters, digits, '.', '_', '-' or '=', and not "." or "..".
func ValidTopicName(name string) bool {
	if len(name) == 0 || len(name) > MaxTopicNameLen || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-', c == '=':
		default:
			return false
		}
	}
	return true
}

// internalTopicNames are broker-owned: only broker roles create them (with
// internal=true) and they can be neither deleted nor truncated.
func isInternalName(name string) bool {
	return name == ConsumerOffsetsTopic || name == TransactionStateTopic
}

func checkName(name string) error {
	if !ValidTopicName(name) {
		return errcode.InvalidTopicName.New("topic names are 1-249 ASCII letters, digits, '.', '_', '-' or '=', and not '.' or '..'", "topic", name)
	}
	return nil
}

// liveTopic returns the ACTIVE topic name, or topic_not_found (a topic being
// deleted is already gone for clients).
func liveTopic(tx *txn, name string) (*metav1.Topic, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	t := tx.topic(name)
	if !Live(t) {
		return nil, errcode.TopicNotFound.New("", "topic", name)
	}
	return t, nil
}

func applyCreateTopic(tx *txn, cmd *metav1.CreateTopicCommand) (*metav1.CreateTopicResponse, error) {
	req := cmd.GetRequest()
	name := req.GetName()
	if err := checkName(name); err != nil {
		return nil, err
	}
	if isInternalName(name) && !req.GetInternal() {
		return nil, errcode.InternalTopicWriteForbidden.New("the internal topic is defined by the broker", "topic", name)
	}
	old := tx.topic(name)
	if old != nil && !Live(old) {
		return nil, errcode.TopicCleanupPending.New("the topic was deleted and node-local cleanup is still outstanding; retry after it finishes",
			"topic", name, "nodes", strings.Join(old.GetCleanupPendingNodes(), ","))
	}

	var cfg *metav1.TopicConfig
	if old == nil {
		cfg = newTopicConfig(name, req, cmd.GetDefaults())
	} else {
		cfg = proto.CloneOf(old.GetConfig())
		if err := checkImmutable(cfg, req); err != nil {
			return nil, err
		}
		if req.Partitions != nil && req.GetPartitions() < cfg.GetPartitions() {
			return nil, errcode.PartitionCountDecrease.New("partition count may only grow",
				"topic", name, "current", itoa(cfg.GetPartitions()), "requested", itoa(req.GetPartitions()))
		}
	}
	if err := patchConfig(cfg, req); err != nil {
		return nil, err
	}
	if err := validateConfig(cfg); err != nil {
		return nil, err
	}
	// Compaction needs topic lifecycle protocol 2 on every partition server
	// (spec 4.4 rule 4) when it is being turned on; the internal topic is
	// never compacted by the distributed cleaner, so it is exempt.
	policyChanged := old == nil || old.GetConfig().GetCleanupPolicy() != cfg.GetCleanupPolicy()
	if policyChanged && strings.Contains(cfg.GetCleanupPolicy(), "compact") && !cfg.GetInternal() {
		if err := requireLifecycle(tx, 2, errcode.UnsupportedTopicPolicy, "compaction needs topic lifecycle protocol 2 on every live partition server"); err != nil {
			return nil, err
		}
	}

	if old == nil {
		parts, err := assignPartitions(tx, name, 0, cfg.GetPartitions(), cfg.GetReplicationFactor())
		if err != nil {
			return nil, err
		}
		cfg.Revision, cfg.LifecycleEpoch, cfg.State = 1, 1, metav1.TopicState_TOPIC_STATE_ACTIVE
		t := &metav1.Topic{Config: cfg, Partitions: parts}
		tx.putTopic(t)
		return &metav1.CreateTopicResponse{Topic: t, Created: true, Changed: true}, nil
	}

	if proto.Equal(cfg, old.GetConfig()) {
		return &metav1.CreateTopicResponse{Topic: old}, nil
	}
	t := &metav1.Topic{Config: cfg, Partitions: old.GetPartitions(), CleanupPendingNodes: old.GetCleanupPendingNodes()}
	if have := int32(len(old.GetPartitions())); cfg.GetPartitions() > have {
		// Existing partitions keep their replicas, leaders, epochs and
		// committed HWMs (spec 4.4 rule 5); only the new ones are placed.
		added, err := assignPartitions(tx, name, have, cfg.GetPartitions(), cfg.GetReplicationFactor())
		if err != nil {
			return nil, err
		}
		t.Partitions = append(slices.Clip(old.GetPartitions()), added...)
	}
	cfg.Revision++
	tx.putTopic(t)
	return &metav1.CreateTopicResponse{Topic: t, Changed: true}, nil
}

func newTopicConfig(name string, req *metav1.CreateTopicRequest, d *metav1.TopicDefaults) *metav1.TopicConfig {
	rf := d.GetReplicationFactor()
	if rf <= 0 {
		rf = DefaultReplicationFactor
	}
	policy := d.GetCleanupPolicy()
	if policy == "" {
		policy = DefaultCleanupPolicy
	}
	if req.GetInternal() {
		policy = "compact" // spec 2.1: __consumer_offsets is compacted
	}
	return &metav1.TopicConfig{
		Name:              name,
		Partitions:        DefaultPartitions,
		ReplicationFactor: rf,
		CleanupPolicy:     policy,
		Partitioner:       DefaultPartitioner,
		AuthPolicy:        DefaultAuthPolicy,
		Internal:          req.GetInternal(),
		// Fields set from the request by patchConfig; immutable ones are
		// taken as given on creation.
		Idempotent:      req.GetIdempotent(),
		EventSourcing:   req.GetEventSourcing(),
		AggregateReplay: req.GetAggregateReplay(),
	}
}

// checkImmutable rejects a patch that changes replication_factor, idempotent,
// event_sourcing, aggregate_replay or internal. Restating the current value is
// fine (spec 4.4 rule 2).
func checkImmutable(cfg *metav1.TopicConfig, req *metav1.CreateTopicRequest) error {
	bad := func(field, current, requested string) error {
		return errcode.ImmutableTopicField.New(field+" cannot change after creation",
			"topic", cfg.GetName(), "field", field, "current", current, "requested", requested)
	}
	if req.ReplicationFactor != nil && req.GetReplicationFactor() != cfg.GetReplicationFactor() {
		return bad("replication_factor", itoa(cfg.GetReplicationFactor()), itoa(req.GetReplicationFactor()))
	}
	flags := []struct {
		field     string
		requested *bool
		current   bool
	}{
		{"idempotent", req.Idempotent, cfg.GetIdempotent()},
		{"event_sourcing", req.EventSourcing, cfg.GetEventSourcing()},
		{"aggregate_replay", req.AggregateReplay, cfg.GetAggregateReplay()},
	}
	for _, f := range flags {
		if f.requested != nil && *f.requested != f.current {
			return bad(f.field, strconv.FormatBool(f.current), strconv.FormatBool(*f.requested))
		}
	}
	if req.GetInternal() != cfg.GetInternal() {
		return bad("internal", strconv.FormatBool(cfg.GetInternal()), strconv.FormatBool(req.GetInternal()))
	}
	// An aggregate replay topic places each match id by its key: more
	// partitions would move a match's later events away from its history
	// (spec 4.8: partition-count changes are rejected).
	if cfg.GetAggregateReplay() && req.Partitions != nil && req.GetPartitions() != cfg.GetPartitions() {
		return bad("partitions", itoa(cfg.GetPartitions()), itoa(req.GetPartitions()))
	}
	return nil
}

// patchConfig applies every field the request carries; omitted fields keep
// their value, explicit zero, false and empty values are applied.
func patchConfig(cfg *metav1.TopicConfig, req *metav1.CreateTopicRequest) error {
	patch(&cfg.Partitions, req.Partitions)
	patch(&cfg.ReplicationFactor, req.ReplicationFactor)
	patch(&cfg.CleanupPolicy, req.CleanupPolicy)
	patch(&cfg.RetentionHours, req.RetentionHours)
	patch(&cfg.RetentionBytes, req.RetentionBytes)
	patch(&cfg.Partitioner, req.Partitioner)
	patch(&cfg.AuthPolicy, req.AuthPolicy)
	patch(&cfg.ReadAcl, req.ReadAcl)
	patch(&cfg.WriteAcl, req.WriteAcl)
	if req.MinInSyncReplicas != nil {
		v, err := parseMinISR(req.GetMinInSyncReplicas(), cfg)
		if err != nil {
			return err
		}
		cfg.MinInSyncReplicas = v
	}
	return nil
}

// patch sets *field to the request's value when the request carries one.
func patch[T any](field *T, requested *T) {
	if requested != nil {
		*field = *requested
	}
}

// parseMinISR parses "default" (no override) or a number 1..replication
// factor.
func parseMinISR(s string, cfg *metav1.TopicConfig) (*int32, error) {
	if s == "default" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 || int32(n) > cfg.GetReplicationFactor() {
		return nil, errcode.InvalidParameter.New("min_in_sync_replicas must be a number from 1 to the replication factor, or default",
			"param", "min_in_sync_replicas", "value", s, "replication_factor", itoa(cfg.GetReplicationFactor()), "topic", cfg.GetName())
	}
	v := int32(n)
	return &v, nil
}

// validateConfig checks the merged definition.
func validateConfig(cfg *metav1.TopicConfig) error {
	name := cfg.GetName()
	if p := cfg.GetPartitions(); p < 1 || p > MaxPartitions {
		return errcode.InvalidParameter.New("partitions must be between 1 and "+itoa(MaxPartitions), "param", "partitions", "value", itoa(p), "topic", name)
	}
	if cfg.GetReplicationFactor() < 1 {
		return errcode.InvalidReplicationFactor.New("replication_factor must be at least 1", "replication_factor", itoa(cfg.GetReplicationFactor()), "topic", name)
	}
	if !slices.Contains(cleanupPolicies, cfg.GetCleanupPolicy()) {
		return errcode.InvalidTopicPolicy.New("cleanup_policy must be delete, compact or delete,compact", "cleanup_policy", cfg.GetCleanupPolicy(), "topic", name)
	}
	if cfg.GetEventSourcing() && strings.Contains(cfg.GetCleanupPolicy(), "compact") {
		return errcode.InvalidTopicPolicy.New("event-sourcing topics need non-compacted history", "cleanup_policy", cfg.GetCleanupPolicy(), "topic", name)
	}
	if cfg.GetRetentionHours() < 0 {
		return errcode.InvalidParameter.New("retention_hours must not be negative", "param", "retention_hours", "topic", name)
	}
	if cfg.GetRetentionBytes() < 0 {
		return errcode.InvalidParameter.New("retention_bytes must not be negative", "param", "retention_bytes", "topic", name)
	}
	if !slices.Contains(partitioners, cfg.GetPartitioner()) {
		return errcode.InvalidParameter.New("partitioner must be hash_key or round_robin", "param", "partitioner", "value", cfg.GetPartitioner(), "topic", name)
	}
	if !slices.Contains(authPolicies, cfg.GetAuthPolicy()) {
		return errcode.InvalidParameter.New("auth_policy must be open, deny_write, deny_read or acl", "param", "auth_policy", "value", cfg.GetAuthPolicy(), "topic", name)
	}
	if cfg.GetAggregateReplay() && (!cfg.GetEventSourcing() || !cfg.GetIdempotent()) {
		return errcode.InvalidParameter.New("aggregate_replay needs event_sourcing and idempotent", "param", "aggregate_replay", "topic", name)
	}
	if cfg.MinInSyncReplicas != nil && (cfg.GetMinInSyncReplicas() < 1 || cfg.GetMinInSyncReplicas() > cfg.GetReplicationFactor()) {
		return errcode.InvalidParameter.New("min_in_sync_replicas must be from 1 to the replication factor", "param", "min_in_sync_replicas", "topic", name)
	}
	return nil
}

// requireLifecycle fails with code unless every live partition server
// advertises lifecycle protocol version v.
func requireLifecycle(tx *txn, v uint32, code errcode.Code, msg string) error {
	for _, n := range tx.liveNodes(metav1.NodeRole_NODE_ROLE_PARTITIOND) {
		if !slices.Contains(n.GetLifecycleVersions(), v) {
			return code.New(msg, "node", n.GetId(), "version", strconv.FormatUint(uint64(v), 10))
		}
	}
	return nil
}

func applyAlterTopicConfig(tx *txn, req *metav1.AlterTopicConfigRequest) (*metav1.AlterTopicConfigResponse, error) {
	t, err := liveTopic(tx, req.GetName())
	if err != nil {
		return nil, err
	}
	cfg := proto.CloneOf(t.GetConfig())
	v, err := parseMinISR(req.GetMinInSyncReplicas(), cfg)
	if err != nil {
		return nil, err
	}
	cfg.MinInSyncReplicas = v
	if proto.Equal(cfg, t.GetConfig()) {
		return &metav1.AlterTopicConfigResponse{Topic: t}, nil
	}
	cfg.Revision++
	nt := &metav1.Topic{Config: cfg, Partitions: t.GetPartitions(), CleanupPendingNodes: t.GetCleanupPendingNodes()}
	tx.putTopic(nt)
	return &metav1.AlterTopicConfigResponse{Topic: nt}, nil
}

// applyDeleteTopic marks the topic DELETING, under a new lifecycle epoch,
// until every replica node reported its cleanup (REPORT_CLEANUP) for that
// epoch; the name cannot be recreated meanwhile. The
// active-members / open-transaction guard (topic_delete_blocked) is checked
// by the proposer before it proposes: metad does not hold group state.
func applyDeleteTopic(tx *txn, req *metav1.DeleteTopicRequest) (*metav1.DeleteTopicResponse, error) {
	name := req.GetName()
	if err := checkName(name); err != nil {
		return nil, err
	}
	if isInternalName(name) {
		return nil, errcode.InternalTopicDeleteForbidden.New("the internal topic cannot be deleted", "topic", name)
	}
	t := tx.topic(name)
	if !Live(t) {
		if req.GetIfExists() {
			return &metav1.DeleteTopicResponse{Deleted: false, CleanupPending: t != nil}, nil
		}
		return nil, errcode.TopicNotFound.New("", "topic", name)
	}
	if t.GetConfig().GetInternal() {
		return nil, errcode.InternalTopicDeleteForbidden.New("internal topics cannot be deleted", "topic", name)
	}
	pending := replicaNodes(t)
	if len(pending) == 0 {
		tx.removeTopic(name)
		return &metav1.DeleteTopicResponse{Deleted: true}, nil
	}
	cfg := proto.CloneOf(t.GetConfig())
	cfg.State = metav1.TopicState_TOPIC_STATE_DELETING
	// The deletion is a lifecycle transition of its own: a cleanup report
	// for the epoch before it (a truncate's, still in flight when the
	// DELETE committed) is then stale_lifecycle_epoch and cannot count as
	// the delete cleanup. Without this, such a report removed the topic
	// while the node still held the old incarnation's partitions, and a
	// recreated topic (lifecycle epoch 1) was served by them.
	cfg.LifecycleEpoch++
	tx.putTopic(&metav1.Topic{Config: cfg, Partitions: t.GetPartitions(), CleanupPendingNodes: pending})
	return &metav1.DeleteTopicResponse{Deleted: true, CleanupPending: true}, nil
}

// applyTruncateTopic is the one TOPIC_TRUNCATE transition (spec 4.4): revision
// +1, lifecycle epoch +1, every partition's leader epoch +1 and committed HWM
// 0, cleanup tracked per replica node. The active-members guard is the
// proposer's, as for DELETE.
func applyTruncateTopic(tx *txn, req *metav1.TruncateTopicRequest) (*metav1.TruncateTopicResponse, error) {
	name := req.GetName()
	if err := checkName(name); err != nil {
		return nil, err
	}
	if isInternalName(name) {
		return nil, errcode.InternalTopicDeleteForbidden.New("the internal topic cannot be truncated", "topic", name, "command", "TRUNCATE")
	}
	t, err := liveTopic(tx, name)
	if err != nil {
		return nil, err
	}
	if t.GetConfig().GetInternal() {
		return nil, errcode.InternalTopicDeleteForbidden.New("internal topics cannot be truncated", "topic", name, "command", "TRUNCATE")
	}
	if req.GetExpectedRevision() == 0 {
		return nil, errcode.MissingParameter.New("TRUNCATE needs expected_revision", "param", "expected_revision", "topic", name)
	}
	if cur := t.GetConfig().GetRevision(); req.GetExpectedRevision() != cur {
		return nil, errcode.VersionConflict.New("expected_revision is not the topic's current revision",
			"topic", name, "current", u64(cur), "expected", u64(req.GetExpectedRevision()))
	}
	if err := requireLifecycle(tx, 1, errcode.UnsupportedLifecycleProtocol, "TRUNCATE needs topic lifecycle protocol 1 on every live partition server"); err != nil {
		return nil, err
	}
	cfg := proto.CloneOf(t.GetConfig())
	cfg.Revision++
	cfg.LifecycleEpoch++
	parts := make([]*metav1.PartitionState, len(t.GetPartitions()))
	for i, p := range t.GetPartitions() {
		np := proto.CloneOf(p)
		np.LeaderEpoch++
		np.CommittedHwm = 0
		parts[i] = np
	}
	nt := &metav1.Topic{Config: cfg, Partitions: parts, CleanupPendingNodes: replicaNodes(t)}
	tx.putTopic(nt)
	return &metav1.TruncateTopicResponse{Topic: nt, CleanupPending: len(nt.GetCleanupPendingNodes()) > 0}, nil
}

// applyReportCleanup records that a node finished node-local cleanup for the
// topic's current lifecycle epoch. The last report of a deleted topic removes
// it. Reports for topics that are gone, or from nodes not pending, are no-ops
// (a retried report is harmless).
func applyReportCleanup(tx *txn, req *metav1.ReportCleanupRequest) (*metav1.ReportCleanupResponse, error) {
	if req.GetNodeId() == "" {
		return nil, errcode.MissingParameter.New("REPORT_CLEANUP needs node_id", "param", "node_id")
	}
	if err := checkName(req.GetTopic()); err != nil {
		return nil, err
	}
	t := tx.topic(req.GetTopic())
	if t == nil {
		return &metav1.ReportCleanupResponse{}, nil
	}
	if cur := t.GetConfig().GetLifecycleEpoch(); req.GetLifecycleEpoch() != cur {
		return nil, errcode.StaleLifecycleEpoch.New("cleanup report for another lifecycle epoch",
			"topic", req.GetTopic(), "current", u64(cur), "requested", u64(req.GetLifecycleEpoch()))
	}
	i := slices.Index(t.GetCleanupPendingNodes(), req.GetNodeId())
	if i < 0 {
		return &metav1.ReportCleanupResponse{}, nil
	}
	pending := slices.Delete(slices.Clone(t.GetCleanupPendingNodes()), i, i+1)
	if len(pending) == 0 && !Live(t) {
		tx.removeTopic(req.GetTopic())
		return &metav1.ReportCleanupResponse{}, nil
	}
	tx.putTopic(&metav1.Topic{Config: t.GetConfig(), Partitions: t.GetPartitions(), CleanupPendingNodes: pending})
	return &metav1.ReportCleanupResponse{}, nil
}

// replicaNodes returns every node holding a replica of t, sorted.
func replicaNodes(t *metav1.Topic) []string {
	var ids []string
	for _, p := range t.GetPartitions() {
		ids = append(ids, p.GetReplicas()...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }

func u64(v uint64) string { return strconv.FormatUint(v, 10) }
