package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/wire"
)

// ProducerOptions configures a Producer.
type ProducerOptions struct {
	// Acks for every batch: "0", "1", "all" (default "1"; "all" when
	// Idempotent, which the server requires).
	Acks string
	// Idempotent stamps producer id, epoch and per-partition sequence numbers
	// (starting at 1) on every record and sets the batch's idempotent flag,
	// so a retried batch is stored once.
	Idempotent bool
	// ProducerID defaults to "<ClientID>-<random>"; Epoch defaults to 0.
	ProducerID string
	Epoch      int64
	// BatchRecords and BatchBytes close a batch early (defaults 1000 records,
	// 1 MiB); Linger is how long a partial batch waits for more records
	// (default 5 ms; 0 keeps the default, negative sends at once).
	BatchRecords int
	BatchBytes   int
	Linger       time.Duration
	// MaxRetries bounds resends of a batch after a retryable error (default
	// 5); RetryBackoff is the first wait, doubled per attempt (default 100 ms).
	MaxRetries   int
	RetryBackoff time.Duration
	// RoundRobin ignores keys when routing records without an explicit
	// partition; the default hashes keys (FNV-1a 64 modulo partitions) as the
	// server's hash_key partitioner does and round-robins unkeyed records.
	RoundRobin bool
	// QueueBatches is how many closed batches may wait per partition before
	// Send blocks (default 8).
	QueueBatches int
}

// Message is one record to produce.
type Message struct {
	Topic string
	// Partition < 0 routes by key (see ProducerOptions.RoundRobin).
	Partition int32
	Key       string
	Value     []byte
	// Timestamp in Unix milliseconds; 0 means now.
	Timestamp int64
}

// Result is the outcome of one sent message; Done is closed when it is known.
type Result struct {
	done      chan struct{}
	Partition int32
	// Offset is the record's offset; valid when Err is nil and OffsetKnown.
	Offset uint64
	// OffsetKnown is false for acks 0 and for a batch the server reported as
	// an already stored duplicate (duplicate_sequence).
	OffsetKnown bool
	Err         error
}

// Done is closed when the result is final.
func (r *Result) Done() <-chan struct{} { return r.done }

// Wait blocks until the result is final or ctx ends.
func (r *Result) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-r.done:
		return r.Offset, r.Err
	case <-ctx.Done():
		return 0, ctxError(ctx, wire.CmdPublish)
	}
}

// Producer batches messages per partition and publishes them with
// PublishBatch. One batch per partition is in flight at a time, so records of
// a partition keep their order across retries; partitions proceed in
// parallel over the Client's pipelined connection.
type Producer struct {
	c    *Client
	o    ProducerOptions
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	parts  map[partKey]*partBuf
	counts map[string]int
	rr     uint64
	closed bool
}

type partKey struct {
	topic string
	part  int32
}

type partBuf struct {
	key   partKey
	mu    sync.Mutex
	recs  []wire.Record
	res   []*Result
	bytes int
	seq   uint64
	timer *time.Timer
	queue chan *outBatch
	// closed is set (under mu) when Close closed queue.
	closed bool
}

type outBatch struct {
	batch   wire.Batch
	results []*Result
	flushed chan struct{}
}

// NewProducer returns a Producer over c. Close it to flush and stop.
func NewProducer(c *Client, o ProducerOptions) *Producer {
	if o.Acks == "" {
		o.Acks = AcksLeader
		if o.Idempotent {
			o.Acks = AcksAll
		}
	}
	if o.ProducerID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.ProducerID = c.opts.ClientID + "-" + hex.EncodeToString(b[:])
	}
	if o.BatchRecords <= 0 {
		o.BatchRecords = 1000
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 1 << 20
	}
	if o.Linger == 0 {
		o.Linger = 5 * time.Millisecond
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 5
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 100 * time.Millisecond
	}
	if o.QueueBatches <= 0 {
		o.QueueBatches = 8
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Producer{c: c, o: o, ctx: ctx, stop: stop, parts: map[partKey]*partBuf{}, counts: map[string]int{}}
}

// ProducerID returns the producer id stamped on idempotent records.
func (p *Producer) ProducerID() string { return p.o.ProducerID }

var errProducerClosed = &errcode.Error{Code: CodeClientClosed, Class: errcode.ClassAvailability, Message: "producer closed"}

// Send queues m and returns its Result. It blocks only when the partition's
// queue is full. Errors here are about m itself (routing, closed producer);
// delivery errors arrive in the Result.
func (p *Producer) Send(ctx context.Context, m Message) (*Result, error) {
	part := m.Partition
	if part < 0 {
		var err error
		if part, err = p.route(ctx, m.Topic, m.Key); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errProducerClosed
	}
	k := partKey{m.Topic, part}
	pb := p.parts[k]
	if pb == nil {
		pb = &partBuf{key: k, queue: make(chan *outBatch, p.o.QueueBatches)}
		p.parts[k] = pb
		p.wg.Add(1)
		go p.sender(pb)
	}
	p.mu.Unlock()

	ts := m.Timestamp
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	r := &Result{done: make(chan struct{}), Partition: part}
	rec := wire.Record{Topic: m.Topic, Partition: part, Payload: m.Value, Key: m.Key, Timestamp: ts}
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if pb.closed {
		return nil, errProducerClosed
	}
	if p.o.Idempotent {
		pb.seq++
		rec.ProducerID, rec.SeqNum, rec.Epoch = p.o.ProducerID, pb.seq, p.o.Epoch
	}
	pb.recs = append(pb.recs, rec)
	pb.res = append(pb.res, r)
	pb.bytes += 64 + len(m.Value) + len(m.Key) + len(m.Topic)
	if len(pb.recs) >= p.o.BatchRecords || pb.bytes >= p.o.BatchBytes || p.o.Linger < 0 {
		if err := p.flushLocked(ctx, pb, nil); err != nil {
			return nil, err
		}
	} else if pb.timer == nil {
		pb.timer = time.AfterFunc(p.o.Linger, func() {
			pb.mu.Lock()
			defer pb.mu.Unlock()
			_ = p.flushLocked(p.ctx, pb, nil)
		})
	}
	return r, nil
}

// flushLocked closes pb's open batch and queues it (pb.mu held, which also
// keeps batches of the partition in sequence order in the queue).
func (p *Producer) flushLocked(ctx context.Context, pb *partBuf, flushed chan struct{}) error {
	if pb.timer != nil {
		pb.timer.Stop()
		pb.timer = nil
	}
	if len(pb.recs) == 0 || pb.closed {
		if flushed != nil {
			close(flushed)
		}
		return nil
	}
	ob := &outBatch{
		batch: wire.Batch{
			BatchHeader: wire.BatchHeader{Idempotent: p.o.Idempotent, Topic: pb.key.topic, Partition: pb.key.part, Acks: p.o.Acks},
			Records:     pb.recs,
		},
		results: pb.res,
		flushed: flushed,
	}
	pb.recs, pb.res, pb.bytes = nil, nil, 0
	select {
	case pb.queue <- ob:
		return nil
	case <-ctx.Done():
		err := ctxError(ctx, wire.CmdPublish)
		finish(ob, nil, 0, err)
		return err
	case <-p.ctx.Done():
		finish(ob, nil, 0, errProducerClosed)
		return errProducerClosed
	}
}

func (p *Producer) sender(pb *partBuf) {
	defer p.wg.Done()
	for ob := range pb.queue {
		if len(ob.batch.Records) == 0 {
			finish(ob, nil, 0, nil)
			continue
		}
		if p.ctx.Err() != nil {
			// Closed while batches were queued: fail them without sending.
			finish(ob, nil, 0, errProducerClosed)
			continue
		}
		ack, err := p.publish(&ob.batch)
		finish(ob, &ack, len(ob.batch.Records), err)
	}
}

// publish sends one batch, retrying retryable errors with the same sequence
// numbers (idempotent producers are deduplicated by the server).
func (p *Producer) publish(b *wire.Batch) (wire.AckResponse, error) {
	backoff := pace.Backoff{Initial: p.o.RetryBackoff, Max: 5 * time.Second}
	for attempt := 0; ; attempt++ {
		ack, err := p.c.PublishBatch(p.ctx, b)
		if err == nil || !errcode.IsRetryable(err) || attempt >= p.o.MaxRetries || p.ctx.Err() != nil {
			return ack, err
		}
		// A non-idempotent batch resent after a lost connection may be stored
		// twice; that is the documented at-least-once contract of acks<all
		// without idempotence.
		if !backoff.Wait(p.ctx) {
			return ack, err
		}
	}
}

func finish(ob *outBatch, ack *wire.AckResponse, n int, err error) {
	known := err == nil && ack != nil && !isAcksZero(ob.batch.Acks)
	if err != nil && errors.Is(err, errcode.DuplicateSequence) {
		err, known = nil, false
	}
	for i, r := range ob.results {
		r.Err = err
		if known {
			r.OffsetKnown = true
			r.Offset = ack.LastOffset - uint64(n-1-i)
		}
		close(r.done)
	}
	if ob.flushed != nil {
		close(ob.flushed)
	}
}

// Flush sends every open batch and waits until all queued batches are
// answered (or ctx ends).
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	bufs := make([]*partBuf, 0, len(p.parts))
	for _, pb := range p.parts {
		bufs = append(bufs, pb)
	}
	p.mu.Unlock()
	var waits []chan struct{}
	for _, pb := range bufs {
		ch := make(chan struct{})
		pb.mu.Lock()
		if pb.closed {
			pb.mu.Unlock()
			continue
		}
		if len(pb.recs) == 0 {
			// Nothing open: queue an empty marker batch so Flush still waits
			// for what is already queued (under pb.mu, so Close cannot
			// close the queue meanwhile).
			select {
			case pb.queue <- &outBatch{flushed: ch}:
				pb.mu.Unlock()
			case <-ctx.Done():
				pb.mu.Unlock()
				return ctxError(ctx, wire.CmdPublish)
			}
		} else {
			err := p.flushLocked(ctx, pb, ch)
			pb.mu.Unlock()
			if err != nil {
				return err
			}
		}
		waits = append(waits, ch)
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctxError(ctx, wire.CmdPublish)
		}
	}
	return nil
}

// Close flushes (bounded by ctx), then stops the senders. Messages still
// unsent when ctx ends fail with client_closed.
func (p *Producer) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return err
	}
	p.closed = true
	bufs := p.parts
	p.mu.Unlock()
	p.stop()
	for _, pb := range bufs {
		pb.mu.Lock()
		if pb.timer != nil {
			pb.timer.Stop()
			pb.timer = nil
		}
		if len(pb.recs) > 0 {
			finish(&outBatch{results: pb.res}, nil, 0, errProducerClosed)
			pb.recs, pb.res = nil, nil
		}
		pb.closed = true
		close(pb.queue)
		pb.mu.Unlock()
	}
	p.wg.Wait()
	return err
}

// route picks a partition for a record without one.
func (p *Producer) route(ctx context.Context, topic, key string) (int32, error) {
	p.mu.Lock()
	n := p.counts[topic]
	p.mu.Unlock()
	if n == 0 {
		md, err := p.c.Metadata(ctx, topic)
		if err != nil {
			return 0, err
		}
		if md.Partitions <= 0 {
			return 0, errcode.PartitionNotFound.New("topic has no partitions", "topic", topic)
		}
		n = md.Partitions
		p.mu.Lock()
		p.counts[topic] = n
		p.mu.Unlock()
	}
	if key != "" && !p.o.RoundRobin {
		return placement.KeyPartitionString(key, int32(n)), nil
	}
	p.mu.Lock()
	p.rr++
	r := p.rr
	p.mu.Unlock()
	return int32(r % uint64(n)), nil
}
