package client

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// StreamRequest opens a STREAM (spec 4.6): topic, partition, member and group
// are required.
type StreamRequest struct {
	Topic      string
	Partition  int32
	Member     string
	Group      string
	Isolation  string
	MaxRecords int
	// Buffer is how many frames may wait unread before the client stops
	// reading the socket (backpressure on the server). Default 64.
	Buffer int
}

// StreamClosedError reports the server's STREAM_CONTROL CLOSE frame. With
// reason offset_out_of_range the caller refreshes its committed offset and
// opens a new stream; the other reasons end the stream for good.
type StreamClosedError struct {
	Control wire.StreamControl
}

func (e *StreamClosedError) Error() string {
	s := fmt.Sprintf("stream closed by server: reason=%s", e.Control.Reason)
	if e.Control.HasOffset {
		s += fmt.Sprintf(" offset=%d", e.Control.Offset)
	}
	if e.Control.HasRange {
		s += fmt.Sprintf(" requested=%d earliest=%d latest=%d", e.Control.Requested, e.Control.Earliest, e.Control.Latest)
	}
	return s
}

// Stream is a push subscription to one partition. It owns a dedicated
// connection: Wire v2 has no command to stop a stream, so closing the stream
// closes its socket, and a slow reader applies backpressure to this stream
// only, never to the Client's other requests.
type Stream struct {
	cn         *conn
	cmd        wire.Command
	cl         *call
	keepalives atomic.Int64
	closed     atomic.Bool
}

// Stream opens a STREAM on a new connection with the client's options.
func (c *Client) Stream(ctx context.Context, r StreamRequest) (*Stream, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClientClosed
	}
	if r.Member == "" {
		r.Member = c.opts.ClientID
	}
	if r.Buffer <= 0 {
		r.Buffer = 64
	}
	cn, err := dialConn(ctx, c.addr, &c.opts, c.replies)
	if err != nil {
		return nil, err
	}
	req := params("topic", r.Topic, "partition", fmt.Sprint(r.Partition), "member", r.Member,
		"group", r.Group, "isolation", r.Isolation, "batch", itoaIf(int64(r.MaxRecords)))
	payload, err := req.AppendTo(nil)
	if err != nil {
		cn.shutdown(err)
		return nil, err
	}
	id, cl, err := cn.register(wire.CmdStream, true, r.Buffer)
	if err != nil {
		cn.shutdown(err)
		return nil, err
	}
	if err := cn.send(wire.CmdStream, id, payload); err != nil {
		cn.shutdown(err)
		return nil, err
	}
	return &Stream{cn: cn, cmd: wire.CmdStream, cl: cl}, nil
}

// Next returns the next batch of records. Keepalive frames (empty, status
// OK) are counted and skipped; non-close control frames are skipped. A CLOSE
// control frame ends the stream with *StreamClosedError; an ERROR frame with
// the server's typed error; a lost connection with connection_lost
// (retryable: resume from the committed offset).
func (s *Stream) Next(ctx context.Context) (*wire.Batch, error) {
	for {
		var f frame
		select {
		case f = <-s.cl.frames:
		case <-s.cn.done:
			select {
			case f = <-s.cl.frames:
			default:
				return nil, s.cn.broken()
			}
		case <-ctx.Done():
			return nil, ctxError(ctx, s.cmd)
		}
		switch {
		case f.h.Status == wire.StatusError:
			s.Close()
			return nil, decodeErrorFrame(f)
		case wire.IsStreamControl(f.payload):
			sc, err := wire.ParseStreamControl(f.payload)
			if err != nil {
				s.Close()
				return nil, err
			}
			if sc.Type == wire.StreamControlClose || f.h.Status == wire.StatusStreamEnd {
				s.Close()
				return nil, &StreamClosedError{Control: sc}
			}
			continue
		case f.h.Status == wire.StatusStreamEnd:
			s.Close()
			return nil, &StreamClosedError{Control: wire.StreamControl{Type: wire.StreamControlClose, Reason: wire.CloseStopped}}
		case len(f.payload) == 0:
			s.keepalives.Add(1)
			continue
		}
		b, err := decodeBatchReply(f.payload)
		if err != nil {
			s.Close()
			return nil, err
		}
		return b, nil
	}
}

// Batches returns a range-over-func iterator over Next: it yields each batch,
// then the terminal error once (a *StreamClosedError on a clean close) and
// stops; breaking out of the loop leaves the stream open (Close it).
//
//	for b, err := range st.Batches(ctx) { ... }
func (s *Stream) Batches(ctx context.Context) iter.Seq2[*wire.Batch, error] {
	return func(yield func(*wire.Batch, error) bool) {
		for {
			b, err := s.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(b, nil) {
				return
			}
		}
	}
}

// Keepalives returns how many keepalive frames were received.
func (s *Stream) Keepalives() int64 { return s.keepalives.Load() }

// Close ends the stream by closing its connection.
func (s *Stream) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.cn.shutdown(&errcode.Error{Code: CodeClientClosed, Class: errcode.ClassAvailability, Message: "stream closed"})
	}
	return nil
}
