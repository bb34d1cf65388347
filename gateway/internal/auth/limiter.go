package auth

import (
	"net"
	"sync"
	"time"
)

// limiter counts failed authentications per client IP in fixed windows:
// an address with limit failures in the current window is refused without
// verification until the window ends. The map is bounded: when it holds
// maxTracked addresses, expired windows are dropped, and if none expired the
// whole map is (an attacker with that many addresses gains nothing over the
// per-address limit; legitimate clients lose at most one window of counts).
type limiter struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu    sync.Mutex
	addrs map[string]*failures
}

type failures struct {
	start time.Time
	n     int
}

const maxTracked = 16384

func newLimiter(limit int, window time.Duration) *limiter {
	return &limiter{limit: limit, window: window, now: time.Now, addrs: map[string]*failures{}}
}

// key is the IP of a host:port address (the port changes per connection).
func key(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// allow reports whether addr may attempt an authentication now.
func (l *limiter) allow(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.addrs[key(addr)]
	if !ok {
		return true
	}
	if l.now().Sub(f.start) >= l.window {
		delete(l.addrs, key(addr))
		return true
	}
	return f.n < l.limit
}

// failed counts one failed attempt of addr.
func (l *limiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, now := key(addr), l.now()
	f, ok := l.addrs[k]
	if ok && now.Sub(f.start) >= l.window {
		ok = false
	}
	if !ok {
		if len(l.addrs) >= maxTracked {
			for a, g := range l.addrs {
				if now.Sub(g.start) >= l.window {
					delete(l.addrs, a)
				}
			}
			if len(l.addrs) >= maxTracked {
				clear(l.addrs)
			}
		}
		f = &failures{start: now}
		l.addrs[k] = f
	}
	f.n++
}
