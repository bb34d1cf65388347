package rpc

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// batchedTLS wraps the TLS transport credentials of every internal
// connection so that one write of gRPC's (a flush of its write buffer, up to
// WriteBufferSize) reaches the socket in one syscall. crypto/tls seals at
// most 16 KiB per record and writes every record with a syscall of its own:
// a megabyte fetch answer or produce batch took 64 writes, each a trip
// through the TCP stack (on loopback also the receiver's softirq work) —
// 18 % of a partitiond's CPU in the RF 3 benchmark at 100 B records. The
// records, their order and their content are unchanged; only the syscalls
// are fewer.
type batchedTLS struct {
	credentials.TransportCredentials
}

func (c batchedTLS) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	w := &recordBatcher{Conn: raw}
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, w)
	if err != nil {
		return nil, nil, err
	}
	return &batchedConn{Conn: conn, w: w}, info, nil
}

func (c batchedTLS) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	w := &recordBatcher{Conn: raw}
	conn, info, err := c.TransportCredentials.ServerHandshake(w)
	if err != nil {
		return nil, nil, err
	}
	return &batchedConn{Conn: conn, w: w}, info, nil
}

func (c batchedTLS) Clone() credentials.TransportCredentials {
	return batchedTLS{c.TransportCredentials.Clone()}
}

// batchedConn is the TLS connection gRPC writes to: each Write collects the
// records TLS makes of it and sends them at once.
type batchedConn struct {
	net.Conn // the TLS connection
	w        *recordBatcher
	mu       sync.Mutex // one Write at a time owns the collecting
}

func (c *batchedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w.collect()
	n, err := c.Conn.Write(b)
	if ferr := c.w.flush(); err == nil && ferr != nil {
		// The records were sealed but not all sent: the stream is broken
		// either way, and TLS's own sequence numbers have moved on.
		return 0, ferr
	}
	return n, err
}

// recordBatcher is the socket under TLS. While collecting, the records TLS
// writes are appended to a buffer instead of written; otherwise (the
// handshake, alerts, records TLS writes on its own from Read or Close) it
// writes through.
type recordBatcher struct {
	net.Conn // the socket

	mu         sync.Mutex
	collecting bool
	buf        *[]byte // from batchBufs while collecting
}

// batchBufs holds the collecting buffers; a connection holds one only
// during a Write, so idle connections pin none (as gRPC's shared write
// buffer).
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, WriteBufferSize+64<<10); return &b }}

func (w *recordBatcher) collect() {
	w.mu.Lock()
	w.collecting = true
	w.buf = batchBufs.Get().(*[]byte)
	w.mu.Unlock()
}

// Write is called by TLS with one sealed record at a time, in the order of
// their sequence numbers (under TLS's output lock). A record written
// through while a batch is being flushed waits for the flush (w.mu is held
// across the socket writes), so records reach the socket in that order.
func (w *recordBatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.collecting {
		*w.buf = append(*w.buf, b...)
		return len(b), nil
	}
	return w.Conn.Write(b)
}

// flush writes what was collected and stops collecting.
func (w *recordBatcher) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	bp := w.buf
	w.collecting, w.buf = false, nil
	var err error
	if len(*bp) > 0 {
		_, err = w.Conn.Write(*bp)
	}
	if cap(*bp) <= 2*(WriteBufferSize+64<<10) {
		*bp = (*bp)[:0]
		batchBufs.Put(bp)
	}
	return err
}
