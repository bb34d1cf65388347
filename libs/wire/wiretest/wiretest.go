// Package wiretest drives a Wire v2 connection frame by frame for tests,
// with libs/wire only: dialing, negotiating in either command table,
// sending requests as frames or in their SDK text form, and reading the
// answers. Nothing of a client library stands between the test and the
// server, so a test sees what the server puts on the wire: answers to
// malformed input, no frame for acks=0, STREAM_CONTROL frames, the command
// ids of table B.
package wiretest

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// ReadTimeout bounds MustRead and the reading of a negotiation answer.
const ReadTimeout = 10 * time.Second

// Conn is a Wire v2 connection driven frame by frame. Its methods fail the
// test on a transport error.
type Conn struct {
	// Conn is the TCP connection.
	Conn net.Conn
	// Codec is the negotiated codec (table, compression, public limits).
	Codec wire.Codec
	// LastID is the request id of the last frame sent; the next one sent
	// carries LastID+1.
	LastID uint64

	t  testing.TB
	fr *wire.FrameReader
}

// NewConn drives nc, which has negotiated codec; fr is the reader that read
// the negotiation answer (it may hold buffered bytes).
func NewConn(t testing.TB, nc net.Conn, fr *wire.FrameReader, codec wire.Codec) *Conn {
	return &Conn{Conn: nc, Codec: codec, t: t, fr: fr}
}

// DialRaw opens a TCP connection to addr, closed when the test ends.
func DialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// NegotiationFrame is a table-A negotiation request for version 2 offering
// comps.
func NegotiationFrame(t testing.TB, comps ...wire.Compression) []byte {
	t.Helper()
	return negotiationFrame(t, wire.TableA, comps)
}

func negotiationFrame(t testing.TB, table *wire.CommandTable, comps []wire.Compression) []byte {
	t.Helper()
	return NegotiationRequestFrame(t, table, wire.NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: comps})
}

// NegotiationRequestFrame is req as a negotiation frame numbered by table,
// for negotiations NegotiationFrame does not offer (other versions, table B).
func NegotiationRequestFrame(t testing.TB, table *wire.CommandTable, req wire.NegotiationRequest) []byte {
	t.Helper()
	p, err := req.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	neg := wire.Codec{Table: table, Limits: wire.NegotiationLimits}
	frame, err := neg.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationRequest, Command: table.NegotiateID()}, p)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// Offer sends a version 2 negotiation request in table's numbering
// offering comps over nc and returns the answer frame, a refusal included.
func Offer(t testing.TB, nc net.Conn, fr *wire.FrameReader, table *wire.CommandTable, comps ...wire.Compression) wire.Frame {
	t.Helper()
	if _, err := nc.Write(negotiationFrame(t, table, comps)); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(ReadTimeout))
	f, err := fr.ReadFrame(&wire.Codec{Table: table, Limits: wire.PublicLimits})
	if err != nil {
		t.Fatal("negotiation answer:", err)
	}
	return f
}

// Negotiate dials addr and negotiates comp in table A; it fails the test
// unless the server accepts.
func Negotiate(t testing.TB, addr string, comp wire.Compression) *Conn {
	t.Helper()
	return NegotiateTable(t, addr, wire.TableA, comp)
}

// NegotiateTable dials addr and negotiates in table's numbering, offering
// comps in preference order (as a table-B Python SDK client does with
// gzip, none); it fails the test unless the server accepts the first.
func NegotiateTable(t testing.TB, addr string, table *wire.CommandTable, comps ...wire.Compression) *Conn {
	t.Helper()
	nc := DialRaw(t, addr)
	fr := wire.NewFrameReader(nc)
	f := Offer(t, nc, fr, table, comps...)
	if f.Header.Kind != wire.KindNegotiationResponse || f.Header.Status != wire.StatusOK || f.Header.Command != table.NegotiateID() {
		e, _ := wire.DecodeError(f.Payload)
		t.Fatalf("negotiation refused: %+v %v", f.Header, e)
	}
	resp, err := wire.DecodeNegotiationResponse(f.Payload)
	if err != nil || resp.Version != 2 || resp.Compression != comps[0] {
		t.Fatalf("negotiation response %+v %v", resp, err)
	}
	return NewConn(t, nc, fr, wire.Codec{Table: table, Compression: resp.Compression, Limits: wire.PublicLimits})
}

// SendFrame sends one request frame with wire id cmdID and returns its
// request id.
func (c *Conn) SendFrame(cmdID uint16, payload []byte) uint64 {
	c.t.Helper()
	c.LastID++
	frame, err := c.Codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: cmdID, RequestID: c.LastID}, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.Conn.Write(frame); err != nil {
		c.t.Fatal(err)
	}
	return c.LastID
}

// Send sends one request frame of cmd (its id in the connection's table)
// and returns its request id.
func (c *Conn) Send(cmd wire.Command, payload []byte) uint64 {
	c.t.Helper()
	id, ok := c.Codec.Table.ID(cmd)
	if !ok {
		c.t.Fatalf("%s has no id in table %s", cmd, c.Codec.Table.Name())
	}
	return c.SendFrame(id, payload)
}

// SendText sends a command in its SDK text form and returns its request id.
func (c *Conn) SendText(text string) uint64 {
	c.t.Helper()
	cmd, req, err := wire.ParseText(text)
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := req.AppendTo(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.Send(cmd, p)
}

// SendBatch sends a PUBLISH batch frame to partition 0 of topic with acks,
// one record per payload, and returns its request id.
func (c *Conn) SendBatch(topic, acks string, payloads ...string) uint64 {
	c.t.Helper()
	b := wire.Batch{BatchHeader: wire.BatchHeader{Topic: topic, Partition: 0, Acks: acks}}
	for _, p := range payloads {
		b.Records = append(b.Records, wire.Record{Topic: topic, Partition: 0, Payload: []byte(p)})
	}
	payload, err := b.AppendTo(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.Send(wire.CmdPublish, payload)
}

// Read reads the next frame within timeout; its payload is the caller's.
func (c *Conn) Read(timeout time.Duration) (wire.Frame, error) {
	c.Conn.SetReadDeadline(time.Now().Add(timeout))
	f, err := c.fr.ReadFrame(&c.Codec)
	if err != nil {
		return f, err
	}
	f.Payload = append([]byte(nil), f.Payload...)
	return f, nil
}

// MustRead reads the next frame (ReadTimeout at most) or fails the test.
func (c *Conn) MustRead() wire.Frame {
	c.t.Helper()
	f, err := c.Read(ReadTimeout)
	if err != nil {
		c.t.Fatal("read frame:", err)
	}
	return f
}

// Do sends a command in its text form and returns the answer frame,
// checking that it echoes the request id.
func (c *Conn) Do(text string) wire.Frame {
	c.t.Helper()
	id := c.SendText(text)
	f := c.MustRead()
	if f.Header.RequestID != id {
		c.t.Fatalf("%s: answer to request %d, want %d", text, f.Header.RequestID, id)
	}
	return f
}

// OK runs a command that must succeed and returns the answer text.
func (c *Conn) OK(text string) string {
	c.t.Helper()
	f := c.Do(text)
	if f.Header.Status != wire.StatusOK {
		e, _ := wire.DecodeError(f.Payload)
		c.t.Fatalf("%s: %v", text, e)
	}
	return string(f.Payload)
}

// Fail runs a command that must fail and returns its typed error.
func (c *Conn) Fail(text string) *errcode.Error {
	c.t.Helper()
	return FrameErr(c.t, c.Do(text))
}

// FailWith runs a command that must fail with code and the given fields
// (key, value, ...) and returns its typed error.
func (c *Conn) FailWith(text, code string, kv ...string) *errcode.Error {
	c.t.Helper()
	e := c.Fail(text)
	if e.Code != code {
		c.t.Fatalf("%s: %v, want code %s", text, e, code)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if e.Field(kv[i]) != kv[i+1] {
			c.t.Fatalf("%s: field %s = %q, want %q (%v)", text, kv[i], e.Field(kv[i]), kv[i+1], e)
		}
	}
	return e
}

// FrameErr decodes the typed error of an ERROR frame, failing the test on
// any other frame.
func FrameErr(t testing.TB, f wire.Frame) *errcode.Error {
	t.Helper()
	if f.Header.Status != wire.StatusError {
		t.Fatalf("expected an ERROR frame, got status %v payload %q", f.Header.Status, f.Payload)
	}
	e, err := wire.DecodeError(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ExpectClosed asserts the server closes nc within 5 s (reading anything it
// still sends first).
func ExpectClosed(t testing.TB, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	for {
		_, err := nc.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection not closed by the server")
		}
		return
	}
}
