package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strataio/strata/libs/errcode"
)

// Service is one unit of a process's lifecycle: a hosted role. Process.Run
// starts services in order and stops them in reverse.
type Service interface {
	// Name returns the service name, e.g. "partitiond".
	Name() string
	// Start runs the service's starting step and returns once it runs; it
	// must not block for the service's lifetime. The service's gRPC methods
	// are already registered and served.
	Start(ctx context.Context) error
	// Stop ends the service's work and releases its resources within ctx.
	// It is called after a failed Start, and for a service that was built
	// but never started, too.
	Stop(ctx context.Context) error
}

// Hooks are the role-specific steps of a BasicService.
type Hooks struct {
	// Starting opens what the running service needs (storage, listeners)
	// and registers its background loops with Go. ctx is the caller's: it
	// bounds starting, not the loops, which get the service context.
	Starting func(ctx context.Context) error
	// Draining hands work off while the loops still run: it is the first
	// step of Stop, before the service context is cancelled (partitiond
	// moves its partition leaderships to other replicas here, which needs
	// its metadata watch). An error is reported; Stop goes on.
	Draining func(ctx context.Context) error
	// Stopping releases what construction and Starting acquired. It runs
	// once, on the first Stop, after the service context was cancelled and
	// every loop returned (or ctx expired first); it must be safe when
	// Starting failed or never ran.
	Stopping func(ctx context.Context) error
}

// state is where a BasicService is in its lifecycle: new → running (after
// Starting succeeded; the loops run) → stopped. A failed Starting leaves
// it new-but-started: only Stop remains.
type state int

const (
	stateNew state = iota
	stateStarted
	stateStopped
)

// BasicService implements Service for a role: it owns the role's
// background goroutines. The service context exists from construction and
// is cancelled when Stop begins; Stop then waits for every loop started
// with Go before running the Stopping hook. Roles embed it, so they need no
// cancel function or wait group of their own.
type BasicService struct {
	name  string
	hooks Hooks

	ctx    context.Context
	cancel context.CancelFunc

	// lifeMu serialises Start and Stop.
	lifeMu sync.Mutex
	state  state

	// mu guards the loop count; idle is closed once Stop began and the
	// count reached zero, after which Go refuses new loops.
	mu       sync.Mutex
	loops    int
	stopping bool
	idle     chan struct{}
}

// NewBasicService returns a service named name that runs hooks (either may
// be nil).
func NewBasicService(name string, hooks Hooks) *BasicService {
	ctx, cancel := context.WithCancel(context.Background())
	return &BasicService{name: name, hooks: hooks, ctx: ctx, cancel: cancel, idle: make(chan struct{})}
}

// Name implements Service.
func (s *BasicService) Name() string { return s.name }

// Context is the service context: it ends when Stop begins. Work that must
// not outlive the service (loops, streams, request fan-out) derives from it.
func (s *BasicService) Context() context.Context { return s.ctx }

// Go runs loop on a goroutine the service owns, with the service context.
// Stop waits for it to return. A loop may start further loops (one per
// accepted connection, say): Go called from a running loop always starts
// its loop. Only after Stop saw every loop return does Go refuse, returning
// false without running loop.
func (s *BasicService) Go(loop func(ctx context.Context)) bool {
	s.mu.Lock()
	if s.stopping && s.loops == 0 {
		s.mu.Unlock()
		return false
	}
	s.loops++
	s.mu.Unlock()
	go func() {
		defer s.loopDone()
		loop(s.ctx)
	}()
	return true
}

func (s *BasicService) loopDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loops--
	if s.loops == 0 && s.stopping {
		close(s.idle)
	}
}

// Start implements Service: it runs the Starting hook once. Starting a
// service twice, or after Stop, is an error.
func (s *BasicService) Start(ctx context.Context) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.state != stateNew {
		return errcode.RoleUnavailable.New(s.name+" was already started or stopped", "role", s.name)
	}
	s.state = stateStarted
	if s.hooks.Starting == nil {
		return nil
	}
	return s.hooks.Starting(ctx)
}

// Stop implements Service: it runs the Draining hook (when Start ran),
// cancels the service context, waits for the loops until ctx ends, then
// runs the Stopping hook. Later calls return
// nil at once. Loops still running when ctx ended are reported in the
// error; Stopping runs anyway, so the role's resources are released.
func (s *BasicService) Stop(ctx context.Context) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.state == stateStopped {
		return nil
	}
	var errs []error
	if s.state == stateStarted && s.hooks.Draining != nil {
		if err := s.hooks.Draining(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.state = stateStopped
	s.cancel()
	s.mu.Lock()
	s.stopping = true
	if s.loops == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
	select {
	case <-s.idle:
	case <-ctx.Done():
		s.mu.Lock()
		n := s.loops
		s.mu.Unlock()
		errs = append(errs, fmt.Errorf("%s: %d background loops did not stop in time: %w", s.name, n, ctx.Err()))
	}
	if s.hooks.Stopping != nil {
		if err := s.hooks.Stopping(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
