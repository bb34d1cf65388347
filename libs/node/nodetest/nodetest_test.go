package nodetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/node"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newProcess() *node.Process {
	p := node.NewProcess(nil, nil)
	p.HealthAddr = "127.0.0.1:0"
	return p
}

func TestStartReturnsOnceStartedAndStopEndsTheRun(t *testing.T) {
	var running, stopped atomic.Bool
	svc := node.NewBasicService("svc", node.Hooks{
		Starting: func(context.Context) error { running.Store(true); return nil },
		Stopping: func(context.Context) error { stopped.Store(true); return nil },
	})
	r := Start(t, "svc", newProcess(), 5*time.Second, svc)
	if !running.Load() {
		t.Fatal("Start returned before the service started")
	}
	r.Stop()
	if !stopped.Load() {
		t.Fatal("Stop returned before the service stopped")
	}
	r.Stop() // and again from the cleanup: nothing happens
}

// fakeT records failures; Fatalf ends the calling goroutine as testing.T's
// does.
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	cleanups []func()
}

func (f *fakeT) Helper() {}

func (f *fakeT) Cleanup(fn func()) { f.mu.Lock(); f.cleanups = append(f.cleanups, fn); f.mu.Unlock() }

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func TestStartFailsWhenTheRunEndsFirst(t *testing.T) {
	svc := node.NewBasicService("svc", node.Hooks{
		Starting: func(context.Context) error { return errors.New("no disk") },
	})
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, "svc", newProcess(), 5*time.Second, svc)
	}()
	<-done
	for _, c := range f.cleanups {
		c()
	}
	if len(f.failures) != 1 {
		t.Fatalf("failures %q, want exactly the start failure", f.failures)
	}
}
