package wiretest_test

import (
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveOnce plays a server for one connection in table's numbering: it
// accepts the negotiation, answers LIST with "OK" and anything else with a
// typed error, and closes the connection after EXIT.
func serveOnce(t *testing.T, table *wire.CommandTable) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- answer(lis, table) }()
	t.Cleanup(func() {
		lis.Close()
		if err := <-done; err != nil {
			t.Error("server:", err)
		}
	})
	return lis.Addr().String()
}

func answer(lis net.Listener, table *wire.CommandTable) error {
	nc, err := lis.Accept()
	if err != nil {
		return err
	}
	defer nc.Close()
	fr := wire.NewFrameReader(nc)
	f, err := fr.ReadFrame(&wire.Codec{Table: table, Limits: wire.NegotiationLimits})
	if err != nil {
		return err
	}
	req, err := wire.DecodeNegotiationRequest(f.Payload)
	if err != nil {
		return err
	}
	resp, err := wire.Negotiate(req, wire.AllCompressions)
	if err != nil {
		return err
	}
	neg := wire.Codec{Table: table, Limits: wire.NegotiationLimits}
	out, _ := neg.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationResponse, Command: table.NegotiateID(), Status: wire.StatusOK}, resp.AppendTo(nil))
	codec := wire.Codec{Table: table, Compression: resp.Compression, Limits: wire.PublicLimits}
	for {
		if _, err := nc.Write(out); err != nil {
			return err
		}
		f, err := fr.ReadFrame(&codec)
		if err != nil {
			return err
		}
		h := wire.Header{Kind: wire.KindResponse, Command: f.Header.Command, RequestID: f.Header.RequestID, Status: wire.StatusOK}
		payload := []byte("OK")
		switch cmd, _ := table.ByID(f.Header.Command); cmd {
		case wire.CmdExit:
			return nil
		case wire.CmdList:
		default:
			h.Status = wire.StatusError
			payload, _ = wire.AppendError(nil, errcode.TopicNotFound.New("no such topic", "topic", "x"))
		}
		out, _ = codec.AppendFrame(nil, h, payload)
	}
}

func TestConnNegotiatesSendsAndReads(t *testing.T) {
	for _, tc := range []struct {
		table *wire.CommandTable
		comps []wire.Compression
	}{{wire.TableA, []wire.Compression{wire.CompressionLZ4}}, {wire.TableB, []wire.Compression{wire.CompressionGzip, wire.CompressionNone}}} {
		t.Run(tc.table.Name(), func(t *testing.T) {
			c := wiretest.NegotiateTable(t, serveOnce(t, tc.table), tc.table, tc.comps...)
			if c.Codec.Compression != tc.comps[0] {
				t.Fatalf("negotiated %v", c.Codec.Compression)
			}
			if got := c.OK("LIST"); got != "OK" {
				t.Fatalf("LIST = %q", got)
			}
			c.FailWith("DESCRIBE topic=x", "topic_not_found", "topic", "x")
			if c.LastID != 2 {
				t.Fatalf("LastID = %d", c.LastID)
			}
			c.SendText("EXIT")
			wiretest.ExpectClosed(t, c.Conn)
		})
	}
}
