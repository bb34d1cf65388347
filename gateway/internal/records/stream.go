package records

import (
	"context"
	"strconv"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// stream is STREAM: validated and positioned here (a failure is one stream
// frame with status ERROR), then pushed by pushStream on the connection's
// stream goroutine. A stream never advances committed offsets; it resumes
// from them.
func (h *Handlers) stream(ctx context.Context, c *command.Call) ([]byte, error) {
	a, err := parseReadArgs(c.Req, c.Command, true)
	if err != nil {
		return nil, err
	}
	t, err := h.r.LookupTopic(ctx, a.topic)
	if err != nil {
		return nil, err
	}
	if int(a.partition) >= len(t.GetPartitions()) {
		return nil, errcode.PartitionNotFound.New("partition does not exist", "topic", a.topic, "partition", strconv.Itoa(int(a.partition)))
	}
	offset, err := h.startOffset(ctx, t, &a)
	if err != nil {
		return nil, err
	}
	// The connection reuses c for its next request: the stream keeps only
	// the connection and the request's header.
	conn, req := c.Conn, c.Header
	conn.StartStream(func(ctx context.Context, stopReason func() string) {
		h.pushStream(ctx, conn, req, stopReason, a, offset)
	})
	return nil, command.ErrNoReply
}

// pushStream pushes batches about every StreamInterval (a long poll of that
// length on the leader, so new records go out at once), an empty keepalive
// frame after StreamKeepalive of silence, and ends with a STREAM_CONTROL
// CLOSE frame (status STREAM_END) naming the reason and the next offset.
func (h *Handlers) pushStream(ctx context.Context, conn command.Conn, req wire.Header, stopReason func() string, a readArgs, offset uint64) {
	var buf []byte
	lastSend := time.Now()
	failingSince := time.Time{}
	frame := func(status wire.Status, payload []byte) bool {
		return conn.WriteFrame(wire.Header{Kind: wire.KindStream, Command: req.Command, Status: status, RequestID: req.RequestID}, payload)
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
			closeWith(wire.StreamControl{Reason: stopReason()})
			return
		}
		start := time.Now()
		fctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout+h.cfg.StreamInterval)
		resp, err := h.fetch(fctx, a.topic, a.partition, offset, a.batch, h.cfg.StreamInterval, a.isolation)
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
			} else if time.Since(failingSince) > h.cfg.RequestTimeout {
				closeWith(wire.StreamControl{Reason: wire.CloseTimeout})
				return
			}
		} else {
			failingSince = time.Time{}
			if resp.GetRecordCount() > 0 {
				n, size := resp.GetRecordCount(), len(resp.GetRecords())
				p, err := appendBatch(buf[:0], a.topic, a.partition, resp)
				if err != nil {
					closeWith(wire.StreamControl{Reason: wire.CloseError})
					return
				}
				if !frame(wire.StatusOK, p) {
					return
				}
				buf = p[:0]
				h.countDelivered(a.topic, n, size)
				offset = resp.GetNextOffset()
				lastSend = time.Now()
				continue
			}
		}
		if time.Since(lastSend) >= h.cfg.StreamKeepalive {
			if !frame(wire.StatusOK, nil) {
				return
			}
			lastSend = time.Now()
		}
		// A leader that answered at once (no long poll) must not make this
		// loop spin.
		if d := h.cfg.StreamInterval - time.Since(start); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}
