package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// serveLinked serves the health server on a TCP listener and registers it
// with links under the same address, as libs/node does.
func serveLinked(t *testing.T, links *Links, src *pki.Source, tel Telemetry) (string, *healthServer) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerOptions{Source: src, Policy: healthPolicy, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	hs := &healthServer{}
	healthpb.RegisterHealthServer(srv, hs)
	addr := tcp.Addr().String()
	if err := links.Register(addr, srv); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(tcp) }()
	t.Cleanup(func() { srv.Stop(); <-done; links.Unregister(addr, srv) })
	return addr, hs
}

// peerNetwork is the network of the connection a call went over.
func peerNetwork(t *testing.T, conn Conn) string {
	t.Helper()
	var p peer.Peer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	return p.Addr.Network()
}

// A process with links still reaches other processes over mTLS TCP, and a
// client without links reaches a linked server over TCP.
func TestLinksFallBackToTCP(t *testing.T) {
	p := pkitest.New(t)
	remote, _ := startServer(t, p.Source(t, pki.RolePartitiond, "p2"), Telemetry{})
	links := NewLinks()
	local, _ := serveLinked(t, links, p.Source(t, pki.RolePartitiond, "p1"), Telemetry{})
	for _, tc := range []struct {
		addr  string
		links *Links
		want  string
	}{{remote, links, "tcp"}, {local, nil, "tcp"}, {local, links, "inprocess"}} {
		conn, err := Dial(tc.addr, ClientOptions{Source: p.Source(t, pki.RoleGateway, "g1"), Links: tc.links})
		if err != nil {
			t.Fatal(err)
		}
		if n := peerNetwork(t, conn); n != tc.want {
			t.Errorf("%s (links %v): network %q, want %q", tc.addr, tc.links != nil, n, tc.want)
		}
		conn.Close()
	}
}

// Links refuses a second server on one address; once unregistered the
// address can be registered again (a role restarted in the same process).
func TestLinksRegister(t *testing.T) {
	p := pkitest.New(t)
	links := NewLinks()
	a, _ := NewServer(ServerOptions{Source: p.Source(t, pki.RolePartitiond, "p1"), Policy: Policy{}})
	b, _ := NewServer(ServerOptions{Source: p.Source(t, pki.RolePartitiond, "p1"), Policy: Policy{}})
	if err := links.Register("a:1", a); err != nil {
		t.Fatal(err)
	}
	if err := links.Register("a:1", b); err == nil {
		t.Fatal("second server on one address")
	}
	links.Unregister("a:1", b) // not b's: no effect
	if links.lookup("a:1") != a {
		t.Fatal("Unregister of another server removed the registered one")
	}
	links.Unregister("a:1", a)
	if err := links.Register("a:1", b); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	b.Stop()
}

func TestTracePropagatesAcrossLink(t *testing.T) {
	p := pkitest.New(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tel := Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}}
	links := NewLinks()
	addr, _ := serveLinked(t, links, p.Source(t, pki.RolePartitiond, "p1"), tel)
	conn, err := Dial(addr, ClientOptions{Source: p.Source(t, pki.RoleGateway, "g1"), Telemetry: tel, Links: links})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, span := tp.Tracer("test").Start(context.Background(), "publish t")
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var server bool
		for _, s := range rec.Ended() {
			if s.SpanKind().String() == "server" && s.SpanContext().TraceID() == span.SpanContext().TraceID() {
				server = true
			}
		}
		if server {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no server span in the client's trace")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The direct path gives the spans otelgrpc gives over gRPC: a client and a
// server span per call with the same names, kinds, attributes and status,
// the server span a child of the client span, for unary calls and streams,
// succeeding or failing.
func TestDirectSpansMatchGRPC(t *testing.T) {
	summary := func(tr transport) []string {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer tp.Shutdown(context.Background())
		tel := Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}}
		ts := &testService{p: pkitest.New(t), links: NewLinks(), release: make(chan struct{}), entered: make(chan string, 16)}
		ts.start(t, tel)
		conn := ts.dialTel(t, tr, pki.RoleGateway, tel)
		ctx, root := tp.Tracer("test").Start(context.Background(), "root")
		_ = ts.unary(ctx, conn, "ok")
		_ = ts.unary(ctx, conn, "fail")
		if s, err := ts.count(ctx, conn, 2); err == nil {
			for {
				if _, err := s.recv(); err != nil {
					break
				}
			}
		}
		root.End()
		conn.Close()
		var spans []sdktrace.ReadOnlySpan
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			spans = rec.Ended()
			if len(spans) == 7 || time.Now().After(deadline) {
				break
			}
		}
		byID := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			byID[s.SpanContext().SpanID().String()] = s
		}
		var out []string
		for _, s := range spans {
			if s.Name() == "root" {
				continue
			}
			if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
				t.Errorf("%s: span %s outside the caller's trace", tr, s.Name())
			}
			parent := "root"
			if ps, ok := byID[s.Parent().SpanID().String()]; ok && ps.Name() != "root" {
				parent = ps.SpanKind().String() + " " + ps.Name()
			}
			attrs := make([]string, 0, len(s.Attributes()))
			for _, a := range s.Attributes() {
				attrs = append(attrs, string(a.Key)+"="+a.Value.Emit())
			}
			sort.Strings(attrs)
			line := fmt.Sprintf("%s %s parent=(%s) status=%s %q attrs=%v", s.SpanKind(), s.Name(), parent,
				s.Status().Code, s.Status().Description, attrs)
			_, port, _ := net.SplitHostPort(ts.addr)
			out = append(out, strings.ReplaceAll(line, "server.port="+port, "server.port=PORT"))
		}
		sort.Strings(out)
		return out
	}
	want := summary(viaGRPC)
	got := summary(viaDirect)
	if len(want) != 6 {
		t.Fatalf("gRPC gave %d spans, want 6: %v", len(want), want)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("spans differ\ngRPC:\n%s\ndirect:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	t.Logf("spans:\n%s", strings.Join(got, "\n"))
	// The server span's parent is the client span.
	for _, s := range got {
		if strings.HasPrefix(s, "server ") && !strings.Contains(s, "parent=(client ") {
			t.Errorf("server span not a child of a client span: %s", s)
		}
	}
}

// transport is how a test client reaches the test service.
type transport string

const (
	viaGRPC   transport = "grpc"
	viaDirect transport = "direct"
)

var transports = []transport{viaGRPC, viaDirect}

// The test service: one of each stream kind the protos use (unary,
// server-streaming, bidi), written against grpc.ServiceDesc directly with
// well-known message types, so the same handlers serve both transports.
const testSvc = "strata.test.v1.Test"

type testService struct {
	p     *pkitest.PKI
	links *Links
	addr  string
	srv   *Server

	mu      sync.Mutex
	seen    []string // what handlers observed, in order
	kept    []proto.Message
	release chan struct{} // "hold" handlers wait for it
	entered chan string   // handlers announce themselves here (buffered)
}

func (ts *testService) note(format string, args ...any) {
	ts.mu.Lock()
	ts.seen = append(ts.seen, fmt.Sprintf(format, args...))
	ts.mu.Unlock()
}

func (ts *testService) takeSeen() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := ts.seen
	ts.seen = nil
	return out
}

type clientValueKey struct{}

func (ts *testService) handleUnary(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	id, _ := PeerIdentity(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	ts.note("unary %s from %s principal=%v leaked=%v", in.GetValue(), id, md.Get("strata-principal"), ctx.Value(clientValueKey{}) != nil)
	switch in.GetValue() {
	case "fail":
		return nil, errcode.TopicNotFound.New("no such topic", "topic", "t1")
	case "panic":
		panic("boom")
	case "wait":
		ts.entered <- "wait"
		<-ctx.Done()
		// Over gRPC the handler sees its own deadline or the caller's
		// cancellation, whichever comes first: both are an end.
		ts.note("server ctx ended: %v", ctx.Err() != nil)
		return nil, ctx.Err()
	case "nil":
		return nil, nil
	case "trace":
		sc := trace.SpanContextFromContext(ctx)
		ts.note("trace %v %s remote=%v baggage=%q", sc.IsValid(), sc.TraceID(), sc.IsRemote(), baggage.FromContext(ctx).Member("k").Value())
	case "hold":
		ts.entered <- "hold"
		select {
		case <-ts.release:
			return wrapperspb.String("released"), nil
		case <-ctx.Done():
			ts.note("hold ctx ended: %v", ctx.Err() != nil)
			return nil, ctx.Err()
		}
	}
	return wrapperspb.String("re " + in.GetValue()), nil
}

// handleCount (server-streaming) sends n numbered messages, then ends as
// the request says: "count N", "count N fail", "count N hold" (waits for
// release or its context after the messages).
func (ts *testService) handleCount(in *wrapperspb.StringValue, s grpc.ServerStream) error {
	var n int
	var how string
	fmt.Sscanf(in.GetValue(), "count %d %s", &n, &how)
	for i := range n {
		if err := s.SendMsg(wrapperspb.String(fmt.Sprint(i))); err != nil {
			ts.note("count send: %v", errcode.From(err).Code)
			return err
		}
	}
	switch how {
	case "fail":
		return errcode.NotLeader.New("moved", "leader", "p2")
	case "panic":
		panic("stream boom")
	case "hold":
		ts.entered <- "hold"
		select {
		case <-ts.release:
		case <-s.Context().Done():
			ts.note("count ctx ended: %v", s.Context().Err() != nil)
			return s.Context().Err()
		}
	}
	return nil
}

// handleChat (bidi) answers every message with "re <msg>"; "end" makes it
// return an error, "quit" return nil at once; after the client's
// half-close it sends "bye" and returns.
func (ts *testService) handleChat(s grpc.ServerStream) error {
	for {
		in := new(wrapperspb.StringValue)
		err := s.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			ts.note("chat: half-closed")
			return s.SendMsg(wrapperspb.String("bye"))
		}
		if err != nil {
			ts.note("chat recv: %s ctx=%v", errcode.From(err).Code, s.Context().Err())
			return err
		}
		switch in.GetValue() {
		case "end":
			return errcode.InvalidParameter.New("bad message", "param", "x")
		case "quit":
			return nil
		case "hold":
			ts.entered <- "hold"
			<-s.Context().Done()
			ts.note("chat ctx: %v", s.Context().Err())
			return s.Context().Err()
		}
		if err := s.SendMsg(wrapperspb.String("re " + in.GetValue())); err != nil {
			return err
		}
	}
}

// handleKeep (unary) keeps its request and answers with a message it
// keeps too: the ownership tests check that neither aliases the caller's.
func (ts *testService) handleKeep(ctx context.Context, in *partitionv1.AppendRequest) (*partitionv1.AppendRequest, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.kept = append(ts.kept, in)
	return in, nil
}

// handleFetch answers a FetchResponse whose records the server does not
// keep (partitiond's contract): the direct path hands them over.
func (ts *testService) handleFetch(ctx context.Context, in *wrapperspb.StringValue) (*partitionv1.FetchResponse, error) {
	r := &partitionv1.FetchResponse{Records: []byte(in.GetValue()), RecordCount: 1, NextOffset: 7}
	ts.mu.Lock()
	ts.kept = append(ts.kept, r)
	ts.mu.Unlock()
	return r, nil
}

// handleSink (bidi) keeps every message it receives and answers once the
// client half-closed.
func (ts *testService) handleSink(s grpc.ServerStream) error {
	for {
		in := new(partitionv1.AppendRequest)
		if err := s.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return s.SendMsg(wrapperspb.String("done"))
			}
			return err
		}
		ts.mu.Lock()
		ts.kept = append(ts.kept, in)
		ts.mu.Unlock()
	}
}

// handleProduceSink is handleSink for ProduceRequests (the produce stream's
// message), noting whether the handler's messages are its own.
func (ts *testService) handleProduceSink(s grpc.ServerStream) error {
	ts.note("owned=%v", ReceivesOwned(s.Context()))
	for {
		in := new(partitionv1.ProduceRequest)
		if err := s.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return s.SendMsg(wrapperspb.String("done"))
			}
			return err
		}
		ts.mu.Lock()
		ts.kept = append(ts.kept, in)
		ts.mu.Unlock()
	}
}

func unaryHandler[Req any, Resp any](f func(context.Context, *Req) (*Resp, error), full string) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(Req)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) { return f(ctx, req.(*Req)) }
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
	}
}

func (ts *testService) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: testSvc,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Echo", Handler: unaryHandler(ts.handleUnary, "/"+testSvc+"/Echo")},
			{MethodName: "Keep", Handler: unaryHandler(ts.handleKeep, "/"+testSvc+"/Keep")},
			{MethodName: "Fetch", Handler: unaryHandler(ts.handleFetch, "/"+testSvc+"/Fetch")},
		},
		Streams: []grpc.StreamDesc{
			{StreamName: "Count", ServerStreams: true, Handler: func(_ any, s grpc.ServerStream) error {
				in := new(wrapperspb.StringValue)
				if err := s.RecvMsg(in); err != nil {
					return err
				}
				return ts.handleCount(in, s)
			}},
			{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(_ any, s grpc.ServerStream) error { return ts.handleChat(s) }},
			{StreamName: "Sink", ServerStreams: true, ClientStreams: true, Handler: func(_ any, s grpc.ServerStream) error { return ts.handleSink(s) }},
			{StreamName: "ProduceSink", ServerStreams: true, ClientStreams: true, Handler: func(_ any, s grpc.ServerStream) error { return ts.handleProduceSink(s) }},
		},
	}
}

var testPolicy = Policy{
	"/" + testSvc + "/Echo":  {pki.RoleGateway},
	"/" + testSvc + "/Keep":  {pki.RoleGateway},
	"/" + testSvc + "/Fetch": {pki.RoleGateway},
	"/" + testSvc + "/Count": {pki.RoleGateway},
	"/" + testSvc + "/Chat":  {pki.RoleGateway},
	"/" + testSvc + "/Sink":  {pki.RoleGateway},

	"/" + testSvc + "/ProduceSink": {pki.RoleGateway},
}

// newTestService serves the test service over TCP and registered with a
// Links, as libs/node serves a role of the all-in-one.
func newTestService(t *testing.T) *testService {
	t.Helper()
	ts := &testService{p: pkitest.New(t), links: NewLinks(), release: make(chan struct{}), entered: make(chan string, 16)}
	ts.start(t, Telemetry{})
	return ts
}

func (ts *testService) start(t testing.TB, tel Telemetry) {
	t.Helper()
	srv, err := NewServer(ServerOptions{Source: ts.p.Source(t, pki.RolePartitiond, "p1"), Policy: testPolicy, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterService(ts.desc(), ts)
	if err := CheckPolicy(srv, testPolicy); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr, ts.srv = lis.Addr().String(), srv
	if err := ts.links.Register(ts.addr, srv); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
}

func (ts *testService) dial(t testing.TB, tr transport, as pki.Role) Conn {
	return ts.dialTel(t, tr, as, Telemetry{})
}

func (ts *testService) dialTel(t testing.TB, tr transport, as pki.Role, tel Telemetry) Conn {
	t.Helper()
	o := ClientOptions{Source: ts.p.Source(t, as, string(as)+"1"), ServerRoles: []pki.Role{pki.RolePartitiond}, Telemetry: tel}
	if tr == viaDirect {
		o.Links = ts.links
	}
	conn, err := Dial(ts.addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (ts *testService) unary(ctx context.Context, conn Conn, v string) error {
	return conn.Invoke(ctx, "/"+testSvc+"/Echo", wrapperspb.String(v), new(wrapperspb.StringValue))
}

type testStream struct{ grpc.ClientStream }

func (s testStream) recv() (string, error) {
	m := new(wrapperspb.StringValue)
	err := s.RecvMsg(m)
	return m.GetValue(), err
}

func (s testStream) send(v string) error { return s.SendMsg(wrapperspb.String(v)) }

func (ts *testService) count(ctx context.Context, conn Conn, n int, how ...string) (testStream, error) {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/"+testSvc+"/Count")
	if err != nil {
		return testStream{}, err
	}
	if err := s.SendMsg(wrapperspb.String(strings.TrimSpace(fmt.Sprintf("count %d %s", n, strings.Join(how, " "))))); err != nil {
		return testStream{}, err
	}
	return testStream{s}, s.CloseSend()
}

func (ts *testService) chat(ctx context.Context, conn Conn) (testStream, error) {
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+testSvc+"/Chat")
	return testStream{s}, err
}

// outcome renders what a caller sees: a value or the typed error whole.
func outcome(v string, err error) string {
	if err == nil {
		return "ok " + v
	}
	if errors.Is(err, io.EOF) {
		return "EOF"
	}
	e, ok := errcode.As(err)
	if !ok {
		return fmt.Sprintf("untyped %T %v", err, err)
	}
	return e.Error()
}

// drain reads a stream to its end: the messages and the end, as seen.
func drain(s testStream) []string {
	var out []string
	for {
		v, err := s.recv()
		out = append(out, outcome(v, err))
		if err != nil {
			return out
		}
	}
}

// TestDirectMatrix runs the same scenarios through gRPC and through the
// direct path and requires identical outcomes: what the caller sees (values,
// typed errors with code, class, fields and message) and what the handler
// observed.
func TestDirectMatrix(t *testing.T) {
	ts := newTestService(t)
	ctx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	scenarios := []struct {
		name string
		run  func(t *testing.T, tr transport) []string
	}{
		{"unary success, identity, metadata, no client values", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			c = context.WithValue(metadata.AppendToOutgoingContext(c, "strata-principal", "ops"), clientValueKey{}, 1)
			out := new(wrapperspb.StringValue)
			err := ts.dial(t, tr, pki.RoleGateway).Invoke(c, "/"+testSvc+"/Echo", wrapperspb.String("hi"), out)
			return []string{outcome(out.GetValue(), err)}
		}},
		{"unary typed error", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			return []string{outcome("", ts.unary(c, ts.dial(t, tr, pki.RoleGateway), "fail"))}
		}},
		{"unary policy denial", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			return []string{outcome("", ts.unary(c, ts.dial(t, tr, pki.RoleCoordinatord), "hi"))}
		}},
		{"unary panic", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			conn := ts.dial(t, tr, pki.RoleGateway)
			return []string{outcome("", ts.unary(c, conn, "panic")), outcome("", ts.unary(c, conn, "after"))}
		}},
		{"unary nil answer", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			return []string{outcome("", ts.unary(c, ts.dial(t, tr, pki.RoleGateway), "nil"))}
		}},
		{"unary unknown method", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			err := ts.dial(t, tr, pki.RoleGateway).Invoke(c, "/"+testSvc+"/Nope", wrapperspb.String(""), new(wrapperspb.StringValue))
			return []string{outcome("", err)}
		}},
		{"unary deadline", func(t *testing.T, tr transport) []string {
			c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			// gRPC's message names whichever end noticed the deadline
			// first; the code is what callers act on.
			out := []string{codeOf(ts.unary(c, ts.dial(t, tr, pki.RoleGateway), "wait"))}
			<-ts.entered
			return append(out, ts.waitNotes(2)...)
		}},
		{"unary cancel", func(t *testing.T, tr transport) []string {
			c, cancel := context.WithCancel(context.Background())
			go func() { <-ts.entered; cancel() }()
			out := []string{outcome("", ts.unary(c, ts.dial(t, tr, pki.RoleGateway), "wait"))}
			return append(out, ts.waitNotes(2)...)
		}},
		{"server stream to the end", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.count(c, ts.dial(t, tr, pki.RoleGateway), 3)
			if err != nil {
				return []string{outcome("", err)}
			}
			return append(drain(s), drain(s)...) // after the end, the end again
		}},
		{"server stream error after messages", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.count(c, ts.dial(t, tr, pki.RoleGateway), 2, "fail")
			if err != nil {
				return []string{outcome("", err)}
			}
			return drain(s)
		}},
		{"server stream panic", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.count(c, ts.dial(t, tr, pki.RoleGateway), 1, "panic")
			if err != nil {
				return []string{outcome("", err)}
			}
			return drain(s)
		}},
		{"stream policy denial", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.count(c, ts.dial(t, tr, pki.RoleMetad), 2)
			if err != nil {
				return []string{outcome("", err)}
			}
			return drain(s)
		}},
		{"stream deadline", func(t *testing.T, tr transport) []string {
			c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			s, err := ts.count(c, ts.dial(t, tr, pki.RoleGateway), 1, "hold")
			if err != nil {
				return []string{outcome("", err)}
			}
			<-ts.entered
			// gRPC's message names whichever end noticed the deadline
			// first; the code is what callers act on.
			var out []string
			for _, o := range drain(s) {
				out = append(out, strings.Split(o, " retryable=")[0])
			}
			for _, n := range ts.waitNotes(1) {
				out = append(out, "server "+n)
			}
			return out
		}},
		{"bidi with half-close", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.chat(c, ts.dial(t, tr, pki.RoleGateway))
			if err != nil {
				return []string{outcome("", err)}
			}
			var out []string
			for _, m := range []string{"a", "b", "c"} {
				if err := s.send(m); err != nil {
					out = append(out, "send "+outcome("", err))
				}
				out = append(out, outcome(s.recv()))
			}
			if err := s.CloseSend(); err != nil {
				out = append(out, "closesend "+outcome("", err))
			}
			return append(out, drain(s)...)
		}},
		{"bidi handler error, then sends", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.chat(c, ts.dial(t, tr, pki.RoleGateway))
			if err != nil {
				return []string{outcome("", err)}
			}
			out := []string{outcome("", s.send("x")), outcome(s.recv()), outcome("", s.send("end"))}
			out = append(out, drain(s)...)
			// The handler is gone: a send ends in io.EOF (gRPC's rule).
			return append(out, "send after end: "+outcome("", s.send("late")))
		}},
		{"bidi handler returns early", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.chat(c, ts.dial(t, tr, pki.RoleGateway))
			if err != nil {
				return []string{outcome("", err)}
			}
			out := []string{outcome("", s.send("quit"))}
			return append(out, drain(s)...)
		}},
		{"bidi client cancel", func(t *testing.T, tr transport) []string {
			c, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := ts.chat(c, ts.dial(t, tr, pki.RoleGateway))
			if err != nil {
				return []string{outcome("", err)}
			}
			out := []string{outcome("", s.send("hold"))}
			<-ts.entered
			cancel()
			out = append(out, drain(s)...)
			for _, n := range ts.waitNotes(1) {
				out = append(out, "server "+n)
			}
			return out
		}},
		{"stream unknown method", func(t *testing.T, tr transport) []string {
			c, cancel := ctx()
			defer cancel()
			s, err := ts.dial(t, tr, pki.RoleGateway).NewStream(c, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+testSvc+"/Nope")
			if err != nil {
				return []string{"open: " + outcome("", err)}
			}
			// Whether this send beats gRPC's answer is a race there (nil
			// or io.EOF); the end is what counts.
			_ = s.SendMsg(wrapperspb.String("x"))
			return drain(testStream{s})
		}},
		{"stream on a cancelled context", func(t *testing.T, tr transport) []string {
			c, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := ts.chat(c, ts.dial(t, tr, pki.RoleGateway))
			return []string{outcome("", err)}
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var results [2][]string
			for i, tr := range transports {
				ts.takeSeen()
				for len(ts.entered) > 0 {
					<-ts.entered
				}
				got := sc.run(t, tr)
				results[i] = append(got, ts.waitNotes(0)...)
			}
			want, got := strings.Join(results[0], "\n"), strings.Join(results[1], "\n")
			if want != got {
				t.Fatalf("outcomes differ\ngRPC:\n%s\ndirect:\n%s", want, got)
			}
			t.Logf("both:\n%s", got)
		})
	}
}

// waitNotes returns the handlers' notes once there are at least n (bounded
// wait: a server side may finish after its caller returned).
func (ts *testService) waitNotes(n int) []string {
	var out []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		out = append(out, ts.takeSeen()...)
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
	}
}

// codeOf is the code and class of a typed error: what callers route on
// (the messages of transport failures name the transport).
func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, io.EOF) {
		return "EOF"
	}
	e := errcode.From(err)
	return e.Code + " " + e.Class.String()
}

// A server that stops (Stop) ends its streams and its unary calls in
// flight: callers get unavailable (router_not_available), as when a gRPC
// connection closes, handlers a cancelled context; new calls fail the same
// way.
func TestDirectMatrixServerStop(t *testing.T) {
	var results [2][]string
	for i, tr := range transports {
		ts := newTestService(t)
		conn := ts.dial(t, tr, pki.RoleGateway)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := ts.chat(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{codeOf(s.send("a"))}
		v, err := s.recv()
		out = append(out, outcome(v, err))
		unary := make(chan error, 1)
		go func() { unary <- ts.unary(ctx, conn, "hold") }()
		<-ts.entered
		ts.srv.Stop()
		_, err = s.recv()
		out = append(out, "stream after stop: "+codeOf(err))
		out = append(out, "unary in flight: "+codeOf(<-unary))
		out = append(out, "new unary: "+codeOf(ts.unary(ctx, conn, "x")))
		_, err = ts.chat(ctx, conn)
		if err == nil {
			_, err = testStream{}.recvOr(ts, ctx, conn)
		}
		out = append(out, "new stream: "+codeOf(err))
		notes := ts.waitNotes(3) // two handlers: in either order
		sort.Strings(notes)
		out = append(out, notes...)
		cancel()
		results[i] = out
	}
	if a, b := strings.Join(results[0], "\n"), strings.Join(results[1], "\n"); a != b {
		t.Fatalf("outcomes differ\ngRPC:\n%s\ndirect:\n%s", a, b)
	}
	t.Logf("both:\n%s", strings.Join(results[1], "\n"))
}

// recvOr opens a chat and reads from it: a stream to a stopped server may
// open (gRPC opens streams lazily) and fail on its first read.
func (testStream) recvOr(ts *testService, ctx context.Context, conn Conn) (string, error) {
	s, err := ts.chat(ctx, conn)
	if err != nil {
		return "", err
	}
	return s.recv()
}

// GracefulStop refuses new calls and lets the calls in flight finish.
func TestDirectMatrixGracefulStop(t *testing.T) {
	var results [2][]string
	for i, tr := range transports {
		ts := newTestService(t)
		conn := ts.dial(t, tr, pki.RoleGateway)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		unary := make(chan error, 1)
		go func() { unary <- ts.unary(ctx, conn, "hold") }()
		<-ts.entered
		stopped := make(chan struct{})
		go func() { ts.srv.GracefulStop(); close(stopped) }()
		// New calls fail once the stop took effect (bounded wait).
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if err = ts.unary(ctx, conn, "x"); err != nil {
				break
			}
		}
		out := []string{"new unary while draining: " + codeOf(err)}
		close(ts.release)
		out = append(out, "unary in flight: "+codeOf(<-unary))
		<-stopped
		out = append(out, "stopped")
		cancel()
		results[i] = out
	}
	if a, b := strings.Join(results[0], "\n"), strings.Join(results[1], "\n"); a != b {
		t.Fatalf("outcomes differ\ngRPC:\n%s\ndirect:\n%s", a, b)
	}
	t.Logf("both:\n%s", strings.Join(results[1], "\n"))
}

// A caller that dials a role before its server serves waits for it (as a
// gRPC call waits for its connection), within its deadline.
func TestDirectWaitsForServe(t *testing.T) {
	ts := &testService{p: pkitest.New(t), links: NewLinks(), release: make(chan struct{}), entered: make(chan string, 16)}
	srv, err := NewServer(ServerOptions{Source: ts.p.Source(t, pki.RolePartitiond, "p1"), Policy: testPolicy})
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterService(ts.desc(), ts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr, ts.srv = lis.Addr().String(), srv
	if err := ts.links.Register(ts.addr, srv); err != nil {
		t.Fatal(err)
	}
	conn := ts.dial(t, viaDirect, pki.RoleGateway)
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := ts.unary(short, conn, "x"); !errors.Is(err, errcode.RequestTimeout) {
		t.Fatalf("call before Serve, past its deadline: %v", err)
	}
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res <- ts.unary(ctx, conn, "x")
	}()
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	if err := <-res; err != nil {
		t.Fatalf("call waiting for Serve: %v", err)
	}
	srv.Stop()
	<-done
}

// A message handed across never aliases memory its sender goes on using,
// in either direction, and the receiver's changes never reach the sender.
func TestDirectOwnership(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			ts := newTestService(t)
			conn := ts.dial(t, tr, pki.RoleGateway)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			orig := []byte("records-0123456789")

			// Unary: the caller reuses its buffer once the call returned
			// (the gateway's frame buffer), the handler keeps the request
			// and answers with it.
			buf := append([]byte(nil), orig...)
			reply := new(partitionv1.AppendRequest)
			if err := conn.Invoke(ctx, "/"+testSvc+"/Keep", &partitionv1.AppendRequest{Topic: "t", Records: buf}, reply); err != nil {
				t.Fatal(err)
			}
			kept := ts.kept[0].(*partitionv1.AppendRequest)
			for i := range buf {
				buf[i] = 'X'
			}
			if !bytes.Equal(kept.Records, orig) {
				t.Fatalf("the handler's request changed with the caller's buffer: %q", kept.Records)
			}
			kept.Records[0] = 'Y' // partitiond writes offsets into stored records
			if !bytes.Equal(reply.Records, orig) {
				t.Fatalf("the answer changed with the handler's state: %q", reply.Records)
			}
			reply.Records[1] = 'Z'
			if kept.Records[1] != orig[1] {
				t.Fatal("the caller's change to its answer reached the handler's state")
			}

			// Stream: the sender rewrites its buffer right after each Send,
			// before the handler may have received it (acks=0 sends do not
			// wait for anything).
			s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+testSvc+"/Sink")
			if err != nil {
				t.Fatal(err)
			}
			frame := make([]byte, 64)
			for i := range 20 {
				for j := range frame {
					frame[j] = byte(i)
				}
				if err := s.SendMsg(&partitionv1.AppendRequest{Partition: int32(i), Records: frame}); err != nil {
					t.Fatal(err)
				}
				for j := range frame {
					frame[j] = 0xFF
				}
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if v, err := (testStream{s}).recv(); v != "done" || err != nil {
				t.Fatalf("sink: %q %v", v, err)
			}
			ts.mu.Lock()
			defer ts.mu.Unlock()
			for _, m := range ts.kept[1:] {
				r := m.(*partitionv1.AppendRequest)
				if !bytes.Equal(r.Records, bytes.Repeat([]byte{byte(r.Partition)}, 64)) {
					t.Fatalf("message %d received as %v", r.Partition, r.Records[:8])
				}
			}
			if len(ts.kept) != 21 {
				t.Fatalf("sink kept %d messages, want 20", len(ts.kept)-1)
			}
		})
	}
}

// A large ProduceRequest crosses a direct stream as a deep copy whose
// record set is a transport pool buffer (cloneSent), which the handler owns
// (ReceivesOwned) and may give back with RecycleRecords; over gRPC the
// handler's message may alias its decode buffer. Either way the sender
// rewrites its buffer right after each Send and every field arrives intact.
func TestDirectProduceRecordsPooled(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			ts := newTestService(t)
			conn := ts.dial(t, tr, pki.RoleGateway)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+testSvc+"/ProduceSink")
			if err != nil {
				t.Fatal(err)
			}
			frame := make([]byte, aliasMin+100)
			want := func(i int) *partitionv1.ProduceRequest {
				return &partitionv1.ProduceRequest{CorrelationId: uint64(i), Append: &partitionv1.AppendRequest{
					Topic: "t", Partition: int32(i), LifecycleEpoch: 3, Acks: -1, RecordCount: uint32(i), ProducerId: "p",
					ProducerEpoch: -2, BaseSequence: 4, LastSequence: 5, Idempotent: true,
					Records: bytes.Repeat([]byte{byte(i)}, len(frame)-i)}}
			}
			const n = 8
			for i := range n {
				m := want(i)
				copy(frame, m.Append.Records)
				m.Append.Records = frame[:len(m.Append.Records)]
				if err := s.SendMsg(m); err != nil {
					t.Fatal(err)
				}
				for j := range frame {
					frame[j] = 0xFF
				}
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if v, err := (testStream{s}).recv(); v != "done" || err != nil {
				t.Fatalf("sink: %q %v", v, err)
			}
			ts.mu.Lock()
			defer ts.mu.Unlock()
			if len(ts.kept) != n {
				t.Fatalf("sink kept %d messages, want %d", len(ts.kept), n)
			}
			if got, w := ts.seen[0], fmt.Sprintf("owned=%v", tr == viaDirect); got != w {
				t.Fatalf("handler saw %s, want %s", got, w)
			}
			for i, m := range ts.kept {
				r := m.(*partitionv1.ProduceRequest)
				if !proto.Equal(r, want(i)) {
					t.Fatalf("message %d received as %v", i, r)
				}
				if c := cap(r.Append.Records); tr == viaDirect && c&(c-1) != 0 {
					t.Fatalf("message %d: records of capacity %d, not a pool buffer", i, c)
				}
			}
			if tr == viaDirect {
				RecycleRecords(ts.kept[0].(*partitionv1.ProduceRequest).Append.Records) // the handler's to give back
			}
		})
	}
}

// A FetchResponse is handed over on the direct path: the caller's answer
// holds the server's record buffer itself, which is safe because a fetch
// handler never keeps it (handOver's proof); over gRPC it is a copy.
func TestDirectFetchHandOver(t *testing.T) {
	for _, tr := range transports {
		ts := newTestService(t)
		conn := ts.dial(t, tr, pki.RoleGateway)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		reply := new(partitionv1.FetchResponse)
		if err := conn.Invoke(ctx, "/"+testSvc+"/Fetch", wrapperspb.String("some records"), reply); err != nil {
			t.Fatal(err)
		}
		cancel()
		sent := ts.kept[0].(*partitionv1.FetchResponse)
		if string(reply.Records) != "some records" || reply.GetRecordCount() != 1 || reply.GetNextOffset() != 7 {
			t.Fatalf("%s: answer %v", tr, reply)
		}
		shared := &reply.Records[0] == &sent.Records[0]
		if shared != (tr == viaDirect) {
			t.Fatalf("%s: records shared with the handler's answer: %v", tr, shared)
		}
	}
}

// Each direction of a stream holds at most queueMaxMsgs messages and
// queueMaxBytes bytes (one larger message when empty): a sender that runs
// ahead waits for its receiver.
func TestQueueBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		n        int
		maxAhead int
	}{
		{"small messages", 10, 1000, queueMaxMsgs},
		{"1 MiB messages", 1 << 20, 40, queueMaxBytes / (1 << 20)},
		{"messages above the byte budget", 2 * queueMaxBytes, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue()
			var mu sync.Mutex
			pushed := 0
			go func() {
				for i := range tc.n {
					if err := q.push(wrapperspb.Int64(int64(i)), tc.size); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					pushed++
					mu.Unlock()
				}
				q.close(nil)
			}()
			popped, most := 0, 0
			for {
				m, err := q.pop()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := m.(*wrapperspb.Int64Value).GetValue(); got != int64(popped) {
					t.Fatalf("message %d arrived as %d", popped, got)
				}
				// Every push that completed was admitted while fewer than
				// maxAhead messages were waiting (or none), so the pushes
				// are at most maxAhead ahead of the pops, this one included.
				mu.Lock()
				ahead := pushed - (popped + 1)
				mu.Unlock()
				if ahead > tc.maxAhead {
					t.Fatalf("%d messages pushed past %d popped: bound %d", ahead, popped, tc.maxAhead)
				}
				most = max(most, ahead)
				popped++
				if popped%7 == 0 {
					time.Sleep(time.Millisecond) // let the sender run ahead
				}
			}
			if popped != tc.n {
				t.Fatalf("popped %d of %d", popped, tc.n)
			}
			t.Logf("sender ran at most %d ahead (bound %d)", most, tc.maxAhead)
		})
	}
}

// A server stream whose client stops reading blocks on the full queue and
// ends when the client cancels (goleak checks that nothing is left).
func TestDirectBlockedSenderEndsOnCancel(t *testing.T) {
	ts := newTestService(t)
	conn := ts.dial(t, viaDirect, pki.RoleGateway)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := ts.count(ctx, conn, 10*queueMaxMsgs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The handler's blocked SendMsg fails; the handler returns.
	if notes := ts.waitNotes(1); len(notes) != 1 || !strings.HasPrefix(notes[0], "count send: ") {
		t.Fatalf("handler notes %v", notes)
	}
}

// BenchmarkUnary is one unary call with a 1 KiB request through each
// transport (ns/op and allocations per call; compare CPU with the time's
// user+sys, since gRPC's work is spread over its goroutines).
func BenchmarkUnary(b *testing.B) {
	for _, tr := range transports {
		b.Run(string(tr), func(b *testing.B) {
			ts := &testService{p: pkitest.New(b), links: NewLinks(), release: make(chan struct{}), entered: make(chan string, 16)}
			ts.start(b, Telemetry{})
			conn := ts.dial(b, tr, pki.RoleGateway)
			req := &partitionv1.AppendRequest{Topic: "t", Records: make([]byte, 1024)}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ts.mu.Lock()
				ts.kept = ts.kept[:0]
				ts.mu.Unlock()
				if err := conn.Invoke(ctx, "/"+testSvc+"/Keep", req, new(partitionv1.AppendRequest)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A connection follows the address to a new server when the one it was
// bound to stopped and another registered there (a role restarted in the
// same process); until then calls fail as unavailable.
func TestDirectRebindsAfterRestart(t *testing.T) {
	ts := newTestService(t)
	conn := ts.dial(t, viaDirect, pki.RoleGateway)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.unary(ctx, conn, "one"); err != nil {
		t.Fatal(err)
	}
	ts.srv.Stop()
	if err := ts.unary(ctx, conn, "two"); !errors.Is(err, errcode.RouterNotAvailable) {
		t.Fatalf("call to a stopped server: %v", err)
	}
	ts.links.Unregister(ts.addr, ts.srv)
	srv, err := NewServer(ServerOptions{Source: ts.p.Source(t, pki.RolePartitiond, "p2"), Policy: testPolicy})
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterService(ts.desc(), ts)
	if err := ts.links.Register(ts.addr, srv); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()
	var p peer.Peer
	if err := conn.Invoke(ctx, "/"+testSvc+"/Echo", wrapperspb.String("three"), new(wrapperspb.StringValue), grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	if id, err := pki.PeerIdentity(p.AuthInfo.(credentials.TLSInfo).State); err != nil || id.NodeID != "p2" {
		t.Fatalf("answered by %v (%v), want the new server p2", id, err)
	}
}

// With tracing off (OpenTelemetry's no-op provider, telemetry.Disabled) the
// direct path skips otelgrpc for calls that carry nothing to propagate;
// what the handler sees stays what gRPC gives it: no trace context, or the
// caller's trace context and baggage carried on.
func TestDirectQuietTracingPropagates(t *testing.T) {
	tel := Telemetry{TracerProvider: tracenoop.NewTracerProvider(),
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
	traceID, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	spanID, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true})
	member, _ := baggage.NewMember("k", "v")
	bag, _ := baggage.New(member)
	var results [2][]string
	for i, tr := range transports {
		ts := &testService{p: pkitest.New(t), links: NewLinks(), release: make(chan struct{}), entered: make(chan string, 16)}
		ts.start(t, tel)
		conn := ts.dialTel(t, tr, pki.RoleGateway, tel)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, c := range []context.Context{ctx, trace.ContextWithRemoteSpanContext(ctx, remote), baggage.ContextWithBaggage(ctx, bag)} {
			if err := ts.unary(c, conn, "trace"); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		results[i] = ts.waitNotes(6)
	}
	if a, b := strings.Join(results[0], "\n"), strings.Join(results[1], "\n"); a != b {
		t.Fatalf("outcomes differ\ngRPC:\n%s\ndirect:\n%s", a, b)
	}
	if !strings.Contains(strings.Join(results[1], "\n"), traceID.String()) {
		t.Fatalf("the caller's trace context did not reach the handler: %v", results[1])
	}
	t.Logf("both:\n%s", strings.Join(results[1], "\n"))
}
