package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
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

// stopStream ends the connection's stream, if any, with a CLOSE frame.
func (c *conn) stopStream(reason string) {
	if c.stream != nil {
		c.stream.stop(reason)
		c.stream = nil
	}
}

func (g *Role) cmdStream(ctx context.Context, c *conn, h wire.Header, r *wire.Request) ([]byte, error) {
	a, err := parseReadArgs(r, "STREAM", true)
	if err != nil {
		return nil, err
	}
	t, err := g.lookupTopic(ctx, a.topic)
	if err != nil {
		return nil, err
	}
	if int(a.partition) >= len(t.GetPartitions()) {
		return nil, errcode.PartitionNotFound.New("partition does not exist", "topic", a.topic, "partition", strconv.Itoa(int(a.partition)))
	}
	// A stream never advances committed offsets; it resumes from them.
	offset, err := g.startOffset(ctx, t, &a)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(g.ctx)
	run := &streamRun{cancel: cancel, done: make(chan struct{})}
	c.stream = run
	g.m.streamsActive.Inc()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(run.done)
		defer g.m.streamsActive.Dec()
		g.pushStream(sctx, c, h, run, a, offset)
	}()
	return nil, errNoReply
}

// pushStream pushes batches about every StreamInterval (a long poll of that
// length on the leader, so new records go out at once), an empty keepalive
// frame after StreamKeepalive of silence, and ends with a STREAM_CONTROL
// CLOSE frame (status STREAM_END) naming the reason and the next offset.
func (g *Role) pushStream(ctx context.Context, c *conn, h wire.Header, run *streamRun, a readArgs, offset uint64) {
	var buf []byte
	lastSend := time.Now()
	failingSince := time.Time{}
	frame := func(status wire.Status, payload []byte) bool {
		return c.writeFrame(wire.Header{Kind: wire.KindStream, Command: h.Command, Status: status, RequestID: h.RequestID}, payload)
	}
	closeWith := func(sc wire.StreamControl) {
		sc.Type = wire.StreamControlClose
		sc.Offset, sc.HasOffset = offset, true
		p, err := sc.AppendTo(buf[:0])
		if err == nil {
			frame(wire.StatusStreamEnd, p)
		}
	}
	for {
		if ctx.Err() != nil {
			closeWith(wire.StreamControl{Reason: run.stopReason()})
			return
		}
		start := time.Now()
		fctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout+g.cfg.StreamInterval)
		resp, err := g.fetch(fctx, a.topic, a.partition, offset, a.batch, g.cfg.StreamInterval, a.isolation)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				continue // stopped: the loop head sends the CLOSE
			}
			e := errcode.From(err)
			switch {
			case e.Code == errcode.OffsetOutOfRange.Name():
				sc := wire.StreamControl{Reason: wire.CloseOffsetOutOfRange, HasRange: true, Requested: offset}
				sc.Earliest, _ = strconv.ParseUint(e.Field("earliest"), 10, 64)
				sc.Latest, _ = strconv.ParseUint(e.Field("latest"), 10, 64)
				closeWith(sc)
				return
			case e.Code == errcode.TopicNotFound.Name() || e.Code == errcode.PartitionNotFound.Name():
				closeWith(wire.StreamControl{Reason: wire.CloseRemoved})
				return
			case !e.Retryable:
				closeWith(wire.StreamControl{Reason: wire.CloseError})
				return
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) > g.cfg.RequestTimeout {
				closeWith(wire.StreamControl{Reason: wire.CloseTimeout})
				return
			}
		} else {
			failingSince = time.Time{}
			if resp.GetRecordCount() > 0 {
				p, err := appendBatch(buf[:0], a.topic, a.partition, resp)
				if err != nil {
					closeWith(wire.StreamControl{Reason: wire.CloseError})
					return
				}
				if !frame(wire.StatusOK, p) {
					return
				}
				buf = p[:0]
				g.m.consumeRecords.Add(float64(resp.GetRecordCount()))
				g.m.consumeBytes.Add(float64(len(resp.GetRecords())))
				offset = resp.GetNextOffset()
				lastSend = time.Now()
				continue
			}
		}
		if time.Since(lastSend) >= g.cfg.StreamKeepalive {
			if !frame(wire.StatusOK, nil) {
				return
			}
			lastSend = time.Now()
		}
		// A leader that answered at once (no long poll) must not make this
		// loop spin.
		if d := g.cfg.StreamInterval - time.Since(start); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}
