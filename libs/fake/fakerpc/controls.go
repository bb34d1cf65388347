package fakerpc

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// Next passes a call on to the next hook, or to the fake itself, and
// returns its answer. For a received stream message it returns (nil, nil)
// once the message is handed to the fake's stream handler.
type Next func() (proto.Message, error)

// Hook intercepts one call of the method it was installed for. It may
// answer itself (return without calling next), wait, or call next for the
// fake's own answer and return that, changed or replaced. A hook on a
// streaming method sees every message the client sends; an error it returns
// ends the stream with that error, and a response it returns is sent on
// the stream in the message's place (an answer in band: the message never
// reaches the fake, the stream goes on).
type Hook func(ctx context.Context, req proto.Message, next Next) (proto.Message, error)

// Controls holds a fake's fault hooks, call counts and recorded requests.
// The zero value is ready to use; fakes embed it, so a test calls On, Calls
// and Requests on the fake itself.
type Controls struct {
	mu       sync.Mutex
	hooks    []*control
	calls    map[string]int
	record   map[string]bool
	requests map[string][]proto.Message
}

type control struct {
	method string
	left   int // calls the hook may still see; < 0 = until removed
	hook   Hook
}

// On installs hook for the next n calls of method (the short gRPC method
// name, e.g. "Append"; "" matches every method of the fake); n <= 0 keeps
// it for every call until the returned remove is called. Hooks run in the
// order they were installed, the first outermost.
func (c *Controls) On(method string, n int, hook Hook) (remove func()) {
	left := n
	if n <= 0 {
		left = -1
	}
	ctl := &control{method: method, left: left, hook: hook}
	c.mu.Lock()
	c.hooks = append(c.hooks, ctl)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.hooks = slices.DeleteFunc(c.hooks, func(h *control) bool { return h == ctl })
	}
}

// Calls returns how many calls of method (short name) reached the fake,
// the ones a hook answered included; for a streaming method, how many
// messages clients sent.
func (c *Controls) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// Record makes the controls keep a copy of every request of the methods
// (short names) from now on; fakes call it for the requests their tests
// inspect, so bulk calls such as appends are not kept by default.
func (c *Controls) Record(methods ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.record == nil {
		c.record = map[string]bool{}
	}
	for _, m := range methods {
		c.record[m] = true
	}
}

// Requests returns copies of the recorded requests of method, oldest first;
// requests a hook failed are included.
func (c *Controls) Requests(method string) []proto.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]proto.Message, len(c.requests[method]))
	for i, r := range c.requests[method] {
		out[i] = proto.Clone(r)
	}
	return out
}

// Intercept runs one call of method (full "/pkg.Service/Method" or short
// name) through the matching hooks and then impl. Serve calls it for every
// unary call and received stream message; a fake calls it itself only for
// work it does outside gRPC's handlers.
func (c *Controls) Intercept(ctx context.Context, method string, req proto.Message, impl Next) (proto.Message, error) {
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		method = method[i+1:]
	}
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[method]++
	if c.record[method] {
		if c.requests == nil {
			c.requests = map[string][]proto.Message{}
		}
		c.requests[method] = append(c.requests[method], proto.Clone(req))
	}
	var chain []Hook
	for _, h := range c.hooks {
		if h.method != "" && h.method != method {
			continue
		}
		chain = append(chain, h.hook)
		if h.left > 0 {
			h.left--
		}
	}
	c.hooks = slices.DeleteFunc(c.hooks, func(h *control) bool { return h.left == 0 })
	c.mu.Unlock()
	var run func(i int) (proto.Message, error)
	run = func(i int) (proto.Message, error) {
		if i == len(chain) {
			return impl()
		}
		return chain[i](ctx, req, func() (proto.Message, error) { return run(i + 1) })
	}
	return run(0)
}

// Fail answers every call it sees with err; the fake does nothing.
func Fail(err error) Hook {
	return func(context.Context, proto.Message, Next) (proto.Message, error) { return nil, err }
}

// LoseAnswer lets the fake act on the call and then answers err whatever
// the fake answered, as when the response is lost on its way back (the
// caller cannot know the outcome).
func LoseAnswer(err error) Hook {
	return func(_ context.Context, _ proto.Message, next Next) (proto.Message, error) {
		_, _ = next()
		return nil, err
	}
}

// Delay waits d (or until the call is cancelled) before the fake acts.
func Delay(d time.Duration) Hook {
	return func(ctx context.Context, _ proto.Message, next Next) (proto.Message, error) {
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
		return next()
	}
}

// DelayAnswer lets the fake act at once and holds its answer back for d (or
// until the call is cancelled): the state the answer reports is older than
// the moment it arrives.
func DelayAnswer(d time.Duration) Hook {
	return func(ctx context.Context, _ proto.Message, next Next) (proto.Message, error) {
		resp, err := next()
		if serr := sleep(ctx, d); serr != nil {
			return nil, serr
		}
		return resp, err
	}
}

// Hang never answers: the call ends when the caller gives up.
func Hang() Hook {
	return func(ctx context.Context, _ proto.Message, _ Next) (proto.Message, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

// Answer answers every call it sees with resp; the fake does nothing.
func Answer(resp proto.Message) Hook {
	return func(context.Context, proto.Message, Next) (proto.Message, error) { return proto.Clone(resp), nil }
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
