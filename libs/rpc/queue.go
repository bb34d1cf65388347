package rpc

import (
	"io"
	"sync"

	"google.golang.org/protobuf/proto"
)

// Bounds of one direction of an in-process stream (see queue). The byte
// budget is gRPC's stream window (StreamWindow), so a direct stream lets a
// sender run as far ahead of its receiver as a TCP stream does; the message
// bound keeps a stream of small messages (acknowledgements) from queueing
// thousands of them.
const (
	queueMaxMsgs  = 64
	queueMaxBytes = StreamWindow
)

// queue is one direction of an in-process stream: the messages a sender
// handed over and the receiver has not taken yet. It holds at most
// queueMaxMsgs messages and queueMaxBytes bytes (their encoded size, which
// gRPC's flow control counts): a sender past either bound waits until the
// receiver takes messages or the stream ends, as a gRPC sender waits for
// window. A message larger than the byte budget is let in when the queue is
// empty, as one larger than a window goes out in pieces. One goroutine sends
// and one receives at a time (gRPC's rule for SendMsg and RecvMsg).
type queue struct {
	mu    sync.Mutex
	items []queued // FIFO; items[head:] are waiting
	head  int
	bytes int
	// end is set when the sender is done: io.EOF after a half-close (or the
	// final status of a server stream; nil means io.EOF), delivered after
	// the waiting messages. abort is set when the stream ended at once:
	// waiting messages are dropped, the receiver gets abort and the sender
	// sendErr.
	ended   bool
	end     error
	abort   error
	sendErr error
	ready   chan struct{} // cap 1: a message, an end or an abort arrived
	room    chan struct{} // cap 1: room was made or the queue aborted
}

type queued struct {
	m    proto.Message
	size int
}

func newQueue() *queue {
	return &queue{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push hands m (of encoded size size; the queue owns m from now on) to
// the receiver, waiting for room. It fails with the abort's sendErr once
// the stream ended, or errSendAfterClose after close.
func (q *queue) push(m proto.Message, size int) error {
	for {
		q.mu.Lock()
		if q.abort != nil {
			err := q.sendErr
			q.mu.Unlock()
			return err
		}
		if q.ended {
			q.mu.Unlock()
			return errSendAfterClose
		}
		n := len(q.items) - q.head
		if n == 0 || (n < queueMaxMsgs && q.bytes+size <= queueMaxBytes) {
			if q.head > 0 && q.head == len(q.items) {
				clear(q.items) // drop the references the receiver took
				q.items, q.head = q.items[:0], 0
			}
			q.items = append(q.items, queued{m: m, size: size})
			q.bytes += size
			q.mu.Unlock()
			notify(q.ready)
			return nil
		}
		q.mu.Unlock()
		<-q.room
	}
}

// pop takes the next message, waiting for one. Once none is left it
// returns the end (io.EOF when the sender ended without an error) or the
// abort.
func (q *queue) pop() (proto.Message, error) {
	for {
		q.mu.Lock()
		if q.abort != nil {
			err := q.abort
			q.mu.Unlock()
			return nil, err
		}
		if q.head < len(q.items) {
			it := q.items[q.head]
			q.items[q.head] = queued{}
			q.head++
			q.bytes -= it.size
			q.mu.Unlock()
			notify(q.room)
			return it.m, nil
		}
		if q.ended {
			err := q.end
			q.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return nil, err
		}
		q.mu.Unlock()
		<-q.ready
	}
}

// close ends the sending side: the receiver gets the waiting messages,
// then end (nil: io.EOF). Closing an ended or aborted queue does nothing.
func (q *queue) close(end error) {
	q.mu.Lock()
	if q.ended || q.abort != nil {
		q.mu.Unlock()
		return
	}
	q.ended, q.end = true, end
	q.mu.Unlock()
	notify(q.ready)
}

// fail ends the queue at once: waiting messages are dropped, the receiver
// gets recvErr and a sender sendErr. The first abort wins.
func (q *queue) fail(recvErr, sendErr error) {
	q.mu.Lock()
	if q.abort != nil {
		q.mu.Unlock()
		return
	}
	q.abort, q.sendErr = recvErr, sendErr
	clear(q.items)
	q.items, q.head, q.bytes = nil, 0, 0
	q.mu.Unlock()
	notify(q.ready)
	notify(q.room)
}
