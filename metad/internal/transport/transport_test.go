package transport

import (
	"io"
	"net"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func listen(t *testing.T, src *pki.Source) *StreamLayer {
	t.Helper()
	s, err := Listen(Options{Listen: "127.0.0.1:0", Source: src, HandshakeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMetadPeersExchangeBytes(t *testing.T) {
	ca := pkitest.New(t)
	a := listen(t, ca.Source(t, pki.RoleMetad, "a"))
	b := listen(t, ca.Source(t, pki.RoleMetad, "b"))
	c, err := b.Dial(raftAddr(a), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = c.Write([]byte("ping")) }()
	in, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q %v", buf, err)
	}
	if a.Addr().String() != a.BoundAddr().String() {
		t.Fatalf("advertised %s, bound %s", a.Addr(), a.BoundAddr())
	}
}

// A certificate of the cluster CA with another role is refused in the
// handshake, in both directions, and raft never sees the connection.
func TestRejectsPeersWithoutTheMetadRole(t *testing.T) {
	ca := pkitest.New(t)
	metad := listen(t, ca.Source(t, pki.RoleMetad, "a"))
	gw := listen(t, ca.Source(t, pki.RoleGateway, "g"))

	// Inbound: a gateway certificate dials metad. TLS 1.3 lets the client
	// finish its side first; the server's refusal arrives on the first read.
	c, err := gw.Dial(raftAddr(metad), time.Second)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = c.Write([]byte("x"))
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if err == nil {
		t.Fatal("gateway connection was accepted")
	}
	deadline := time.Now().Add(3 * time.Second)
	for metad.Rejected() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if metad.Rejected() != 1 {
		t.Fatalf("rejected = %d, want 1", metad.Rejected())
	}
	select {
	case c := <-metad.accepted:
		c.Close()
		t.Fatal("a refused connection reached raft")
	default:
	}

	// Outbound: metad dials a server presenting a gateway certificate.
	if c, err := metad.Dial(raftAddr(gw), time.Second); err == nil {
		c.Close()
		t.Fatal("metad accepted a gateway as raft peer")
	}

	// Another CA entirely.
	other := pkitest.New(t)
	rogue := listen(t, other.Source(t, pki.RoleMetad, "r"))
	if c, err := rogue.Dial(raftAddr(metad), time.Second); err == nil {
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = c.Write([]byte("x"))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("foreign CA accepted")
		}
		c.Close()
	}
}

// Close ends handshakes in progress and connections handed out.
func TestCloseReleasesEverything(t *testing.T) {
	ca := pkitest.New(t)
	a, err := Listen(Options{Listen: "127.0.0.1:0", Source: ca.Source(t, pki.RoleMetad, "a")})
	if err != nil {
		t.Fatal(err)
	}
	// A silent TCP client stuck in the handshake.
	raw, err := net.Dial("tcp", a.BoundAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	b := listen(t, ca.Source(t, pki.RoleMetad, "b"))
	out, err := b.Dial(raftAddr(a), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	in, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := in.Read(make([]byte, 1))
		done <- err
	}()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read succeeded after close")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("accepted connection still open after Close")
	}
	if _, err := a.Accept(); err == nil {
		t.Fatal("accept after close")
	}
}

func raftAddr(s *StreamLayer) hraft.ServerAddress { return hraft.ServerAddress(s.BoundAddr().String()) }
