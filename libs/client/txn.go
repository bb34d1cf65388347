package client

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// This file holds the thinner wrappers: transactions (spec 4.7),
// event sourcing (4.8) and the remaining administration commands. They send
// the spec's parameters and return the parsed reply; a server that has not
// built a subsystem answers with its typed error (UNSUPPORTED_FEATURE), which
// these methods pass through unchanged.

// ProducerSession is a transactional producer's identity.
type ProducerSession struct {
	TransactionalID string
	ProducerID      string
	Epoch           int64
}

func (s ProducerSession) kv() []string {
	return []string{"transactional_id", s.TransactionalID, "producerId", s.ProducerID, "epoch", strconv.FormatInt(s.Epoch, 10)}
}

// InitProducerID (re)initialises a transactional producer: the same
// producerId with a raised epoch on every call.
func (c *Client) InitProducerID(ctx context.Context, transactionalID string) (ProducerSession, error) {
	r, err := c.ok(ctx, wire.CmdInitProducerID, params("transactional_id", transactionalID))
	if err != nil {
		return ProducerSession{}, err
	}
	epoch, err := r.Int("epoch")
	if err != nil {
		return ProducerSession{}, err
	}
	return ProducerSession{TransactionalID: r.Value("transactional_id"), ProducerID: r.Value("producerId"), Epoch: epoch}, nil
}

// BeginTxn opens a transaction.
func (c *Client) BeginTxn(ctx context.Context, s ProducerSession) (Reply, error) {
	return c.ok(ctx, wire.CmdBeginTxn, params(s.kv()...))
}

// TxnPublish appends one record inside the open transaction; seqNum (> 0)
// makes a retry idempotent. partition < 0 lets the server route.
func (c *Client) TxnPublish(ctx context.Context, s ProducerSession, topic string, partition int32, key string, seqNum uint64, message string) (Reply, error) {
	p := ""
	if partition >= 0 {
		p = strconv.Itoa(int(partition))
	}
	req := params(append(s.kv(), "topic", topic, "seqNum", strconv.FormatUint(seqNum, 10), "partition", p, "key", key)...)
	req.Add("message", message)
	return c.ok(ctx, wire.CmdTxnPublish, req)
}

// SendOffsetsToTxn stages consumer offsets in the transaction.
func (c *Client) SendOffsetsToTxn(ctx context.Context, s ProducerSession, topic, group, member string, generation int64, offsets []wire.PartitionOffset) (Reply, error) {
	list, err := wire.AppendOffsetList(nil, offsets)
	if err != nil {
		return Reply{}, err
	}
	return c.ok(ctx, wire.CmdSendOffsetsToTxn, params(append(s.kv(), "topic", topic, "group", group, "member", member,
		"generation", strconv.FormatInt(generation, 10), "offsets", string(list))...))
}

// EndTxn commits (commit=true) or aborts the transaction.
func (c *Client) EndTxn(ctx context.Context, s ProducerSession, commit bool) (Reply, error) {
	result := "abort"
	if commit {
		result = "commit"
	}
	return c.ok(ctx, wire.CmdEndTxn, params(append(s.kv(), "result", result)...))
}

// TxnStatus describes a transactional id's current transaction.
func (c *Client) TxnStatus(ctx context.Context, transactionalID string) (Reply, error) {
	return c.ok(ctx, wire.CmdTxnStatus, params("transactional_id", transactionalID))
}

// Event is one APPEND_STREAM event.
type Event struct {
	Topic, Key string
	// Version must be the aggregate's current version + 1.
	Version       uint64
	EventType     string
	SchemaVersion uint32
	Metadata      string
	Payload       string
}

// AppendStream appends an event to an aggregate stream; a wrong version is
// version_conflict with current and expected.
func (c *Client) AppendStream(ctx context.Context, e Event) (Reply, error) {
	sv := ""
	if e.SchemaVersion != 0 {
		sv = strconv.FormatUint(uint64(e.SchemaVersion), 10)
	}
	req := params("topic", e.Topic, "key", e.Key, "version", strconv.FormatUint(e.Version, 10),
		"event_type", e.EventType, "schema_version", sv)
	// metadata= and message= capture the rest of a text line, so they are
	// appended last, metadata first, as the SDK text form orders them.
	if e.Metadata != "" {
		req.Add("metadata", e.Metadata)
	}
	req.Add("message", e.Payload)
	return c.ok(ctx, wire.CmdAppendStream, req)
}

// StreamHistory is a READ_STREAM answer: the JSON envelope and the events.
type StreamHistory struct {
	Envelope json.RawMessage
	Events   *wire.Batch
}

// ReadStream reads an aggregate's events from fromVersion (0 means 1). An
// early failure arrives as a JSON envelope with status ERROR, returned as a
// typed error.
func (c *Client) ReadStream(ctx context.Context, topic, key string, fromVersion uint64) (*StreamHistory, error) {
	fv := ""
	if fromVersion > 0 {
		fv = strconv.FormatUint(fromVersion, 10)
	}
	fs, err := c.roundTrip(ctx, wire.CmdReadStream, params("topic", topic, "key", key, "from_version", fv), nil, 2)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, errcode.DecodeFailed.New("empty READ_STREAM reply", "payload", "read_stream")
	}
	h := &StreamHistory{Envelope: json.RawMessage(fs[0].payload)}
	var env struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(fs[0].payload, &env); err != nil {
		return nil, errcode.DecodeFailed.New("READ_STREAM envelope is not JSON", "payload", "read_stream", "reason", err.Error())
	}
	if env.Status == "ERROR" {
		if e, ok := errcode.ParseText("ERROR: " + env.Error); ok {
			return h, e
		}
		return h, errcode.Lookup(env.Error).New("READ_STREAM failed")
	}
	if len(fs) < 2 {
		return nil, errcode.DecodeFailed.New("READ_STREAM reply without its batch frame", "payload", "read_stream")
	}
	if h.Events, err = decodeBatchReply(fs[1].payload); err != nil {
		return nil, err
	}
	return h, nil
}

// StreamVersion returns an aggregate's current version (0 when unknown).
func (c *Client) StreamVersion(ctx context.Context, topic, key string) (uint64, error) {
	r, err := c.ok(ctx, wire.CmdStreamVersion, params("topic", topic, "key", key))
	if err != nil {
		return 0, err
	}
	return r.Uint("version")
}

// SaveSnapshot stores an aggregate snapshot at version.
func (c *Client) SaveSnapshot(ctx context.Context, topic, key string, version uint64, payload string) (Reply, error) {
	req := params("topic", topic, "key", key, "version", strconv.FormatUint(version, 10))
	req.Add("message", payload)
	return c.ok(ctx, wire.CmdSaveSnapshot, req)
}

// ReadSnapshot returns the snapshot JSON, or nil when there is none.
func (c *Client) ReadSnapshot(ctx context.Context, topic, key string) (json.RawMessage, error) {
	r, err := c.ok(ctx, wire.CmdReadSnapshot, params("topic", topic, "key", key))
	if err != nil {
		return nil, err
	}
	v := r.Value("snapshot")
	if v == "" || v == "null" {
		return nil, nil
	}
	return json.RawMessage(v), nil
}

// RegisterGroup registers a group with exactly one selector: topic, topics
// (comma list) or pattern (glob); pass the other two empty.
func (c *Client) RegisterGroup(ctx context.Context, group, topic, topics, pattern string) (Reply, error) {
	return c.ok(ctx, wire.CmdRegisterGroup, params("group", group, "topic", topic, "topics", topics, "pattern", pattern))
}

// AlterTopicConfig sets min_in_sync_replicas (a number or "default").
func (c *Client) AlterTopicConfig(ctx context.Context, topic, minInSyncReplicas string) (Reply, error) {
	return c.ok(ctx, wire.CmdAlterTopicConfig, params("topic", topic, "min_in_sync_replicas", minInSyncReplicas))
}

// Truncate empties a topic at expectedRevision (admin only).
func (c *Client) Truncate(ctx context.Context, topic string, expectedRevision int64) (Reply, error) {
	return c.ok(ctx, wire.CmdTruncate, params("topic", topic, "expected_revision", strconv.FormatInt(expectedRevision, 10)))
}

// ElectLeader moves a partition's leadership to broker (an in-sync replica).
func (c *Client) ElectLeader(ctx context.Context, topic string, partition int32, broker string) (Reply, error) {
	return c.ok(ctx, wire.CmdElectLeader, params("topic", topic, "partition", strconv.Itoa(int(partition)), "broker", broker))
}
