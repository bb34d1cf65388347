package pace

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is the wait between the attempts of a retry loop: Initial first,
// doubled after every wait up to Max. Set the fields once, before the first
// Next; a Backoff is not safe for concurrent use. A Max below Initial keeps
// every wait at Initial.
type Backoff struct {
	// Initial is the first wait, and the wait after Reset.
	Initial time.Duration
	// Max caps the doubled waits.
	Max time.Duration
	// Jitter adds a random extra of up to this fraction of each wait (0.5:
	// up to half again), so peers that failed together do not retry in
	// lockstep. Zero waits exactly.
	Jitter float64

	next time.Duration // the next base wait; 0 before the first Next
}

// Next returns the wait before the next attempt and doubles the following
// one, up to Max.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.Initial
	}
	d := b.next
	b.next = max(min(d*2, b.Max), b.Initial)
	if b.Jitter > 0 {
		d += rand.N(time.Duration(float64(d)*b.Jitter) + 1)
	}
	return d
}

// Reset makes the next wait Initial again, after an attempt succeeded.
func (b *Backoff) Reset() { b.next = 0 }

// Wait waits Next or until ctx ends, and reports whether the whole wait
// passed (false: ctx ended first and the loop should stop).
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits d or until ctx ends, and reports whether the whole wait
// passed (false: ctx ended first).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Every calls f once per period, the first time one period from now, until
// ctx ends. Ticks that pass while f runs are dropped, not queued. period
// must be positive.
func Every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}
