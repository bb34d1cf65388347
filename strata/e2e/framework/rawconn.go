package framework

import (
	"net"
	"time"

	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

// RawConn is a Wire v2 connection driven frame by frame (libs/wire only),
// for malformed input and for behaviour the client library hides (acks=0
// sends no frame, STREAM_CONTROL on a new request, internal command ids):
// libs/wire/wiretest's, which the gateway's tests share.
type RawConn = wiretest.Conn

// The raw-connection helpers are wiretest's (see there).
var (
	NewRawConn       = wiretest.NewConn
	DialRaw          = wiretest.DialRaw
	NegotiationFrame = wiretest.NegotiationFrame
	Negotiate        = wiretest.Negotiate
	NegotiateTable   = wiretest.NegotiateTable
	FrameErr         = wiretest.FrameErr
	ExpectClosed     = wiretest.ExpectClosed
	// NegotiationRequestFrame builds negotiations NegotiationFrame does
	// not offer (other versions, table B).
	NegotiationRequestFrame = wiretest.NegotiationRequestFrame
)

// ReadNegotiationResponse reads the answer to the negotiation request sent on
// nc through fr, whose frames table numbers, within timeout.
func ReadNegotiationResponse(nc net.Conn, fr *wire.FrameReader, table *wire.CommandTable, timeout time.Duration) (wire.Frame, error) {
	nc.SetReadDeadline(time.Now().Add(timeout))
	return fr.ReadFrame(&wire.Codec{Table: table, Limits: wire.PublicLimits})
}
