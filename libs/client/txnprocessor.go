package client

import (
	"context"
	"time"

	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/wire"
)

// Output is one message a TxnProcessor's process function produces.
// Partition < 0 lets the server route (by key, else round robin).
type Output struct {
	Topic     string
	Partition int32
	Key       string
	Message   string
}

// TxnProcessorOptions configures a TxnProcessor.
type TxnProcessorOptions struct {
	// Consumer is the group consumer of the input; its Isolation is forced
	// to read_committed (the input may itself be transactional output).
	Consumer ConsumerOptions
	// TransactionalID identifies the producer: a restarted instance must
	// use the same one, so its first transaction fences the old instance
	// and aborts what it left open.
	TransactionalID string
}

// TxnProcessor is an exactly-once consume-process-produce loop (spec 4.7):
// a group Consumer reading read_committed and a TxnProducer. Each Step
// polls one batch of one input partition and, in one transaction, sends
// the outputs process makes of it and stages the consumed position as the
// group's offset (SEND_OFFSETS_TO_TXN), then commits: the outputs become
// visible and the input counts as consumed together, or neither does.
//
// On a failure the transaction is aborted, the partition's position goes
// back to where the batch started, and before the next poll the producer
// is re-initialised (INIT_PRODUCER_ID, retried while an earlier commit is
// still being decided) so the group's committed offsets are final when the
// position is re-read: the batch is processed again only if its first
// transaction did not commit. Fencing answers (a rebalance, a stale
// generation) make the consumer rejoin. Not safe for concurrent use.
type TxnProcessor struct {
	k  *Consumer
	p  *TxnProducer
	c  *Client
	id string
	// resync: the producer must be re-initialised and the positions
	// re-read before the next poll (at start, and after any failure).
	resync bool
}

// NewTxnProcessor returns a TxnProcessor; it joins the group on the first
// Step.
func NewTxnProcessor(c *Client, o TxnProcessorOptions) *TxnProcessor {
	o.Consumer.Isolation = "read_committed"
	return &TxnProcessor{k: NewConsumer(c, o.Consumer), p: c.NewTxnProducer(o.TransactionalID), c: c,
		id: o.TransactionalID, resync: true}
}

// Consumer returns the group consumer (member id, generation, assignment).
func (t *TxnProcessor) Consumer() *Consumer { return t.k }

// Producer returns the transactional producer (its current session).
func (t *TxnProcessor) Producer() *TxnProducer { return t.p }

// Step runs one transaction: poll, process every record, send the
// outputs, stage the offsets, commit. It returns how many input records
// the committed transaction consumed (0 when the poll found nothing; no
// transaction is started then). On an error nothing of the batch is
// visible and the next Step starts again from the last committed offsets.
func (t *TxnProcessor) Step(ctx context.Context, process func(wire.Record) ([]Output, error)) (int, error) {
	if t.resync {
		if err := t.reinit(ctx); err != nil {
			return 0, err
		}
	}
	part, from, recs, err := t.k.poll(ctx)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	if err := t.run(ctx, part, recs, process); err != nil {
		// Best effort: a commit whose outcome is unknown is settled by
		// the re-initialisation before the next poll, not by this abort.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = t.p.Abort(actx)
		cancel()
		t.p.open = false
		t.k.Seek(part, from)
		if MustRejoin(err) {
			t.k.mu.Lock()
			t.k.rejoin = true
			t.k.mu.Unlock()
		}
		t.resync = true
		return 0, err
	}
	next := recs[len(recs)-1].Offset + 1
	t.k.mu.Lock()
	if _, ok := t.k.committed[part]; ok {
		t.k.committed[part] = next
	}
	t.k.mu.Unlock()
	return len(recs), nil
}

func (t *TxnProcessor) run(ctx context.Context, part int32, recs []wire.Record, process func(wire.Record) ([]Output, error)) error {
	if err := t.p.Begin(ctx); err != nil {
		return err
	}
	for _, r := range recs {
		outs, err := process(r)
		if err != nil {
			return err
		}
		for _, o := range outs {
			if _, err := t.p.Send(ctx, o.Topic, o.Partition, o.Key, o.Message); err != nil {
				return err
			}
		}
	}
	next := recs[len(recs)-1].Offset + 1
	err := t.p.SendOffsets(ctx, t.k.o.Topic, t.k.o.Group, t.k.Member(), t.k.Generation(),
		[]wire.PartitionOffset{{Partition: part, Offset: next}})
	if err != nil {
		return err
	}
	return t.p.Commit(ctx)
}

// reinit re-initialises the producer session (fencing an older instance,
// aborting its open transaction and waiting out a commit still being
// decided: INIT_PRODUCER_ID answers concurrent_transactions meanwhile, and
// retry waits), then re-reads the group's committed offsets into the
// positions: after it the committed offsets are final for this
// transactional id.
func (t *TxnProcessor) reinit(ctx context.Context) error {
	err := retry(ctx, func() (err error) {
		t.p.s, err = t.c.InitProducerID(ctx, t.id)
		return err
	})
	if err != nil {
		return err
	}
	t.p.open = false
	t.k.mu.Lock()
	parts, joined := append([]int32(nil), t.k.parts...), t.k.joined && !t.k.rejoin
	t.k.mu.Unlock()
	if joined {
		for _, p := range parts {
			off, err := t.k.c.FetchOffset(ctx, t.k.o.Topic, p, t.k.o.Group)
			if err != nil {
				if MustRejoin(err) {
					t.k.mu.Lock()
					t.k.rejoin = true
					t.k.mu.Unlock()
					break
				}
				return err
			}
			t.k.mu.Lock()
			if _, ok := t.k.pos[p]; ok {
				t.k.pos[p], t.k.committed[p] = off, off
			}
			t.k.mu.Unlock()
		}
	}
	t.resync = false
	return nil
}

// Run calls Step until ctx ends or done reports true, pausing briefly
// after a failed step (a failover or a rebalance settles meanwhile);
// onErr, when set, sees every failed step's error.
func (t *TxnProcessor) Run(ctx context.Context, process func(wire.Record) ([]Output, error), done func() bool, onErr func(error)) error {
	b := pace.Backoff{Initial: 50 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	for done == nil || !done() {
		if _, err := t.Step(ctx, process); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if onErr != nil {
				onErr(err)
			}
			if !b.Wait(ctx) {
				return ctx.Err()
			}
			continue
		}
		b.Reset()
	}
	return nil
}

// Close leaves the group; an open transaction (there is none between
// Steps) would be aborted by the next instance or the timeout.
func (t *TxnProcessor) Close(ctx context.Context) error { return t.k.Close(ctx) }
