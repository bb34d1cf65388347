package server

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// cluster is a gateway in front of fake metad, partitiond and coordinatord.
type cluster struct {
	ca    *pkitest.PKI
	gw    *Role
	meta  *fakeMetad
	part  *fakePartition
	coord *fakeCoordinator
	addr  string // gateway client address
}

func startCluster(t testing.TB, tune func(*Config)) *cluster {
	t.Helper()
	return startClusterTraced(t, tune, nil)
}

// startClusterTraced is startCluster with tracing: the gateway process and
// the fake roles share tr, so spans of every hop land in one recorder.
func startClusterTraced(t testing.TB, tune func(*Config), tr *telemetry.Tracing) *cluster {
	t.Helper()
	ca := pkitest.New(t)
	c := &cluster{ca: ca, meta: newFakeMetad(), part: newFakePartition(), coord: newFakeCoordinator()}
	var tel rpc.Telemetry
	if tr != nil {
		tel = rpc.Telemetry{TracerProvider: tr.Provider, Propagator: tr.Propagator}
	}
	metaAddr := serveFake(t, ca, pki.RoleMetad, "m1", tel, func(s *grpc.Server) { metav1.RegisterMetadataServiceServer(s, c.meta) })
	partAddr := serveFake(t, ca, pki.RolePartitiond, "p1", tel, func(s *grpc.Server) { partitionv1.RegisterPartitionServiceServer(s, c.part) })
	coordAddr := serveFake(t, ca, pki.RoleCoordinatord, "c1", tel, func(s *grpc.Server) { coordinatorv1.RegisterCoordinatorServiceServer(s, c.coord) })
	c.meta.addNode(&metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: partAddr, Live: true})
	c.meta.addNode(&metav1.Node{Id: "c1", Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: coordAddr, Live: true})

	p := node.NewProcess(nil, tr)
	p.HealthAddr = "127.0.0.1:0"
	env, err := p.NewRoleEnv(node.RoleOptions{Role: pki.RoleGateway, NodeID: "g1", TLSFiles: ca.Files(t, pki.RoleGateway, "g1"), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ClientListen = "127.0.0.1:0"
	cfg.MetadAddrs = []string{metaAddr}
	cfg.RequestTimeout = 5 * time.Second
	if tune != nil {
		tune(&cfg)
	}
	role, err := New(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.gw = role
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() { done <- p.Run(ctx, []node.Role{role}, 5*time.Second, func() { close(started) }) }()
	select {
	case <-started:
	case err := <-done:
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway run: %v", err)
		}
	})
	c.addr = c.gw.ClientAddr()
	// Wait until the cache holds the snapshot and our own registration.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := c.gw.meta.Cache().WaitFor(wctx, func(v *metaclient.View) bool {
		_, ok := v.Node("g1")
		return v.Ready() && ok
	}); err != nil {
		t.Fatal("metadata cache never synced:", err)
	}
	return c
}

// client is a minimal Wire v2 client over libs/wire.
type client struct {
	t     testing.TB
	nc    net.Conn
	fr    *wire.FrameReader
	codec wire.Codec
	id    uint64
}

func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// negotiate sends a negotiation request and returns the response frame.
func negotiate(t testing.TB, nc net.Conn, fr *wire.FrameReader, comps ...wire.Compression) wire.Frame {
	t.Helper()
	p, err := wire.NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: comps}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	neg := wire.Codec{Table: wire.TableA, Limits: wire.NegotiationLimits}
	frame, err := neg.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationRequest, Command: wire.TableA.NegotiateID()}, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame(&wire.Codec{Table: wire.TableA, Limits: wire.PublicLimits})
	if err != nil {
		t.Fatal("negotiation response:", err)
	}
	return f
}

func dial(t testing.TB, addr string, comp wire.Compression) *client {
	t.Helper()
	nc := dialRaw(t, addr)
	fr := wire.NewFrameReader(nc)
	f := negotiate(t, nc, fr, comp)
	if f.Header.Kind != wire.KindNegotiationResponse || f.Header.Status != wire.StatusOK {
		t.Fatalf("negotiation answered %+v", f.Header)
	}
	resp, err := wire.DecodeNegotiationResponse(f.Payload)
	if err != nil || resp.Compression != comp || resp.Version != 2 {
		t.Fatalf("negotiation response %+v, %v", resp, err)
	}
	return &client{t: t, nc: nc, fr: fr, codec: wire.Codec{Table: wire.TableA, Compression: comp, Limits: wire.PublicLimits}}
}

// dialTableB negotiates as a Python-SDK client would (table B: NEGOTIATE
// 47), with gzip.
func dialTableB(t testing.TB, addr string) *client {
	t.Helper()
	nc := dialRaw(t, addr)
	fr := wire.NewFrameReader(nc)
	p, _ := wire.NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: []wire.Compression{wire.CompressionGzip, wire.CompressionNone}}.AppendTo(nil)
	neg := wire.Codec{Table: wire.TableB, Limits: wire.NegotiationLimits}
	frame, _ := neg.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationRequest, Command: wire.TableB.NegotiateID()}, p)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame(&wire.Codec{Table: wire.TableB, Limits: wire.PublicLimits})
	if err != nil || f.Header.Command != 47 {
		t.Fatalf("negotiation %+v %v", f.Header, err)
	}
	return &client{t: t, nc: nc, fr: fr, codec: wire.Codec{Table: wire.TableB, Compression: wire.CompressionGzip, Limits: wire.PublicLimits}}
}

// send writes one request and returns its request id.
func (c *client) send(cmd wire.Command, payload []byte) uint64 {
	c.t.Helper()
	c.id++
	id, _ := c.codec.Table.ID(cmd)
	frame, err := c.codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: id, RequestID: c.id}, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(frame); err != nil {
		c.t.Fatal(err)
	}
	return c.id
}

func (c *client) sendText(text string) uint64 {
	c.t.Helper()
	cmd, req, err := wire.ParseText(text)
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := req.AppendTo(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.send(cmd, p)
}

func (c *client) read() wire.Frame {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := c.fr.ReadFrame(&c.codec)
	if err != nil {
		c.t.Fatal("read frame:", err)
	}
	f.Payload = append([]byte(nil), f.Payload...)
	return f
}

// do sends a text command and returns the reply frame, checking that the
// request id is echoed.
func (c *client) do(text string) wire.Frame {
	c.t.Helper()
	id := c.sendText(text)
	f := c.read()
	if f.Header.RequestID != id {
		c.t.Fatalf("%s: reply request id %d, want %d", text, f.Header.RequestID, id)
	}
	return f
}

// ok runs a command that must succeed and returns the reply text.
func (c *client) ok(text string) string {
	c.t.Helper()
	f := c.do(text)
	if f.Header.Status != wire.StatusOK {
		e, _ := wire.DecodeError(f.Payload)
		c.t.Fatalf("%s: %v", text, e)
	}
	return string(f.Payload)
}

// fail runs a command that must fail and returns its typed error.
func (c *client) fail(text string) *errcode.Error {
	c.t.Helper()
	f := c.do(text)
	return frameError(c.t, f)
}

func frameError(t testing.TB, f wire.Frame) *errcode.Error {
	t.Helper()
	if f.Header.Status != wire.StatusError {
		t.Fatalf("expected an error, got %q", f.Payload)
	}
	e, err := wire.DecodeError(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// expectClosed asserts the server closes the connection.
func expectClosed(t testing.TB, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
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

// eventually polls cond for up to 5 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
