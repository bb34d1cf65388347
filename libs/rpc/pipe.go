package rpc

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// pipe is one direction of an in-process connection: a ring buffer that
// grows on demand from pipeMinBuffer to pipeMaxBuffer. Unlike net.Pipe, a
// write does not wait for the reader, so gRPC's writer and reader
// goroutines run without a rendezvous per frame; unlike a socket, nothing
// crosses the kernel. A reader that finds the ring empty leaves its buffer
// for the next write, which copies straight into it: one copy per byte
// instead of two (into the ring and out of it) whenever the reader keeps up.
type pipe struct {
	// rmu makes concurrent reads take turns, as a socket's do: only one
	// reader may park with its buffer out for writes.
	rmu      sync.Mutex
	mu       sync.Mutex
	buf      []byte
	r, n     int           // read position and buffered bytes
	closed   bool          // the writing end closed: reads drain, then EOF
	rclosed  bool          // the reading end closed: writes fail
	waiting  []byte        // a parked reader's buffer, while the ring is empty
	handed   int           // bytes a write copied into waiting
	readable chan struct{} // cap 1: data arrived or closed
	writable chan struct{} // cap 1: space freed or closed
}

const (
	pipeMinBuffer = 64 << 10
	// pipeMaxBuffer bounds what one direction buffers; gRPC's flow-control
	// windows bound what is in flight above it.
	pipeMaxBuffer = 4 << 20
)

func newPipe() *pipe {
	return &pipe{readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (p *pipe) read(b []byte, dl *deadline) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p.rmu.Lock()
	defer p.rmu.Unlock()
	for {
		p.mu.Lock()
		if p.rclosed {
			p.mu.Unlock()
			return 0, net.ErrClosed
		}
		if p.n > 0 {
			n := 0
			for n < len(b) && p.n > 0 {
				end := min(p.r+p.n, len(p.buf))
				c := copy(b[n:], p.buf[p.r:end])
				n += c
				p.r = (p.r + c) % len(p.buf)
				p.n -= c
			}
			if p.n == 0 {
				p.r = 0
			}
			p.mu.Unlock()
			signal(p.writable)
			return n, nil
		}
		if p.closed {
			p.mu.Unlock()
			return 0, io.EOF
		}
		p.waiting, p.handed = b, 0
		p.mu.Unlock()
		var expired bool
		select {
		case <-p.readable:
		case <-dl.wait():
			expired = true
		}
		p.mu.Lock()
		n := p.handed
		p.waiting, p.handed = nil, 0
		p.mu.Unlock()
		switch {
		case n > 0: // a write filled b (possibly as the deadline passed)
			return n, nil
		case expired:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (p *pipe) write(b []byte, dl *deadline) (int, error) {
	written := 0
	for len(b) > 0 {
		p.mu.Lock()
		if p.closed || p.rclosed {
			p.mu.Unlock()
			return written, net.ErrClosed
		}
		if p.waiting != nil && p.handed == 0 {
			// The ring is empty (a reader parks only then, and nothing
			// is written while it is parked but into its buffer).
			c := copy(p.waiting, b)
			p.handed = c
			b = b[c:]
			written += c
			p.mu.Unlock()
			signal(p.readable)
			continue
		}
		if free := len(p.buf) - p.n; free < len(b) && len(p.buf) < pipeMaxBuffer {
			p.grow(p.n + len(b))
		}
		if free := len(p.buf) - p.n; free > 0 {
			c := 0
			for c < len(b) && p.n < len(p.buf) {
				w := (p.r + p.n) % len(p.buf)
				end := len(p.buf)
				if w < p.r {
					end = p.r
				}
				k := copy(p.buf[w:end], b[c:])
				c += k
				p.n += k
			}
			b = b[c:]
			written += c
			p.mu.Unlock()
			signal(p.readable)
			continue
		}
		p.mu.Unlock()
		select {
		case <-p.writable:
		case <-dl.wait():
			return written, os.ErrDeadlineExceeded
		}
	}
	return written, nil
}

// grow reallocates the ring to hold at least want bytes (power of two
// steps, capped), laying the buffered bytes out from position 0.
func (p *pipe) grow(want int) {
	size := max(len(p.buf), pipeMinBuffer)
	for size < want && size < pipeMaxBuffer {
		size *= 2
	}
	size = min(size, pipeMaxBuffer)
	if size <= len(p.buf) {
		return
	}
	nb := make([]byte, size)
	if p.n > 0 {
		end := min(p.r+p.n, len(p.buf))
		c := copy(nb, p.buf[p.r:end])
		copy(nb[c:], p.buf[:p.n-c])
	}
	p.buf, p.r = nb, 0
}

func (p *pipe) closeWrite() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	signal(p.readable)
	signal(p.writable)
}

func (p *pipe) closeRead() {
	p.mu.Lock()
	p.rclosed = true
	p.buf, p.n, p.r = nil, 0, 0
	p.waiting, p.handed = nil, 0
	p.mu.Unlock()
	signal(p.readable)
	signal(p.writable)
}

// deadline is a resettable timer whose wait channel closes when it passes.
type deadline struct {
	mu    sync.Mutex
	t     *time.Timer
	fired chan struct{}
}

func newDeadline() *deadline { return &deadline{fired: make(chan struct{})} }

func (d *deadline) set(at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.t != nil && !d.t.Stop() {
		<-d.fired // the old timer fired (or is firing): start a fresh channel
	}
	d.t = nil
	select {
	case <-d.fired:
		d.fired = make(chan struct{})
	default:
	}
	if at.IsZero() {
		return
	}
	if dur := time.Until(at); dur <= 0 {
		close(d.fired)
		return
	}
	fired := d.fired
	d.t = time.AfterFunc(time.Until(at), func() { close(fired) })
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

// pipeConn is one end of an in-process connection.
type pipeConn struct {
	in, out     *pipe
	rdl, wdl    *deadline
	local, peer pipeAddr
	link        *link
	closeOnce   sync.Once
}

// pipeAddr is the address of an in-process endpoint: the TCP address the
// server also listens on, so logs and peer information read the same.
type pipeAddr string

func (a pipeAddr) Network() string { return "inprocess" }
func (a pipeAddr) String() string  { return string(a) }

// newConnPair returns the two ends of an in-process connection to addr.
func newConnPair(addr string) (client, server *pipeConn) {
	up, down := newPipe(), newPipe()
	l := newLink()
	client = &pipeConn{in: down, out: up, rdl: newDeadline(), wdl: newDeadline(), local: "inprocess-client", peer: pipeAddr(addr), link: l}
	server = &pipeConn{in: up, out: down, rdl: newDeadline(), wdl: newDeadline(), local: pipeAddr(addr), peer: "inprocess-client", link: l}
	return client, server
}

func (c *pipeConn) Read(b []byte) (int, error)  { return c.in.read(b, c.rdl) }
func (c *pipeConn) Write(b []byte) (int, error) { return c.out.write(b, c.wdl) }
func (c *pipeConn) Close() error {
	c.closeOnce.Do(func() {
		c.out.closeWrite()
		c.in.closeRead()
		c.link.abort()
	})
	return nil
}
func (c *pipeConn) LocalAddr() net.Addr  { return c.local }
func (c *pipeConn) RemoteAddr() net.Addr { return c.peer }
func (c *pipeConn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}
func (c *pipeConn) SetReadDeadline(t time.Time) error  { c.rdl.set(t); return nil }
func (c *pipeConn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }
