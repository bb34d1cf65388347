package rpc

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
)

// serveLinked serves the health server on a TCP listener and on the
// in-process listener of links for the same address, as libs/node does.
func serveLinked(t *testing.T, links *Links, src *pki.Source, tel Telemetry) (string, *healthServer) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerOptions{Source: src, Policy: healthPolicy, Telemetry: tel, Links: links})
	if err != nil {
		t.Fatal(err)
	}
	hs := &healthServer{}
	healthpb.RegisterHealthServer(srv, hs)
	lis, err := links.Listen(tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, l := range []net.Listener{tcp, lis} {
		wg.Go(func() { _ = srv.Serve(l) })
	}
	t.Cleanup(func() { srv.Stop(); wg.Wait() })
	return tcp.Addr().String(), hs
}

// peerNetwork is the network of the connection a call went over.
func peerNetwork(t *testing.T, conn *grpc.ClientConn) string {
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

// The pipe carries bytes in order in both directions, whatever the write
// and read sizes, beyond its buffer bound.
func TestPipeCarriesBytesInOrder(t *testing.T) {
	c, s := newConnPair("a:1")
	defer c.Close()
	defer s.Close()
	data := make([]byte, 3*pipeMaxBuffer+12345)
	rand.Read(data)
	var wg sync.WaitGroup
	for _, dir := range [][2]net.Conn{{c, s}, {s, c}} {
		w, r := dir[0], dir[1]
		wg.Go(func() {
			for b := data; len(b) > 0; {
				n := min(len(b), 1+len(b)%70001)
				if _, err := w.Write(b[:n]); err != nil {
					t.Error(err)
					return
				}
				b = b[n:]
			}
		})
		wg.Go(func() {
			got := make([]byte, 0, len(data))
			buf := make([]byte, 50000)
			for len(got) < len(data) {
				n, err := r.Read(buf[:1+len(got)%len(buf)])
				if err != nil {
					t.Error(err)
					return
				}
				got = append(got, buf[:n]...)
			}
			if !bytes.Equal(got, data) {
				t.Error("bytes differ")
			}
		})
	}
	wg.Wait()
}

func TestPipeCloseAndDeadlines(t *testing.T) {
	c, s := newConnPair("a:1")
	// A read deadline ends a blocked read; clearing it lets reads block again.
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	go s.Write([]byte("x"))
	if n, err := c.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("read after clearing the deadline: %d %v", n, err)
	}
	// A full pipe blocks writes until the write deadline.
	s.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := s.Write(make([]byte, 2*pipeMaxBuffer)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write into a full pipe: %v", err)
	}
	// Closing one end: the other drains what was written, then reads EOF;
	// writes to a closed end fail.
	c2, s2 := newConnPair("a:1")
	c2.Write([]byte("bye"))
	c2.Close()
	if b, err := io.ReadAll(s2); string(b) != "bye" || err != nil {
		t.Fatalf("drain after close: %q %v", b, err)
	}
	if _, err := s2.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write to a closed peer: %v", err)
	}
	c.Close()
	s.Close()
	s2.Close()
}

// Dialing a closed in-process listener fails; the address can be listened
// on again (a role restarted in the same process).
func TestLinkListenerClose(t *testing.T) {
	links := NewLinks()
	l, err := links.Listen("a:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := links.Listen("a:1"); err == nil {
		t.Fatal("second listener on one address")
	}
	l.Close()
	if _, ok, _ := links.dial(context.Background(), "a:1"); ok {
		t.Fatal("dial reached a closed listener")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed listener: %v", err)
	}
	l2, err := links.Listen("a:1")
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
}

// A write to a reader parked on an empty pipe lands in the reader's buffer
// without passing through the ring; what does not fit goes to the ring and
// follows in order.

// A write to a reader parked on an empty pipe lands in the reader's buffer
// without passing through the ring; what does not fit goes to the ring and
// follows in order.
func TestPipeHandsWritesToAParkedReader(t *testing.T) {
	p := newPipe()
	dl := newDeadline()
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		b := make([]byte, 4)
		n, err := p.read(b, dl)
		got <- result{b[:n], err}
	}()
	for parked := false; !parked; {
		p.mu.Lock()
		parked = p.waiting != nil
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	if n, err := p.write([]byte("abcdefg"), dl); n != 7 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if r := <-got; string(r.b) != "abcd" || r.err != nil {
		t.Fatalf("parked read: %q, %v", r.b, r.err)
	}
	p.mu.Lock()
	ringed := p.n
	p.mu.Unlock()
	if ringed != 3 {
		t.Fatalf("%d bytes in the ring, want the 3 the reader had no room for", ringed)
	}
	b := make([]byte, 8)
	if n, err := p.read(b, dl); string(b[:n]) != "efg" || err != nil {
		t.Fatalf("next read: %q, %v", b[:n], err)
	}
}

// Concurrent reads take turns: every byte written reaches exactly one
// reader, none is lost to (or invented by) a reader that parked second.
func TestPipeConcurrentReaders(t *testing.T) {
	c, s := newConnPair("a:1")
	defer c.Close()
	defer s.Close()
	const total = 1 << 20
	data := make([]byte, total)
	var want [256]int64
	for i := range data {
		data[i] = byte(1 + i%251)
		want[data[i]]++
	}
	var got [256]atomic.Int64
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(10 * time.Second) // a lost byte must fail, not hang
	for range 3 {
		wg.Go(func() {
			buf := make([]byte, 1000)
			for n.Load() < total && time.Now().Before(stop) {
				clear(buf)
				s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				k, err := s.Read(buf)
				for _, v := range buf[:k] {
					got[v].Add(1)
				}
				n.Add(int64(k))
				if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Error(err)
					return
				}
			}
		})
	}
	for b := data; len(b) > 0; {
		k := min(len(b), 777)
		if _, err := c.Write(b[:k]); err != nil {
			t.Fatal(err)
		}
		b = b[k:]
	}
	wg.Wait()
	for v := range want {
		if g := got[v].Load(); g != want[v] {
			t.Fatalf("byte value %d read %d times, written %d times", v, g, want[v])
		}
	}
}

// BenchmarkPipe moves bytes through one pipe the way gRPC's transport does:
// 256 KiB flushes of 16 KiB frames, read into a 256 KiB bufio buffer.
// Reports MB/s (b.SetBytes); compare CPU with -cpu and the time's user+sys.
func BenchmarkPipe(b *testing.B) {
	c, s := newConnPair("a:1")
	defer c.Close()
	defer s.Close()
	const flush = 256 << 10
	data := make([]byte, flush)
	b.SetBytes(flush)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 256<<10)
		for got, want := 0, b.N*flush; got < want; {
			n, err := s.Read(buf)
			if err != nil {
				b.Error(err)
				return
			}
			got += n
		}
	}()
	for range b.N {
		if _, err := c.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}
