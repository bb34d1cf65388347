package gateway

import (
	"context"
	"sync"

	"github.com/strataio/strata/libs/wire"
)

// streamRun is an accepted STREAM pushing from its own goroutine.
type streamRun struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	reason string // close reason when stopped from outside
}

func (s *streamRun) stop(reason string) {
	s.mu.Lock()
	if s.reason == "" {
		s.reason = reason
	}
	s.mu.Unlock()
	s.cancel()
	<-s.done
}

func (s *streamRun) stopReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason == "" {
		return wire.CloseStopped
	}
	return s.reason
}

// StartStream implements command.Conn: push runs on a goroutine of the
// gateway's (Stop waits for it) as the connection's active stream, until the
// next request, the connection's end or the gateway's stop cancels its
// context.
func (c *conn) StartStream(push func(ctx context.Context, stopReason func() string)) {
	g := c.g
	sctx, cancel := context.WithCancel(g.ctx)
	run := &streamRun{cancel: cancel, done: make(chan struct{})}
	c.stream = run
	g.m.streamsActive.Inc()
	// Called from the connection's loop, so Go always starts the push.
	g.Go(func(context.Context) {
		defer close(run.done)
		defer g.m.streamsActive.Dec()
		push(sctx, run.stopReason)
	})
}

// stopStream ends the connection's stream, if any, with a CLOSE frame.
func (c *conn) stopStream(reason string) {
	if c.stream != nil {
		c.stream.stop(reason)
		c.stream = nil
	}
}
