package client

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/strataio/strata/libs/wire"
)

// Reply buffers a caller gave back (Client.Recycle) are reused for later
// replies of their size class. Only large replies are pooled: below
// replyPoolMin an allocation costs less than the pool's bookkeeping, and
// above replyPoolMax (the frame reader's up-front bound) a reply grows as
// it arrives.
const (
	replyPoolMinShift = 16 // 64 KiB
	replyPoolMaxShift = 24 // 16 MiB
	replyPoolMin      = 1 << replyPoolMinShift
)

// replyPool holds one sync.Pool per power-of-two capacity from 64 KiB to
// 16 MiB. A buffer is only ever put back into the class of its exact
// capacity, so whatever get returns holds at least the size asked for.
//
// Until the client's caller recycles a first buffer, get allocates exactly
// what a reply needs, as the frame reader does on its own: rounding up to a
// class would cost a caller that keeps its replies up to twice the memory.
type replyPool struct {
	classes   [replyPoolMaxShift - replyPoolMinShift + 1]sync.Pool
	recycling atomic.Bool // Recycle was called
}

// class returns the index of the smallest class holding n bytes, or -1.
func replyClass(n int) int {
	if n <= replyPoolMin {
		return 0
	}
	i := bits.Len(uint(n-1)) - replyPoolMinShift
	if i >= len(replyPool{}.classes) {
		return -1
	}
	return i
}

// get returns an empty buffer of capacity at least n (wire.FrameReader's
// alloc): a recycled one when its class has one, else, once the caller
// recycles, a new one of the class's capacity, so that it can be recycled
// in turn.
func (p *replyPool) get(n int) []byte {
	if n < replyPoolMin/2 || !p.recycling.Load() {
		return make([]byte, 0, n)
	}
	i := replyClass(n)
	if i < 0 {
		return make([]byte, 0, n)
	}
	if b, ok := p.classes[i].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<(i+replyPoolMinShift))
}

// put gives b back when its capacity is exactly a class's (a buffer the
// pool made); other buffers are left to the garbage collector.
func (p *replyPool) put(b []byte) {
	if !p.recycling.Load() {
		p.recycling.Store(true)
	}
	c := cap(b)
	if c < replyPoolMin || c&(c-1) != 0 {
		return
	}
	if i := replyClass(c); i >= 0 {
		b = b[:0]
		p.classes[i].Put(&b)
	}
}

// Recycle gives the buffer of a reply the caller is done with back to the
// client, which reads later replies into it instead of allocating (and
// clearing) a new one: a consumer reading at high rates saves most of its
// allocation and garbage collection. v is a ConsumeView answer; after
// Recycle neither v nor anything taken from it (payloads, keys, headers)
// may be used, as its bytes will hold another reply. Not calling Recycle is
// always safe.
func (c *Client) Recycle(v wire.BatchView) {
	c.replies.put(v.Bytes())
}
