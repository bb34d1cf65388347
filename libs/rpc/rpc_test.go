package rpc

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// healthServer answers Check with a typed error for service "fail" and
// records the caller identity.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	lastPeer pki.Identity
}

func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	id, _ := PeerIdentity(ctx)
	h.lastPeer = id
	switch req.Service {
	case "fail":
		return nil, errcode.TopicNotFound.New("no such topic", "topic", "t1")
	case "panic":
		panic("boom")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

var healthPolicy = Policy{
	"/grpc.health.v1.Health/Check": {pki.RoleGateway},
	"/grpc.health.v1.Health/Watch": {pki.RoleGateway},
	"/grpc.health.v1.Health/List":  {pki.RoleGateway},
}

func startServer(t *testing.T, src *pki.Source, tel Telemetry) (string, *healthServer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, lis, src, tel)
}

func serve(t *testing.T, lis net.Listener, src *pki.Source, tel Telemetry) (string, *healthServer) {
	t.Helper()
	srv, err := NewServer(ServerOptions{Source: src, Policy: healthPolicy, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	hs := &healthServer{}
	healthpb.RegisterHealthServer(srv, hs)
	if err := CheckPolicy(srv, healthPolicy); err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), hs
}

func check(t *testing.T, conn Conn, service string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return err
}

// TestMutualTLSMatrix checks who may call whom, over mTLS TCP and over the
// all-in-one's direct links, which must apply the same identity checks as
// the handshake (CA, key usage, validity, the allowed server roles).
func TestMutualTLSMatrix(t *testing.T) {
	good := pkitest.New(t)
	other := pkitest.New(t) // a different CA
	links := NewLinks()
	addr, hs := serveLinked(t, links, good.Source(t, pki.RolePartitiond, "p1"), Telemetry{})

	expired, err := func() (*pki.Source, error) {
		f, err := good.CA.IssueToDir(good.Dir, "expired", pki.NodeSpec{
			Identity:  pki.Identity{Role: pki.RoleGateway, NodeID: "old"},
			NotBefore: time.Now().Add(-48 * time.Hour), Validity: time.Hour,
		})
		if err != nil {
			return nil, err
		}
		return pki.NewSource(f)
	}()
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		opts    ClientOptions
		tlsOnly func() (*grpc.ClientConn, error) // a raw dial without our options (TLS only)
		wantErr string                           // substring of the error; "" = success
	}{
		{name: "right CA and role", opts: ClientOptions{Source: good.Source(t, pki.RoleGateway, "g1"), ServerRoles: []pki.Role{pki.RolePartitiond}}},
		{name: "wrong role is refused by policy", opts: ClientOptions{Source: good.Source(t, pki.RoleCoordinatord, "c1")}, wantErr: "peer_role_forbidden"},
		{name: "client cert from another CA", opts: ClientOptions{Source: other.Source(t, pki.RoleGateway, "g1")}, wantErr: "router_not_available"},
		{name: "expired client cert", opts: ClientOptions{Source: expired}, wantErr: "router_not_available"},
		{name: "no client certificate", tlsOnly: func() (*grpc.ClientConn, error) {
			src := good.Source(t, pki.RoleGateway, "g1")
			cfg := src.ClientConfig()
			cfg.GetClientCertificate = nil
			return grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)), grpc.WithChainUnaryInterceptor(typedUnary))
		}, wantErr: "router_not_available"},
		{name: "server with unexpected role", opts: ClientOptions{Source: good.Source(t, pki.RoleGateway, "g1"), ServerRoles: []pki.Role{pki.RoleMetad}}, wantErr: "router_not_available"},
	}
	for _, transport := range []struct {
		name    string
		links   *Links
		network string
	}{{"tls", nil, "tcp"}, {"link", links, "inprocess"}} {
		for _, tc := range cases {
			t.Run(transport.name+"/"+tc.name, func(t *testing.T) {
				var conn Conn
				var err error
				switch {
				case tc.tlsOnly == nil:
					opts := tc.opts
					opts.Links = transport.links
					conn, err = Dial(addr, opts)
				case transport.links == nil:
					conn, err = tc.tlsOnly()
				default:
					t.Skip("a link always presents the caller's certificate")
				}
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				err = check(t, conn, "")
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("want success, got %v", err)
					}
					if hs.lastPeer != (pki.Identity{Role: pki.RoleGateway, NodeID: "g1"}) {
						t.Fatalf("peer identity = %+v", hs.lastPeer)
					}
					if n := peerNetwork(t, conn); n != transport.network {
						t.Fatalf("call went over %q, want %q", n, transport.network)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
			})
		}
	}
}

func TestTypedErrorsSurviveTheHop(t *testing.T) {
	p := pkitest.New(t)
	addr, _ := startServer(t, p.Source(t, pki.RolePartitiond, "p1"), Telemetry{})
	conn, err := Dial(addr, ClientOptions{Source: p.Source(t, pki.RoleGateway, "g1")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = check(t, conn, "fail")
	if !errors.Is(err, errcode.TopicNotFound) {
		t.Fatalf("want topic_not_found, got %v", err)
	}
	e, _ := errcode.As(err)
	if e.Field("topic") != "t1" || e.Class != errcode.ClassNotFound || e.Message != "no such topic" {
		t.Fatalf("typed error lost detail: %+v", e)
	}
	if err := check(t, conn, "panic"); !errors.Is(err, errcode.Internal) {
		t.Fatalf("panic must become internal_error, got %v", err)
	}
	if err := check(t, conn, ""); err != nil {
		t.Fatalf("server must survive a handler panic: %v", err)
	}
}

func TestCheckPolicyFindsGaps(t *testing.T) {
	p := pkitest.New(t)
	srv, err := NewServer(ServerOptions{Source: p.Source(t, pki.RolePartitiond, "p1"), Policy: Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, &healthServer{})
	if err := CheckPolicy(srv, Policy{"/grpc.health.v1.Health/Check": {pki.RoleGateway}, "/x.Y/Z": nil}); err == nil ||
		!strings.Contains(err.Error(), "Health/Watch") || !strings.Contains(err.Error(), "/x.Y/Z") {
		t.Fatalf("CheckPolicy must report missing and unknown methods, got %v", err)
	}
}

func TestTracePropagatesAcrossHop(t *testing.T) {
	p := pkitest.New(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tel := Telemetry{TracerProvider: tp, Propagator: propagation.TraceContext{}}
	addr, _ := startServer(t, p.Source(t, pki.RolePartitiond, "p1"), tel)
	conn, err := Dial(addr, ClientOptions{Source: p.Source(t, pki.RoleGateway, "g1"), Telemetry: tel})
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
	want := span.SpanContext().TraceID()
	// The server span ends after the handler returns, which can be after
	// the client already has its answer: wait for it (bounded).
	var server bool
	for deadline := time.Now().Add(5 * time.Second); !server && time.Now().Before(deadline); {
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() != want {
				t.Fatalf("span %q has trace %s, want %s", s.Name(), s.SpanContext().TraceID(), want)
			}
			if s.SpanKind().String() == "server" {
				server = true
			}
		}
		if !server {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !server {
		t.Fatal("no server span recorded")
	}
}

// A peer that was down for a while (a restarting node) is reachable again
// within the capped reconnect backoff, by a name resolved when dialing: with
// gRPC's defaults (dns resolver, backoff to 120 s) fail-fast calls kept
// failing for many seconds after the peer was back.
func TestPeerBackAfterDowntimeIsReachableSoon(t *testing.T) {
	p := pkitest.New(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	conn, err := Dial(net.JoinHostPort("localhost", strconv.Itoa(port)), ClientOptions{Source: p.Source(t, pki.RoleGateway, "g1")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.(*grpc.ClientConn).CanonicalTarget(); !strings.HasPrefix(got, "passthrough:") {
		t.Fatalf("target %q: want the passthrough resolver", got)
	}
	// Down for 6 s: the default backoff would have grown past 4 s by now.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if failFast(conn) == nil {
			t.Fatal("call succeeded with no server")
		}
	}
	lis, err = net.Listen("tcp", lis.Addr().String())
	if err != nil {
		t.Skipf("port taken meanwhile: %v", err)
	}
	serve(t, lis, p.Source(t, pki.RolePartitiond, "p1"), Telemetry{})
	back := time.Now()
	for failFast(conn) != nil {
		// MaxDelay 2 s plus jitter and a TLS handshake; 8 s is generous on
		// a loaded 2-core machine and far below the default's 10 s+.
		if time.Since(back) > 8*time.Second {
			t.Fatalf("peer back for %v, fail-fast calls still fail: %v", time.Since(back), failFast(conn))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func failFast(conn Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}
