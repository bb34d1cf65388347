package gateway

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/gateway/internal/auth"
	"github.com/strataio/strata/libs/authtoken"
	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

// authTokens are the tokens of the test principals (hashed at the minimum
// work factor once per test binary).
var (
	authOnce    sync.Once
	authEntries []string
)

func principals(t testing.TB) []string {
	authOnce.Do(func() {
		for _, p := range []struct{ name, perms string }{{"ops", "admin+topic.read"}, {"app", "topic.read+topic.write+group"}} {
			h, err := authtoken.New("tok-"+p.name, authtoken.MinIterations)
			if err != nil {
				panic(err)
			}
			authEntries = append(authEntries, p.name+":"+p.perms+":"+h.String())
		}
	})
	return authEntries
}

func startAuthCluster(t testing.TB, tune func(*Config)) *cluster {
	t.Helper()
	entries := principals(t)
	return startCluster(t, func(c *Config) {
		c.EnableSASL = true
		c.SASLPrincipals = entries
		c.AuthFailureDelay = 0
		c.AuthFailureLimit = 1000
		if tune != nil {
			tune(c)
		}
	})
}

// TestAuthOverTheWire drives spec 5 through the gateway: protected
// commands need authentication, AUTH and inline credentials, permissions,
// topic ACLs (a CONSUME pattern included), a silent denial of acks=0, and
// the principal as metadata on the internal hop.
func TestAuthOverTheWire(t *testing.T) {
	c := startAuthCluster(t, nil)
	var seen []string
	var mu sync.Mutex
	c.meta.On("CreateTopic", 0, func(ctx context.Context, req proto.Message, next fakerpc.Next) (proto.Message, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen = append(seen, md.Get(auth.MetadataKey)...)
		mu.Unlock()
		return next()
	})

	anon := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	anon.OK("HELP")
	anon.FailWith("CREATE topic=secure", "authentication_required", "command", "CREATE")
	anon.FailWith("LIST", "authentication_required", "command", "LIST")
	anon.FailWith("AUTH principal=ops token=nope", "authentication_failed", "reason", "invalid_credentials")
	anon.FailWith("AUTH principal=ghost token=tok-ops", "authentication_failed", "reason", "invalid_credentials")

	ops := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	if got := ops.OK("AUTH principal=ops token=tok-ops"); got != "OK principal=ops authenticated=true" {
		t.Fatalf("AUTH = %q", got)
	}
	ops.OK("CREATE topic=secure partitions=1 auth_policy=acl read_acl=app write_acl=ops")
	ops.OK("CREATE topic=secret2 partitions=1 auth_policy=acl read_acl=ops write_acl=ops")
	ops.OK("CREATE topic=open1 partitions=1")
	ops.FailWith("CONSUME topic=open1 partition=0 offset=0 member=m", "NOT_AUTHORIZED_FOR_OPERATION", "command", "CONSUME", "permission", "group")
	mu.Lock()
	if len(seen) != 3 || seen[0] != "ops" {
		t.Errorf("metad saw principals %v, want ops on every CreateTopic", seen)
	}
	mu.Unlock()

	app := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	app.FailWith("PUBLISH topic=secure producerId=p principal=app auth_token=tok-app message=x",
		"NOT_AUTHORIZED_FOR_TOPIC", "topic", "secure", "operation", "write")
	// The inline credentials authenticated the connection.
	app.OK("PUBLISH topic=open1 producerId=p message=x")
	app.OK("CONSUME topic=secure partition=0 offset=0 member=m")
	app.FailWith("CONSUME topic=sec* partition=0 offset=0 member=m", "NOT_AUTHORIZED_FOR_TOPIC", "topic", "secret2", "operation", "read")
	app.FailWith("DELETE topic=secure", "NOT_AUTHORIZED_FOR_OPERATION", "command", "DELETE", "permission", "admin")
	app.FailWith("DELETE_GROUP group=g", "NOT_AUTHORIZED_FOR_OPERATION", "permission", "admin")
	app.FailWith("RESET_OFFSETS group=g topic=open1 offsets=P0:0", "NOT_AUTHORIZED_FOR_OPERATION", "permission", "admin")
	// A denied acks=0 publish gets no frame, as every acks=0 failure: the
	// next answer is the next request's.
	app.SendText("PUBLISH topic=secure producerId=p acks=0 message=x")
	app.SendBatch("secure", "0", "y")
	if got := app.OK("LIST"); !strings.Contains(got, "secure") {
		t.Fatalf("LIST after silent denials = %q", got)
	}
	app.FailWith("BEGIN_TXN transactional_id=x producerId=1 epoch=0", "NOT_AUTHORIZED_FOR_OPERATION", "permission", "transaction")
}

// TestPreAuthFrameLimit: before authentication a frame above 64 KiB closes
// the connection on its header; after AUTH the same frame is served.
func TestPreAuthFrameLimit(t *testing.T) {
	c := startAuthCluster(t, nil)
	big := "PUBLISH topic=nope producerId=p message=" + strings.Repeat("x", 100<<10)

	anon := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	anon.SendText(big)
	wiretest.ExpectClosed(t, anon.Conn)

	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("AUTH principal=app token=tok-app")
	cl.FailWith(big, "topic_not_found")
}

// TestUnauthenticatedHugeLengthPrefixesCostLittle: 1,000 unauthenticated
// connections each negotiate and send a request header declaring a 2 GiB
// payload. Every one is closed on its header, and the bytes allocated in
// this process over the whole run (server and the test's clients,
// runtime.MemStats.TotalAlloc, which garbage collection does not lower)
// stay below 64 MiB.
func TestUnauthenticatedHugeLengthPrefixesCostLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections: skipped with -short")
	}
	c := startAuthCluster(t, func(c *Config) { c.MaxConnections = 1100 })
	const n = 1000
	negotiation := wiretest.NegotiationFrame(t, wire.CompressionNone)
	id, _ := wire.TableA.ID(wire.CmdPublish)
	hdr := wire.Header{Kind: wire.KindRequest, Flags: wire.FlagCompressionExplicit, Command: id, RequestID: 1,
		EncodedLength: 2 << 30, DecodedLength: 2 << 30}.AppendTo(nil)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	resp := make([]byte, 64)
	for range n {
		nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		if _, err := nc.Write(negotiation); err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := readFull(nc, resp[:wire.HeaderSize+3]); err != nil {
			t.Fatal("negotiation answer:", err)
		}
	}
	for _, nc := range conns {
		if _, err := nc.Write(hdr); err != nil {
			t.Fatal(err)
		}
	}
	for _, nc := range conns {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Read(resp); err == nil {
			t.Fatal("the gateway answered a 2 GiB frame header instead of closing")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the gateway kept a connection that declared a 2 GiB frame")
		}
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d connections with 2 GiB prefixes: %.1f MiB allocated in total (server and clients), heap in use %+.1f MiB",
		n, float64(alloc)/(1<<20), (float64(after.HeapInuse)-float64(before.HeapInuse))/(1<<20))
	if alloc >= 64<<20 {
		t.Fatalf("%d MiB allocated, want < 64 MiB", alloc>>20)
	}
}

func readFull(nc net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := nc.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestGoClientAuthenticates: libs/client (and so the strata CLI, which
// passes --principal/--token to it) sends AUTH after negotiation.
func TestGoClientAuthenticates(t *testing.T) {
	c := startAuthCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := client.Dial(ctx, c.addr, client.Options{Principal: "ops", Token: "tok-ops"})
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	if _, err := ok.CreateTopic(ctx, client.TopicConfig{Name: "viaclient", Partitions: 1}); err != nil {
		t.Fatalf("authenticated CREATE: %v", err)
	}
	if _, err := client.Dial(ctx, c.addr, client.Options{Principal: "ops", Token: "wrong"}); errcode.CodeOf(err) != "authentication_failed" {
		t.Fatalf("Dial with a wrong token: %v", err)
	}
	anon, err := client.Dial(ctx, c.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.ListTopics(ctx); errcode.CodeOf(err) != "authentication_required" {
		t.Fatalf("LIST without credentials: %v", err)
	}
}
