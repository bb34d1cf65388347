// Package produce multiplexes the gateway's appends to one partitiond over a
// single long-lived PartitionService.Produce stream: every request carries a
// correlation id, responses may come back in any order, and a broken stream
// fails its pending requests and is reopened by the next call. One stream per
// partitiond keeps the publish hot path free of per-call RPC setup.
package produce

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Mux is the produce stream to one partitiond. It is safe for concurrent use.
type Mux struct {
	client partitionv1.PartitionServiceClient

	mu     sync.Mutex
	cur    *stream
	closed bool
	wg     sync.WaitGroup
	next   atomic.Uint64
}

type result struct {
	resp *partitionv1.AppendResponse
	err  error
}

type stream struct {
	s      grpc.BidiStreamingClient[partitionv1.ProduceRequest, partitionv1.ProduceResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex

	mu      sync.Mutex
	pending map[uint64]chan result
	err     error
}

// New returns a Mux over conn; the stream opens on first use.
func New(conn grpc.ClientConnInterface) *Mux {
	return &Mux{client: partitionv1.NewPartitionServiceClient(conn)}
}

var resultPool = sync.Pool{New: func() any { return make(chan result, 1) }}

// Append sends req and waits for its response. A typed error from the
// partition (ProduceResponse.error) is returned as *errcode.Error with the
// response; a broken stream returns a retryable availability error.
func (m *Mux) Append(ctx context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	st, err := m.stream()
	if err != nil {
		return nil, err
	}
	id := m.next.Add(1)
	ch := resultPool.Get().(chan result)
	st.mu.Lock()
	if st.err != nil {
		err := st.err
		st.mu.Unlock()
		resultPool.Put(ch)
		return nil, err
	}
	st.pending[id] = ch
	st.mu.Unlock()
	if err := st.send(&partitionv1.ProduceRequest{CorrelationId: id, Append: req}); err != nil {
		st.fail(err)
		m.drop(st)
		// fail delivered (or will deliver) the error on ch; drain it so the
		// channel goes back to the pool empty.
		r := <-ch
		resultPool.Put(ch)
		return nil, r.err
	}
	select {
	case r := <-ch:
		resultPool.Put(ch)
		if r.err != nil {
			return nil, r.err
		}
		if e := r.resp.GetError(); e != nil {
			return r.resp, errcode.FromProto(e)
		}
		return r.resp, nil
	case <-ctx.Done():
		st.mu.Lock()
		_, still := st.pending[id]
		delete(st.pending, id)
		st.mu.Unlock()
		if !still {
			<-ch // the response raced the cancellation
		}
		resultPool.Put(ch)
		return nil, errcode.From(ctx.Err())
	}
}

// Send sends req without waiting for an answer (acks=0: fire and forget).
// Any response the partition still sends is dropped by the receiver.
func (m *Mux) Send(req *partitionv1.AppendRequest) error {
	st, err := m.stream()
	if err != nil {
		return err
	}
	if err := st.send(&partitionv1.ProduceRequest{CorrelationId: m.next.Add(1), Append: req}); err != nil {
		st.fail(err)
		m.drop(st)
		return err
	}
	return nil
}

func (st *stream) send(r *partitionv1.ProduceRequest) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	return st.s.Send(r)
}

// stream returns the open stream, opening one when needed.
func (m *Mux) stream() (*stream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errcode.RouterNotAvailable.New("produce stream closed")
	}
	if m.cur != nil {
		return m.cur, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := m.client.Produce(ctx)
	if err != nil {
		cancel()
		return nil, errcode.From(err)
	}
	st := &stream{s: s, cancel: cancel, pending: map[uint64]chan result{}}
	m.cur = st
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := st.recv()
		// Forget the stream before failing its requests: a caller woken by
		// the failure that retries at once must get a new stream, not this
		// broken one again.
		m.drop(st)
		st.fail(err)
	}()
	return st, nil
}

// drop forgets st so the next call opens a new stream.
func (m *Mux) drop(st *stream) {
	m.mu.Lock()
	if m.cur == st {
		m.cur = nil
	}
	m.mu.Unlock()
	st.cancel()
}

// recv delivers responses until the stream breaks, and returns why.
func (st *stream) recv() error {
	for {
		resp, err := st.s.Recv()
		if err != nil {
			return err
		}
		st.mu.Lock()
		ch, ok := st.pending[resp.GetCorrelationId()]
		delete(st.pending, resp.GetCorrelationId())
		st.mu.Unlock()
		if ok {
			ch <- result{resp: resp.GetAppend()}
		}
	}
}

// fail ends the stream: every pending request gets a retryable error.
func (st *stream) fail(err error) {
	e := errcode.From(err)
	if e.Class != errcode.ClassAvailability {
		// A transport failure says nothing about the request itself; the
		// caller may retry it (the partition deduplicates idempotent
		// producers).
		e = errcode.ReplicationUnavailable.New("produce stream failed: " + e.Error())
	}
	st.mu.Lock()
	if st.err == nil {
		st.err = e
	}
	for id, ch := range st.pending {
		delete(st.pending, id)
		ch <- result{err: e}
	}
	st.mu.Unlock()
}

// Close ends the stream and waits for its receiver.
func (m *Mux) Close() {
	m.mu.Lock()
	m.closed = true
	st := m.cur
	m.cur = nil
	m.mu.Unlock()
	if st != nil {
		st.cancel()
	}
	m.wg.Wait()
}
