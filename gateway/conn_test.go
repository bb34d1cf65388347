package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

func TestFirstFrameMustBeNegotiation(t *testing.T) {
	c := startCluster(t, nil)
	// Raw text: bad magic.
	nc := wiretest.DialRaw(t, c.addr)
	nc.Write([]byte("CREATE topic=x partitions=1\n                                  "))
	wiretest.ExpectClosed(t, nc)
	// A request frame before negotiation.
	nc = wiretest.DialRaw(t, c.addr)
	codec := wire.Codec{Table: wire.TableA, Compression: wire.CompressionNone}
	id, _ := wire.TableA.ID(wire.CmdList)
	p, _ := (&wire.Request{}).AppendTo(nil)
	frame, err := codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: id, RequestID: 1}, p)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write(frame)
	wiretest.ExpectClosed(t, nc)
	looptest.Eventually(t, "failures counted", func() bool {
		return testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("bad_magic")) == 1 &&
			testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("not_negotiation")) == 1
	})
	// No common version: no answer, connection dropped, counted.
	nc = wiretest.DialRaw(t, c.addr)
	fr := wire.NewFrameReader(nc)
	req, _ := wire.NegotiationRequest{MinVersion: 3, MaxVersion: 4, Compressions: []wire.Compression{wire.CompressionNone}}.AppendTo(nil)
	neg := wire.Codec{Table: wire.TableA, Limits: wire.NegotiationLimits}
	frame, _ = neg.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationRequest, Command: 46}, req)
	nc.Write(frame)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := fr.ReadFrame(&neg); err == nil {
		t.Fatal("a failed negotiation must not be answered")
	}
	looptest.Eventually(t, "negotiation failure counted", func() bool {
		return testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("negotiation_failed")) == 1
	})
	// A client that negotiated still works after all that.
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionLZ4)
	if got := cl.OK("LIST"); got != "OK count=0 topics=" {
		t.Fatalf("LIST = %q", got)
	}
}

func TestCorruptFrameIsAnsweredAndCounted(t *testing.T) {
	c, cl := startDialed(t)
	id, _ := wire.TableA.ID(wire.CmdList)
	p, _ := (&wire.Request{}).AppendTo(nil)
	frame, _ := cl.Codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: id, RequestID: 7}, p)
	frame[len(frame)-1] ^= 0xff // break the CRC32C
	cl.Conn.Write(frame)
	f := cl.MustRead()
	if e := wiretest.FrameErr(t, f); e.Code != "invalid_frame" || e.Field("reason") != "checksum_mismatch" || f.Header.RequestID != 7 {
		t.Fatalf("corrupt frame: %v (id %d)", e, f.Header.RequestID)
	}
	if v := testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("checksum_mismatch")); v != 1 {
		t.Fatalf("checksum failures %v", v)
	}
	// The stream stayed aligned.
	cl.LastID = 7
	if got := cl.OK("LIST"); got != "OK count=0 topics=" {
		t.Fatalf("LIST = %q", got)
	}
}

func TestMaxConnectionsRefusedCleanly(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.MaxConnections = 2 })
	a := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	nc := wiretest.DialRaw(t, c.addr)
	fr := wire.NewFrameReader(nc)
	f := wiretest.Offer(t, nc, fr, wire.TableA, wire.CompressionNone)
	if f.Header.Kind != wire.KindNegotiationResponse || f.Header.Status != wire.StatusError {
		t.Fatalf("refusal frame %+v", f.Header)
	}
	if e, err := wire.DecodeError(f.Payload); err != nil || e.Code != "connection_limit_reached" {
		t.Fatalf("refusal %v %v", e, err)
	}
	wiretest.ExpectClosed(t, nc)
	// Closing a connection frees its slot.
	a.Conn.Close()
	looptest.Eventually(t, "slot freed", func() bool { return testutil.ToFloat64(c.gw.m.connsActive) == 1 })
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("LIST")
	if v := testutil.ToFloat64(c.gw.m.connsRefused); v != 1 {
		t.Fatalf("refused %v", v)
	}
}

func TestIdleTimeoutKeepsConnection(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.IdleTimeout = 20 * time.Millisecond })
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	time.Sleep(150 * time.Millisecond)
	if got := cl.OK("LIST"); got != "OK count=0 topics=" {
		t.Fatalf("LIST after idle = %q", got)
	}
}

// A Python-SDK client (table B: NEGOTIATE 47) gets its own command ids back.
func TestTableBClientSeesItsIDs(t *testing.T) {
	c := startCluster(t, nil)
	cl := wiretest.NegotiateTable(t, c.addr, wire.TableB, wire.CompressionGzip, wire.CompressionNone)
	id := cl.SendText("FIND_COORDINATOR group=g")
	f := cl.MustRead()
	if want, _ := wire.TableB.ID(wire.CmdFindCoordinator); f.Header.Command != want || f.Header.RequestID != id || f.Header.Status != wire.StatusOK {
		t.Fatalf("reply %+v %q (want command id %d)", f.Header, f.Payload, want)
	}
	// TXN_APPEND_STREAM is 29 in table B (54 in table A); its answers carry
	// the client's id.
	cl.OK("CREATE topic=plain partitions=1")
	id = cl.SendText("TXN_APPEND_STREAM transactional_id=t producerId=p epoch=1 seqNum=1 topic=plain key=k version=1 message=x")
	f = cl.MustRead()
	if f.Header.Command != 29 || f.Header.RequestID != id || f.Header.Status == wire.StatusOK || !strings.Contains(string(f.Payload), "event_sourcing_not_enabled") {
		t.Fatalf("TXN_APPEND_STREAM reply %+v %q", f.Header, f.Payload)
	}
}

// Many concurrent connections are held and released: the active count goes
// back to zero once clients leave.
func TestManyConnectionsHeldAndReleased(t *testing.T) {
	c := startCluster(t, nil)
	const n = 100
	clients := make([]*wiretest.Conn, n)
	for i := range clients {
		clients[i] = wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	}
	for _, cl := range clients {
		cl.OK("LIST")
	}
	if v := testutil.ToFloat64(c.gw.m.connsActive); v != n {
		t.Fatalf("active %v, want %d", v, n)
	}
	for _, cl := range clients {
		cl.Conn.Close()
	}
	looptest.Eventually(t, "connections released", func() bool { return testutil.ToFloat64(c.gw.m.connsActive) == 0 })
}
