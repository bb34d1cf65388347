package rpc

import (
	"math/bits"
	"sync"
)

// Size classes of the transport buffer pool: powers of two from 256 B to
// 64 MiB. Larger messages (up to MaxMessageSize) are rare and allocated
// without pooling.
const (
	minPoolClass = 8
	maxPoolClass = 26
)

// bufferPool is the mem.BufferPool given to every gRPC server and client. It
// differs from gRPC's default pool in two ways that matter for Strata's
// megabyte batches: it does not zero a buffer on Get (gRPC's default clears
// the whole capacity, which showed up as ~10 % of a publish profile), and it
// has size classes above 1 MiB, where the default falls back to one untiered
// pool that reallocates whenever the pooled buffer is a little too small.
// Not zeroing is safe because the transport fills every byte of the length it
// asks for (a frame or message is read in full into it) before anything
// reads the buffer; gRPC uses such "dirty" pools internally for the same
// reason.
type bufferPool struct {
	classes [maxPoolClass - minPoolClass + 1]sync.Pool
}

var transportPool = &bufferPool{}

// class returns the smallest size class holding n bytes.
func class(n int) int {
	if n <= 1<<minPoolClass {
		return minPoolClass
	}
	return bits.Len(uint(n - 1))
}

// Get returns a buffer of length n; its contents are unspecified.
func (p *bufferPool) Get(n int) *[]byte {
	c := class(n)
	if c > maxPoolClass {
		b := make([]byte, n)
		return &b
	}
	if v := p.classes[c-minPoolClass].Get(); v != nil {
		bp := v.(*[]byte)
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<c)
	return &b
}

// Put keeps buf in the largest class its capacity fully covers, so a later
// Get from that class always has room.
func (p *bufferPool) Put(bp *[]byte) {
	c := bits.Len(uint(cap(*bp))) - 1
	if c < minPoolClass || c > maxPoolClass {
		return
	}
	*bp = (*bp)[:0]
	p.classes[c-minPoolClass].Put(bp)
}
