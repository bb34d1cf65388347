package client

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Event is one event to append to an aggregate stream (spec 2.5).
type Event struct {
	Topic string
	// Key is the aggregate key (the match id on aggregate replay topics).
	Key string
	// Version must be the stream's current version + 1.
	Version uint64
	Payload []byte
	// EventType is optional; SchemaVersion 0 means the default 1.
	EventType     string
	SchemaVersion uint32
	// Metadata is JSON text, optional.
	Metadata string
	// EventID is required on aggregate replay topics; ProducerID, SeqNum and
	// Epoch are stored with the event there.
	EventID    string
	ProducerID string
	SeqNum     uint64
	Epoch      int64
}

// AppendResult answers AppendStream.
type AppendResult struct {
	Version   uint64
	Offset    uint64
	Partition int32
	// Duplicate: an exact repeat on an aggregate replay topic, answered
	// with the stored event.
	Duplicate bool
}

// AppendStream is APPEND_STREAM. A stale version fails with the typed
// version_conflict error (fields current and expected).
func (c *Client) AppendStream(ctx context.Context, e Event) (AppendResult, error) {
	kv := []string{"producerId", e.ProducerID}
	if e.SeqNum != 0 {
		kv = append(kv, "seqNum", strconv.FormatUint(e.SeqNum, 10))
	}
	if e.Epoch != 0 {
		kv = append(kv, "epoch", strconv.FormatInt(e.Epoch, 10))
	}
	return c.appendEvent(ctx, wire.CmdAppendStream, kv, e)
}

// appendEvent sends cmd with the session fields kv (empty values left out)
// and e's fields, and reads the append answer.
func (c *Client) appendEvent(ctx context.Context, cmd wire.Command, kv []string, e Event) (AppendResult, error) {
	req := params(append(kv, "topic", e.Topic, "key", e.Key, "version", strconv.FormatUint(e.Version, 10),
		"event_type", e.EventType, "event_id", e.EventID)...)
	if e.SchemaVersion != 0 {
		req.Add("schema_version", strconv.FormatUint(uint64(e.SchemaVersion), 10))
	}
	// metadata= and message= capture the rest of a text line, so they go
	// last, metadata first, as the SDK text form orders them.
	if e.Metadata != "" {
		req.Add("metadata", e.Metadata)
	}
	req.Add("message", string(e.Payload))
	r, err := c.ok(ctx, cmd, req)
	if err != nil {
		return AppendResult{}, err
	}
	var res AppendResult
	if res.Version, err = r.Uint("version"); err != nil {
		return res, err
	}
	if res.Offset, err = r.Uint("offset"); err != nil {
		return res, err
	}
	p, err := r.Int("partition")
	res.Partition, res.Duplicate = int32(p), r.Bool("duplicate")
	return res, err
}

// TxnAppendStream is TXN_APPEND_STREAM: e appended inside s's open
// transaction with seqNum (> 0; a retry with the same seqNum is answered
// once). e's ProducerID, SeqNum and Epoch are not used: the session's are
// stored. The version counts the transaction's own earlier events of the
// aggregate; while another transaction holds uncommitted versions of it the
// answer is the retryable concurrent_transactions (reason
// aggregate_in_transaction). The event becomes visible when the
// transaction commits; an abort gives its version back.
func (c *Client) TxnAppendStream(ctx context.Context, s ProducerSession, seqNum uint64, e Event) (AppendResult, error) {
	return c.appendEvent(ctx, wire.CmdTxnAppendStream, append(s.kv(), "seqNum", strconv.FormatUint(seqNum, 10)), e)
}

// AppendStream appends e inside the producer's open transaction
// (TXN_APPEND_STREAM with the next seqNum); retryable failures, an
// aggregate held by another transaction included, are retried until ctx
// ends.
func (p *TxnProducer) AppendStream(ctx context.Context, e Event) (AppendResult, error) {
	if !p.open {
		return AppendResult{}, errcode.TransactionNotFound.New("no open transaction; Begin first", "transactional_id", p.id)
	}
	p.seq++
	seq := p.seq
	var res AppendResult
	err := retry(ctx, func() (err error) {
		res, err = p.c.TxnAppendStream(ctx, p.s, seq, e)
		return err
	})
	return res, err
}

// StreamVersion is STREAM_VERSION: the aggregate's version, 0 when unknown.
func (c *Client) StreamVersion(ctx context.Context, topic, key string) (uint64, error) {
	r, err := c.ok(ctx, wire.CmdStreamVersion, params("topic", topic, "key", key))
	if err != nil {
		return 0, err
	}
	return r.Uint("version")
}

// Snapshot is an aggregate's stored snapshot.
type Snapshot struct {
	Version uint64 `json:"version"`
	Payload string `json:"payload"`
}

// SaveSnapshot is SAVE_SNAPSHOT; it returns once the snapshot is stored on
// the leader and every in-sync replica.
func (c *Client) SaveSnapshot(ctx context.Context, topic, key string, version uint64, payload []byte) error {
	req := params("topic", topic, "key", key, "version", strconv.FormatUint(version, 10))
	req.Add("message", string(payload))
	_, err := c.ok(ctx, wire.CmdSaveSnapshot, req)
	return err
}

// ReadSnapshot is READ_SNAPSHOT: nil when the aggregate has none.
func (c *Client) ReadSnapshot(ctx context.Context, topic, key string) (*Snapshot, error) {
	r, err := c.ok(ctx, wire.CmdReadSnapshot, params("topic", topic, "key", key))
	if err != nil {
		return nil, err
	}
	if r.Value("snapshot") == "null" {
		return nil, nil
	}
	var s Snapshot
	if err := lastJSON(wire.CmdReadSnapshot, r, "snapshot", &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// lastJSON decodes into dst the JSON value of key, the last field of an OK
// answer. The JSON may hold spaces, which split the OK tokens: the value is
// the text after " key=".
func lastJSON(cmd wire.Command, r Reply, key string, dst any) error {
	raw := r.Value(key)
	if i := strings.Index(r.Text, " "+key+"="); i >= 0 {
		raw = r.Text[i+len(key)+2:]
	}
	return decodeJSON(cmd, key, raw, dst)
}

// StreamRead is the answer of ReadStream and ReadStreamHistory.
type StreamRead struct {
	Status    string    `json:"status"`
	Topic     string    `json:"topic"`
	Key       string    `json:"key"`
	Partition int32     `json:"partition"`
	Count     int       `json:"count"`
	Snapshot  *Snapshot `json:"snapshot,omitempty"`
	// Paged READ_STREAM and READ_STREAM_HISTORY.
	StreamVersion uint64 `json:"stream_version,omitempty"`
	HeadVersion   uint64 `json:"head_version,omitempty"`
	NextVersion   uint64 `json:"next_version,omitempty"`
	HasMore       bool   `json:"has_more,omitempty"`
	Completeness  string `json:"completeness,omitempty"`
	// Events are the batch frame's records, in version order.
	Events []wire.Record `json:"-"`
}

// twoFrames runs a two-frame command: the JSON envelope into a new E, then
// the batch, whose records go where records says in it. An early failure
// (one JSON frame with status ERROR) is returned as its typed error.
func twoFrames[E any](ctx context.Context, c *Client, cmd wire.Command, req *wire.Request, records func(*E) *[]wire.Record) (*E, error) {
	env := new(E)
	recs, err := c.frames(ctx, cmd, req, env)
	if err != nil {
		return nil, err
	}
	*records(env) = recs
	return env, nil
}

func (c *Client) frames(ctx context.Context, cmd wire.Command, req *wire.Request, env any) ([]wire.Record, error) {
	fs, err := c.roundTrip(ctx, cmd, req, nil, 2)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, errcode.DecodeFailed.New("empty reply", "command", cmd.String())
	}
	var head struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(fs[0].payload, &head); err != nil {
		return nil, errcode.DecodeFailed.New("envelope is not JSON: "+err.Error(), "command", cmd.String())
	}
	if head.Status == "ERROR" {
		// The error is "<code and details>" (WIRE-V2 9.3); the readable
		// form's "ERROR:" prefix is accepted too.
		text := head.Error
		if !strings.HasPrefix(text, "ERROR") {
			text = "ERROR: " + text
		}
		if e, ok := errcode.ParseText(text); ok {
			return nil, e
		}
		return nil, errcode.Internal.New(head.Error, "command", cmd.String())
	}
	if err := json.Unmarshal(fs[0].payload, env); err != nil {
		return nil, errcode.DecodeFailed.New("envelope: "+err.Error(), "command", cmd.String())
	}
	if len(fs) < 2 {
		return nil, errcode.DecodeFailed.New("the batch frame is missing", "command", cmd.String())
	}
	b, err := wire.DecodeBatchOwned(fs[1].payload) // a frame payload the connection handed over
	if err != nil {
		return nil, err
	}
	return b.Records, nil
}

// ReadStream is READ_STREAM from fromVersion (0: the default, 1): the
// snapshot when one at or after fromVersion exists, then the events after
// it. limit > 0 makes it a paged read.
func (c *Client) ReadStream(ctx context.Context, topic, key string, fromVersion uint64, limit int) (*StreamRead, error) {
	return c.readStream(ctx, wire.CmdReadStream, topic, key, fromVersion, limit)
}

// ReadStreamHistory is READ_STREAM_HISTORY: one page of raw events from
// fromVersion (no snapshot), with completeness and where to continue.
func (c *Client) ReadStreamHistory(ctx context.Context, topic, key string, fromVersion uint64, limit int) (*StreamRead, error) {
	return c.readStream(ctx, wire.CmdReadStreamHistory, topic, key, fromVersion, limit)
}

// readStream runs READ_STREAM or READ_STREAM_HISTORY, which take the same
// parameters and answer the same envelope.
func (c *Client) readStream(ctx context.Context, cmd wire.Command, topic, key string, fromVersion uint64, limit int) (*StreamRead, error) {
	req := params("topic", topic, "key", key)
	if fromVersion != 0 {
		req.Add("from_version", strconv.FormatUint(fromVersion, 10))
	}
	if limit > 0 {
		req.Add("limit", strconv.Itoa(limit))
	}
	return twoFrames(ctx, c, cmd, req, func(r *StreamRead) *[]wire.Record { return &r.Events })
}

// BrowseOptions bound one BROWSE_MESSAGES (0: the server's defaults, 100
// records and 1 MiB).
type BrowseOptions struct {
	Offset     *uint64
	MaxRecords int
	MaxBytes   int
}

// BrowseResult is BROWSE_MESSAGES' envelope and records.
type BrowseResult struct {
	Status            string        `json:"status"`
	Topic             string        `json:"topic"`
	Partition         int32         `json:"partition"`
	NextOffset        uint64        `json:"next_offset"`
	EarliestOffset    uint64        `json:"earliest_offset"`
	ReadableEndOffset uint64        `json:"readable_end_offset"`
	HasMore           bool          `json:"has_more"`
	Records           []wire.Record `json:"-"`
}

// Browse is BROWSE_MESSAGES: committed records of one partition from an
// offset, outside any consumer group (no committed offset is read or
// moved).
func (c *Client) Browse(ctx context.Context, topic string, partition int32, o BrowseOptions) (*BrowseResult, error) {
	req := params("topic", topic, "partition", strconv.Itoa(int(partition)))
	if o.Offset != nil {
		req.Add("offset", strconv.FormatUint(*o.Offset, 10))
	}
	if o.MaxRecords > 0 {
		req.Add("max_records", strconv.Itoa(o.MaxRecords))
	}
	if o.MaxBytes > 0 {
		req.Add("max_bytes", strconv.Itoa(o.MaxBytes))
	}
	return twoFrames(ctx, c, wire.CmdBrowseMessages, req, func(r *BrowseResult) *[]wire.Record { return &r.Records })
}

// ReplayProof is the proof of AGGREGATE_REPLAY_PROOF and
// AGGREGATE_EVENT_RANGE_READ: Status "proven", or, in the diagnostic JSON
// of a failure (ProofOf), the failure's code with where it broke.
type ReplayProof = wire.ReplayProof

// ProofOf returns the diagnostic proof an aggregate_proof_* failure
// carries (field proof).
func ProofOf(err error) (*ReplayProof, bool) {
	e, ok := errcode.As(err)
	if !ok || e.Field("proof") == "" {
		return nil, false
	}
	var p ReplayProof
	if json.Unmarshal([]byte(e.Field("proof")), &p) != nil {
		return nil, false
	}
	return &p, true
}

// ProofOptions are AGGREGATE_REPLAY_PROOF's optional parameters.
type ProofOptions struct {
	// Partition, when set, must be the match's partition.
	Partition *int32
	// ExpectedLastSequence (0: none) must be the match's last sequence.
	ExpectedLastSequence uint64
}

// AggregateReplayProof is AGGREGATE_REPLAY_PROOF: the proof that the
// committed retained log holds exactly sequences 1..last of the match. A
// failed proof is the typed aggregate_proof_* error; ProofOf reads its
// diagnostics.
func (c *Client) AggregateReplayProof(ctx context.Context, topic, matchID string, o ProofOptions) (*ReplayProof, error) {
	req := params("topic", topic, "match_id", matchID)
	if o.Partition != nil {
		req.Add("partition", strconv.Itoa(int(*o.Partition)))
	}
	if o.ExpectedLastSequence != 0 {
		req.Add("expected_last_sequence", strconv.FormatUint(o.ExpectedLastSequence, 10))
	}
	r, err := c.ok(ctx, wire.CmdAggregateReplayProof, req)
	if err != nil {
		return nil, err
	}
	var p ReplayProof
	if err := lastJSON(wire.CmdAggregateReplayProof, r, "proof", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// RangeRead is AGGREGATE_EVENT_RANGE_READ's answer: the proof of the
// returned events and the raw events in sequence order.
type RangeRead struct {
	Status       string      `json:"status"`
	Topic        string      `json:"topic"`
	MatchID      string      `json:"match_id"`
	Partition    int32       `json:"partition"`
	Count        int         `json:"count"`
	NextSequence uint64      `json:"next_sequence"`
	HasMore      bool        `json:"has_more"`
	Proof        ReplayProof `json:"proof"`
	// Events are the batch frame's records, in sequence order.
	Events []wire.Record `json:"-"`
}

// AggregateEventRangeRead is AGGREGATE_EVENT_RANGE_READ: the events
// from..to of a match (at most maxRecords; 0: the server's 256) with their
// proof. It reads no group offset and commits none.
func (c *Client) AggregateEventRangeRead(ctx context.Context, topic, matchID string, from, to uint64, maxRecords int) (*RangeRead, error) {
	req := params("topic", topic, "match_id", matchID, "from_sequence", strconv.FormatUint(from, 10),
		"to_sequence", strconv.FormatUint(to, 10))
	if maxRecords > 0 {
		req.Add("max_records", strconv.Itoa(maxRecords))
	}
	return twoFrames(ctx, c, wire.CmdAggregateEventRangeRead, req, func(r *RangeRead) *[]wire.Record { return &r.Events })
}
