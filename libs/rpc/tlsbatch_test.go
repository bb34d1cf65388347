package rpc

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestBatchedTLS: a large write crosses the socket in one syscall instead
// of one per 16 KiB record, and the peer reads exactly the bytes written,
// in order, through handshake, large and small writes.
func TestBatchedTLS(t *testing.T) {
	p := pkitest.New(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: 64 records
	var want []byte
	want = append(want, big...)
	for i := range 100 {
		want = append(want, byte(i))
	}
	got := make(chan []byte, 1)
	go func() {
		raw, err := lis.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
		conn, _, err := batchedTLS{credentials.NewTLS(p.Source(t, pki.RolePartitiond, "p1").ServerConfig())}.ServerHandshake(raw)
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(io.LimitReader(conn, int64(len(want))))
		got <- b
	}()
	d, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw := &countingConn{Conn: d}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
	creds := batchedTLS{credentials.NewTLS(p.Source(t, pki.RolePartitiond, "p2").ClientConfig(pki.RolePartitiond))}
	conn, info, err := creds.ClientHandshake(context.Background(), "127.0.0.1", raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.(credentials.TLSInfo); !ok {
		t.Fatalf("auth info %T, want the TLS credentials' own", info)
	}
	before := raw.writes.Load()
	if n, err := conn.Write(big); err != nil || n != len(big) {
		t.Fatalf("write: %d, %v", n, err)
	}
	if w := raw.writes.Load() - before; w != 1 {
		t.Fatalf("a 1 MiB write took %d socket writes, want 1", w)
	}
	for i := range 100 {
		if _, err := conn.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("peer read %d bytes, not the %d written", len(b), len(want))
	}
	_ = conn.Close()
}
