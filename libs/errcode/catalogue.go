package errcode

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Code is one catalogue entry: a spec error code with its class and retryable
// flag. Codes are comparable values; build errors with New.
type Code struct {
	name      string
	class     Class
	retryable bool
}

// Name returns the code as it appears on the wire.
func (c Code) Name() string { return c.name }

// Class returns the catalogue class of the code.
func (c Code) Class() Class { return c.class }

// Retryable reports the catalogue retryable flag.
func (c Code) Retryable() bool { return c.retryable }

// Error makes a Code usable as an error target for errors.Is.
func (c Code) Error() string { return c.New("").Error() }

// New builds an Error of this code with a message and alternating key, value
// field pairs. An odd trailing key gets an empty value.
func (c Code) New(msg string, kv ...string) *Error {
	e := &Error{Code: c.name, Class: c.class, Retryable: c.retryable, Message: msg}
	for i := 0; i < len(kv); i += 2 {
		v := ""
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		e.Fields = setField(e.Fields, kv[i], v)
	}
	return e
}

// Errorf builds an Error of this code with a formatted message.
func (c Code) Errorf(format string, args ...any) *Error {
	return c.New(fmt.Sprintf(format, args...))
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Code{}
)

func register(name string, class Class) Code {
	c := Code{name: name, class: class, retryable: class == ClassRouting || class == ClassAvailability}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("errcode: duplicate code " + name)
	}
	registry[name] = c
	return c
}

// Lookup returns the catalogue entry for name. Unregistered names get the
// class the public broker derives from the name's shape (WIRE-V2 section 8):
// not_authorized/authorization_ prefixes are authorization, _not_found and
// _missing suffixes are not_found, missing_/invalid_/empty_/malformed_/
// decode_/unmarshal_ prefixes, unknown_command and distribution_* are
// validation, everything else internal; all non-retryable.
func Lookup(name string) Code {
	registryMu.RLock()
	c, ok := registry[name]
	registryMu.RUnlock()
	if ok {
		return c
	}
	lower := strings.ToLower(name)
	class := ClassInternal
	switch {
	case strings.HasPrefix(lower, "not_authorized"), strings.HasPrefix(lower, "authorization_"):
		class = ClassAuthorization
	case strings.HasSuffix(lower, "_not_found"), strings.HasSuffix(lower, "_missing"):
		class = ClassNotFound
	case hasAnyPrefix(lower, "missing_", "invalid_", "empty_", "malformed_", "decode_", "unmarshal_", "distribution_"),
		lower == "unknown_command":
		class = ClassValidation
	}
	return Code{name: name, class: class}
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// All returns every registered code sorted by name.
func All() []Code {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Code, 0, len(registry))
	for _, c := range registry {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// The catalogue. Names, classes and retryability follow SERVICE-SPEC section 7
// and the public broker's registry (WIRE-V2 section 8); codes Strata adds are
// marked "Strata".
var (
	// Routing (retryable): follow the redirect data and retry.
	NotCoordinator     = register("NOT_COORDINATOR", ClassRouting)
	NotLeader          = register("NOT_LEADER", ClassRouting)
	NotPartitionLeader = register("NOT_PARTITION_LEADER", ClassRouting)

	// Availability (retryable): back off and retry.
	ClusterMetadataUnavailable    = register("cluster_metadata_unavailable", ClassAvailability)
	ClusterNotAvailable           = register("cluster_not_available", ClassAvailability)
	CoordinatorNotAvailable       = register("coordinator_not_available", ClassAvailability)
	FSMNotAvailable               = register("fsm_not_available", ClassAvailability)
	InsufficientInSyncReplicas    = register("insufficient_in_sync_replicas", ClassAvailability)
	LeaderElectionResultUnavail   = register("leader_election_result_unavailable", ClassAvailability)
	LeaderNotFound                = register("leader_not_found", ClassAvailability)
	NoRaftLeader                  = register("no_raft_leader", ClassAvailability)
	OffsetManagerNotAvailable     = register("offset_manager_not_available", ClassAvailability)
	RequestCancelled              = register("request_cancelled", ClassAvailability)
	RouterNotAvailable            = register("router_not_available", ClassAvailability)
	TransactionAbortMarkerFailed  = register("transaction_abort_marker_failed", ClassAvailability)
	TransactionCommitFailed       = register("transaction_commit_failed", ClassAvailability)
	TransactionManagerNotAvailabl = register("transaction_manager_not_available", ClassAvailability)
	TransactionSyncFailed         = register("transaction_sync_failed", ClassAvailability)
	ReplicationUnavailable        = register("replication_unavailable", ClassAvailability)
	// Strata: a call exceeded its deadline inside the cluster.
	RequestTimeout = register("request_timeout", ClassAvailability)
	// Strata: the partition's storage is fenced after an I/O or fsync failure.
	StorageUnavailable = register("storage_unavailable", ClassAvailability)
	// Strata: a request carried a topic lifecycle epoch newer than the one this
	// node has applied (a truncate is still being applied here); retry.
	LifecycleEpochPending = register("lifecycle_epoch_pending", ClassAvailability)
	// Strata: the name still has node-local cleanup outstanding from a DELETE.
	// It is a wait-and-retry condition (the cleanup finishes on its own and
	// the same CREATE then succeeds): spec 7's availability class, "back off,
	// retry", so retryable.
	TopicCleanupPending = register("topic_cleanup_pending", ClassAvailability)
	// Strata: a transactional_id is completing an earlier transaction's
	// commit or abort (markers being written); retry (Kafka's
	// CONCURRENT_TRANSACTIONS).
	ConcurrentTransactions = register("concurrent_transactions", ClassAvailability)
	// Strata: a transaction in flight staged offsets of the partition
	// (SEND_OFFSETS_TO_TXN) and may still change its committed offset;
	// retry once it commits or aborts (Kafka's UNSTABLE_OFFSET_COMMIT,
	// KIP-447). Fields group, topic, partition, transactional_id.
	UnstableOffsetCommit = register("unstable_offset_commit", ClassAvailability)
	// Strata: a role the command needs has no live instance.
	RoleUnavailable = register("role_unavailable", ClassAvailability)
	// Strata: too many concurrent client connections.
	ConnectionLimitReached = register("connection_limit_reached", ClassAvailability)

	// Fencing: rejoin or recreate state; do not repeat unchanged.
	GenMismatch           = register("GEN_MISMATCH", ClassFencing)
	NotOwner              = register("NOT_OWNER", ClassFencing)
	StaleLeaderEpoch      = register("STALE_LEADER_EPOCH", ClassFencing)
	PartitionLeaderFenced = register("PARTITION_LEADER_FENCED", ClassFencing)
	MemberNotFound        = register("member_not_found", ClassFencing)
	ProducerFenced        = register("producer_fenced", ClassFencing)
	StaleProducerEpoch    = register("stale_producer_epoch", ClassFencing)
	// Strata: a request carried a topic lifecycle epoch older than the current one.
	StaleLifecycleEpoch = register("stale_lifecycle_epoch", ClassFencing)
	// Strata: a node heartbeat carried another incarnation than the registered
	// one (an older process of the node); fields node, current, requested.
	StaleNodeIncarnation = register("stale_node_incarnation", ClassFencing)

	// Conflict: refresh state and change the request.
	OffsetOutOfRange                  = register("OFFSET_OUT_OF_RANGE", ClassConflict)
	LeaderElectionRejected            = register("leader_election_rejected", ClassConflict)
	OffsetRegression                  = register("offset_regression", ClassConflict)
	SnapshotVersionExceedsStream      = register("snapshot_version_exceeds_stream", ClassConflict)
	ProducerReinitializationRequired  = register("producer_reinitialization_required", ClassConflict)
	TopicNotAssignedToGroup           = register("topic_not_assigned_to_group", ClassConflict)
	TransactionAborted                = register("transaction_aborted", ClassConflict)
	TransactionAlreadyCommitted       = register("transaction_already_committed", ClassConflict)
	TransactionMarkerPartitionNotTchd = register("transaction_marker_partition_not_touched", ClassConflict)
	TransactionNotAbortable           = register("transaction_not_abortable", ClassConflict)
	TransactionNotCommitting          = register("transaction_not_committing", ClassConflict)
	TransactionRecordNotStaged        = register("transaction_record_not_staged", ClassConflict)
	VersionConflict                   = register("version_conflict", ClassConflict)
	TopicDeleteBlocked                = register("topic_delete_blocked", ClassConflict)
	// Strata: a producer sequence skipped ahead (spec 4.6 idempotence rule 2).
	OutOfOrderSequence = register("out_of_order_sequence", ClassConflict)
	// Strata: a producer batch whose sequences are already stored but older
	// than the partition's dedup window, so its offsets are no longer known;
	// the data is stored once, the batch must not be sent again.
	DuplicateSequence = register("duplicate_sequence", ClassConflict)
	// Strata: a coordinatord configured with another transaction_coordinator_shards
	// than the value fixed at cluster creation cannot join (fields cluster, node).
	TransactionShardsMismatch = register("transaction_coordinator_shards_mismatch", ClassConflict)
	// Strata: a transactional write for a producer epoch the transaction
	// coordinator has not added to the partition (KIP-890): the coordinator
	// adds it and retries; a client never sees it.
	TransactionPartitionNotAdded = register("transaction_partition_not_added", ClassConflict)
	// Strata: a partition still holds an open transaction of an older epoch
	// of the producer; the coordinator must end it with a marker first
	// (fields producer, open_epoch, got).
	TransactionStillOpen = register("transaction_still_open", ClassConflict)
	// Strata: DeleteGroup of a group that still has active members.
	GroupNotEmpty = register("group_not_empty", ClassConflict)

	// Authorization: fail closed.
	NotAuthorizedForOperation    = register("NOT_AUTHORIZED_FOR_OPERATION", ClassAuthorization)
	NotAuthorizedForPartition    = register("NOT_AUTHORIZED_FOR_PARTITION", ClassAuthorization)
	NotAuthorizedForTopic        = register("NOT_AUTHORIZED_FOR_TOPIC", ClassAuthorization)
	AuthenticationFailed         = register("authentication_failed", ClassAuthorization)
	AuthenticationRequired       = register("authentication_required", ClassAuthorization)
	InternalAuthNotConfigured    = register("internal_auth_not_configured", ClassAuthorization)
	InternalBatchRequiresToken   = register("internal_batch_requires_token_wrapper", ClassAuthorization)
	InternalCommandUnauthorized  = register("internal_command_unauthorized", ClassAuthorization)
	InternalTopicWriteForbidden  = register("internal_topic_write_forbidden", ClassAuthorization)
	InternalTxnPublishForbidden  = register("internal_txn_publish_forbidden", ClassAuthorization)
	TransactionMetadataForbidden = register("transaction_metadata_forbidden", ClassAuthorization)
	InternalTopicDeleteForbidden = register("internal_topic_delete_forbidden", ClassAuthorization)
	// Strata: an internal gRPC caller's certificate role may not call the method.
	PeerRoleForbidden = register("peer_role_forbidden", ClassAuthorization)

	// Not found: create or choose a valid resource.
	GroupNotFound             = register("group_not_found", ClassNotFound)
	PartitionMetadataNotFound = register("partition_metadata_not_found", ClassNotFound)
	PartitionNotFound         = register("partition_not_found", ClassNotFound)
	PartitionNotFoundUpper    = register("PARTITION_NOT_FOUND", ClassNotFound)
	TopicNotFound             = register("topic_not_found", ClassNotFound)
	TopicNotFoundUpper        = register("TOPIC_NOT_FOUND", ClassNotFound)
	TransactionNotFound       = register("transaction_not_found", ClassNotFound)
	NodeNotFound              = register("node_not_found", ClassNotFound)

	// Validation: correct the request.
	InvalidTopicName         = register("invalid_topic_name", ClassValidation)
	MissingTopic             = register("missing_topic", ClassValidation)
	InvalidPartition         = register("invalid_partition", ClassValidation)
	MissingGeneration        = register("missing_generation", ClassValidation)
	NoValidOffsets           = register("no_valid_offsets", ClassValidation)
	InvalidBatchCommitEntry  = register("invalid_batch_commit_entry", ClassValidation)
	DuplicatePartition       = register("duplicate_partition", ClassValidation)
	InvalidIfExists          = register("invalid_if_exists", ClassValidation)
	InvalidTopicPolicy       = register("invalid_topic_policy", ClassValidation)
	UnsupportedTopicPolicy   = register("unsupported_topic_policy", ClassValidation)
	MissingBroker            = register("missing_broker", ClassValidation)
	EventSourcingNotEnabled  = register("event_sourcing_not_enabled", ClassValidation)
	InvalidSchemaVersion     = register("invalid_schema_version", ClassValidation)
	InvalidFromVersion       = register("invalid_from_version", ClassValidation)
	InvalidCommitWatermark   = register("invalid_commit_watermark", ClassValidation)
	InvalidControlBatchBytes = register("invalid_control_batch_bytes", ClassValidation)
	MissingLeaderFence       = register("missing_leader_fence", ClassValidation)
	DecodeFailed             = register("decode_failed", ClassValidation)
	MalformedInput           = register("malformed_input", ClassValidation)
	UnknownCommand           = register("unknown_command", ClassValidation)
	// UnsupportedFeature also answers commands whose subsystem is not built
	// yet (field "command"; the message names what is missing).
	UnsupportedFeature = register("UNSUPPORTED_FEATURE", ClassValidation)
	// Strata: a parameter is missing (field "param" names it).
	MissingParameter = register("missing_parameter", ClassValidation)
	// The reference broker's missing_<param> codes for the parameters the
	// gateway requires by name (field "param" names it, or "command" where
	// the reference broker names the command instead).
	MissingGroup             = register("missing_group", ClassValidation)
	MissingMember            = register("missing_member", ClassValidation)
	MissingPartition         = register("missing_partition", ClassValidation)
	MissingOffset            = register("missing_offset", ClassValidation)
	MissingMessage           = register("missing_message", ClassValidation)
	MissingProducerID        = register("missing_producer_id", ClassValidation)
	MissingExpectedRevision  = register("missing_expected_revision", ClassValidation)
	MissingMinInSyncReplicas = register("missing_min_in_sync_replicas", ClassValidation)
	// Strata: REGISTER_GROUP needs exactly one of topic, topics or pattern
	// (field group).
	InvalidGroupSelector = register("invalid_group_selector", ClassValidation)
	// Strata: a parameter value does not parse or is out of range.
	InvalidParameter = register("invalid_parameter", ClassValidation)
	// Strata: replication_factor cannot be satisfied by the live partition servers.
	InvalidReplicationFactor = register("invalid_replication_factor", ClassValidation)
	// Strata: an immutable topic field (replication_factor, idempotent, event_sourcing) changed.
	ImmutableTopicField = register("immutable_topic_field", ClassValidation)
	// Strata: a patch tried to lower the partition count.
	PartitionCountDecrease = register("partition_count_decrease", ClassValidation)
	// Strata: idempotence requested with acks other than all/-1 (spec 4.6 rule 6).
	IdempotenceRequiresAcksAll = register("idempotence_requires_acks_all", ClassValidation)
	// Strata: a Wire v2 frame breaks a framing rule (magic, version, kind,
	// flags, status, request id, command id, lengths, CRC32C, compression id);
	// field "reason" names the rule. The connection cannot be trusted after it.
	InvalidFrame = register("invalid_frame", ClassValidation)
	// Strata: a compressed Wire v2 payload is corrupt, or decompresses to fewer
	// bytes than its declared decoded length (field "reason").
	InvalidCompressedPayload = register("invalid_compressed_payload", ClassValidation)
	// Strata: a compressed Wire v2 payload would decompress to more bytes than
	// its declared decoded length (a decompression bomb); decoding stops there.
	DecompressedSizeExceeded = register("decompressed_size_exceeded", ClassValidation)
	// Strata: a Wire v2 negotiation found no common version or compression.
	NegotiationFailed = register("negotiation_failed", ClassValidation)
	// Strata: a live partition server does not advertise the topic lifecycle
	// protocol version a command needs (spec 9: 1 for TRUNCATE); fields node, version.
	UnsupportedLifecycleProtocol = register("unsupported_lifecycle_protocol", ClassValidation)

	// Internal: fail closed, surface diagnostics.
	Internal                       = register("internal_error", ClassInternal)
	MarshalClusterStatusFailed     = register("marshal_cluster_status_failed", ClassInternal)
	DeleteTopicFailed              = register("delete_topic_failed", ClassInternal)
	SnapshotReplicateFailed        = register("snapshot_replicate_failed", ClassInternal)
	ReplicaIndexPrepareFailed      = register("replica_index_prepare_failed", ClassInternal)
	CreateTopicFailed              = register("create_topic_failed", ClassInternal)
	RaftApplyFailed                = register("raft_apply_failed", ClassInternal)
	UnsupportedRecoveryProtocol    = register("unsupported_recovery_protocol", ClassInternal)
	StorageCorrupt                 = register("storage_corrupt", ClassInternal)
	AggregateProofRetentionGap     = register("aggregate_proof_retention_gap", ClassInternal)
	AggregateProofSequenceGap      = register("aggregate_proof_sequence_gap", ClassInternal)
	AggregateProofIdentityConflict = register("aggregate_proof_identity_conflict", ClassInternal)
	AggregateProofUnavailable      = register("aggregate_proof_proof_unavailable", ClassInternal)
)
