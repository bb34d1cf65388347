package gateway

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/wire"
)

func (g *Role) acceptLoop(ctx context.Context) {
	backoff := pace.Backoff{Initial: 5 * time.Millisecond, Max: time.Second}
	for {
		nc, err := g.lis.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE) must not spin the loop.
			g.log.Warn("accept failed", "err", err)
			backoff.Wait(ctx)
			continue
		}
		backoff.Reset()
		g.m.connsTotal.Inc()
		c := newConn(g, nc)
		g.connMu.Lock()
		full := len(g.conns) >= g.cfg.MaxConnections
		if !full {
			g.conns[c] = struct{}{}
		}
		g.connMu.Unlock()
		if full {
			g.refuse(nc)
			continue
		}
		g.m.connsActive.Inc()
		g.Go(func(context.Context) {
			c.serve()
			g.connMu.Lock()
			delete(g.conns, c)
			g.connMu.Unlock()
			g.m.connsActive.Dec()
		})
	}
}

// maxRefusing bounds the goroutines answering refused connections, so a
// connection flood costs a bounded amount of work.
const maxRefusing = 64

// refuse answers a connection beyond MaxConnections cleanly: it reads the
// negotiation request (briefly) and answers a negotiation response with
// status ERROR carrying connection_limit_reached, then closes. Beyond
// maxRefusing concurrent refusals the socket is just closed.
func (g *Role) refuse(nc net.Conn) {
	g.m.connsRefused.Inc()
	if g.refusing.Add(1) > maxRefusing {
		g.refusing.Add(-1)
		nc.Close()
		return
	}
	g.Go(func(context.Context) {
		defer g.refusing.Add(-1)
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(time.Second))
		fr := wire.NewFrameReader(nc)
		f, table, err := fr.ReadFirstFrame(wire.NegotiationLimits)
		if err != nil {
			return
		}
		codec := wire.Codec{Table: table, Limits: wire.NegotiationLimits}
		payload, _ := wire.AppendError(nil, errcode.ConnectionLimitReached.New("too many client connections",
			"limit", strconv.Itoa(g.cfg.MaxConnections)))
		frame, err := codec.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationResponse, Command: f.Header.Command,
			Status: wire.StatusError, RequestID: f.Header.RequestID}, payload)
		if err == nil {
			nc.Write(frame)
		}
	})
}
