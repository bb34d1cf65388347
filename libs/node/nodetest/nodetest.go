package nodetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/node"
)

// StartWait bounds how long Start waits for the services to start, and
// StopWait how long Stop waits for the run to return.
const (
	StartWait = 10 * time.Second
	StopWait  = 15 * time.Second
)

// Run is one node.Process running its services for a test.
type Run struct {
	t      testing.TB
	name   string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// Start runs services on p (stopTimeout is the process's shutdown budget,
// as node.Process.Run takes it) and returns once every service started.
// name is the run in failure messages. The run is stopped when t ends.
func Start(t testing.TB, name string, p *node.Process, stopTimeout time.Duration, services ...node.Service) *Run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Run{t: t, name: name, cancel: cancel, done: make(chan error, 1)}
	started := make(chan struct{})
	go func() { r.done <- p.Run(ctx, services, stopTimeout, func() { close(started) }) }()
	t.Cleanup(r.Stop)
	select {
	case <-started:
		return r
	case err := <-r.done:
		r.once.Do(func() {}) // ended already: nothing left for Stop
		t.Fatalf("%s: %v", name, err)
	case <-time.After(StartWait):
		t.Fatalf("%s did not start within %v", name, StartWait)
	}
	return nil
}

// Stop cancels the run and waits, at most StopWait, for it to return; an
// error it returns, or a run that does not return in time, fails the test.
// Later calls do nothing.
func (r *Run) Stop() {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				r.t.Errorf("%s stopped with %v", r.name, err)
			}
		case <-time.After(StopWait):
			r.t.Errorf("%s did not stop within %v", r.name, StopWait)
		}
	})
}
