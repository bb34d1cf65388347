package client

import (
	"context"
	"strconv"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/wire"
)

// This file holds the thinner wrappers: transactions (spec 4.7) and the
// remaining administration commands (event sourcing is eventsourcing.go). They send
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

// Txn is one transaction as LIST_TXNS and ABORT_TXN describe it.
type Txn struct {
	TransactionalID string   `json:"transactional_id"`
	ProducerID      string   `json:"producer_id"`
	Epoch           int64    `json:"epoch"`
	State           string   `json:"state"`
	Messages        uint64   `json:"messages"`
	Offsets         uint32   `json:"offsets"`
	AgeMs           int64    `json:"age_ms"`
	Participants    []string `json:"participants"`
}

// ListTxns lists the open and completing transactions of the cluster,
// oldest first (LIST_TXNS, a Strata extension command).
func (c *Client) ListTxns(ctx context.Context) ([]Txn, error) {
	s, err := c.answer(ctx, wire.CmdListTxns, params())
	if err != nil {
		return nil, err
	}
	var out struct {
		Txns []Txn `json:"txns"`
	}
	if err := decodeJSON(wire.CmdListTxns, "list_txns", s, &out); err != nil {
		return nil, err
	}
	return out.Txns, nil
}

// AbortTxn aborts a hanging transaction (ABORT_TXN, a Strata extension
// command); a decided commit answers transaction_not_abortable.
func (c *Client) AbortTxn(ctx context.Context, transactionalID string) (Txn, error) {
	s, err := c.answer(ctx, wire.CmdAbortTxn, params("transactional_id", transactionalID))
	if err != nil {
		return Txn{}, err
	}
	var t Txn
	err = decodeJSON(wire.CmdAbortTxn, "abort_txn", s, &t)
	return t, err
}

// TxnProducer is a transactional producer over one connection: every
// transaction runs under a fresh producer epoch (Begin re-initialises the
// session, which fences an older instance of the same transactional_id and
// aborts what it left open), sends carry increasing seqNums so a retried
// send is answered once, and retryable failures (leader or coordinator
// moves, a commit whose markers are still being written) are retried with
// the same request. Not safe for concurrent use.
type TxnProducer struct {
	c    *Client
	id   string
	s    ProducerSession
	seq  uint64
	open bool
}

// NewTxnProducer returns a transactional producer for transactionalID.
func (c *Client) NewTxnProducer(transactionalID string) *TxnProducer {
	return &TxnProducer{c: c, id: transactionalID}
}

// Session returns the producer session of the current (or last)
// transaction.
func (p *TxnProducer) Session() ProducerSession { return p.s }

// retry runs f until it succeeds, fails with a non-retryable error, or ctx
// ends.
func retry(ctx context.Context, f func() error) error {
	b := pace.Backoff{Initial: 20 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	for {
		err := f()
		if err == nil || !errcode.IsRetryable(err) {
			return err
		}
		if !b.Wait(ctx) {
			return err
		}
	}
}

// Begin starts a transaction under a new producer epoch.
func (p *TxnProducer) Begin(ctx context.Context) error {
	err := retry(ctx, func() (err error) {
		p.s, err = p.c.InitProducerID(ctx, p.id)
		return err
	})
	if err != nil {
		return err
	}
	if err := retry(ctx, func() error { _, err := p.c.BeginTxn(ctx, p.s); return err }); err != nil {
		return err
	}
	p.seq, p.open = 0, true
	return nil
}

// Send publishes one message inside the transaction (partition < 0: the
// server routes by key or round robin).
func (p *TxnProducer) Send(ctx context.Context, topic string, partition int32, key, message string) (Reply, error) {
	if !p.open {
		return Reply{}, errcode.TransactionNotFound.New("no open transaction; Begin first", "transactional_id", p.id)
	}
	p.seq++
	seq := p.seq
	var r Reply
	err := retry(ctx, func() (err error) {
		r, err = p.c.TxnPublish(ctx, p.s, topic, partition, key, seq, message)
		return err
	})
	return r, err
}

// SendOffsets stages the consumer's next offsets of topic in the
// transaction: they are committed with it, or not at all.
func (p *TxnProducer) SendOffsets(ctx context.Context, topic, group, member string, generation int64, offsets []wire.PartitionOffset) error {
	return retry(ctx, func() error {
		_, err := p.c.SendOffsetsToTxn(ctx, p.s, topic, group, member, generation, offsets)
		return err
	})
}

// Commit commits the transaction; a retryable failure after the decision
// (transaction_commit_failed) is retried until the commit completes.
func (p *TxnProducer) Commit(ctx context.Context) error { return p.end(ctx, true) }

// Abort aborts the transaction.
func (p *TxnProducer) Abort(ctx context.Context) error { return p.end(ctx, false) }

func (p *TxnProducer) end(ctx context.Context, commit bool) error {
	err := retry(ctx, func() error { _, err := p.c.EndTxn(ctx, p.s, commit); return err })
	if err == nil {
		p.open = false
	}
	return err
}
