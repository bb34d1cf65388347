package replica

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Close stops every fetcher (in a session, in a retry backoff, or blocked
// on its stream) and the ISR loop, cancelling an ALTER_ISR metad has not
// answered; a closed manager ignores later views, and Close may be called
// again. Nothing the managers started outlives them.
func TestCloseStopsFetchersAndTheISRLoop(t *testing.T) {
	before := goleak.IgnoreCurrent()
	c := newCluster(t, isrOpts())
	c.commitAll("p1", 1, 3, "data")

	entered := make(chan struct{})
	var once sync.Once
	hookErr := make(chan error, 1)
	letGo := make(chan struct{})
	c.meta.setAlterHook(func(ctx context.Context, _ *metav1.AlterIsrRequest) error {
		once.Do(func() { close(entered) })
		<-ctx.Done() // metad never answers
		select {
		case hookErr <- ctx.Err():
		default:
		}
		<-letGo // and the call is slow to return
		return ctx.Err()
	})
	c.stop("p3") // p1 proposes to drop it
	select {
	case <-entered:
	case <-time.After(waitLimit):
		t.Fatal("no ALTER_ISR")
	}

	within := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
		}()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Fatalf("%s did not return", what)
		}
	}
	p1, p2 := c.mgr("p1"), c.mgr("p2")
	closeHeld(t, "the leader's Close, with its ALTER_ISR call", p1.Close, func() {
		if err := <-hookErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("the pending ALTER_ISR ended with %v, want its context cancelled", err)
		}
	}, letGo)
	within("stopping the closed leader", func() { c.stop("p1") })
	// p2's fetcher now fails its sessions against the stopped leader and
	// dials again after a pause; the next Dial is held. Close must wait
	// for the fetcher, so it returns only once the Dial is let go.
	waitFor(t, "p2's fetch session to fail", func() bool { return c.member("p2").metrics.SessionFailures.Load() > 0 })
	// A failed session counts against every topic it followed.
	var topicFailures uint64
	c.member("p2").metrics.Failures(func(tp, class string, n uint64) {
		if tp == topic && class == "availability" {
			topicFailures += n
		}
	})
	if topicFailures == 0 {
		t.Error("the failed session is not counted as an availability failure of the followed topic")
	}
	hold := make(chan struct{})
	c.member("p2").dialHold.Store(&hold)
	select {
	case <-c.member("p2").dialEntered:
	case <-time.After(waitLimit):
		t.Fatal("p2's fetcher did not dial again")
	}
	closeHeld(t, "a follower's Close, with its fetcher", p2.Close, func() {}, hold)
	within("stopping a follower whose manager is closed", func() { c.stop("p2") })
	// Nothing of the managers runs any more (a goroutine that signalled
	// its end may still be returning: a short grace).
	deadline := time.Now().Add(time.Second)
	for g := managerGoroutines(); len(g) > 0; g = managerGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines of closed managers still run:\n%s", strings.Join(g, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Closed: a view changes nothing, and Close returns again.
	p2.Apply(Assignment{Part: c.part("p2"), Topic: topic, Partition: partID, LifecycleEpoch: lifecycle, LeaderEpoch: 9,
		Leader: "p3", LeaderAddr: "127.0.0.1:1", Replicas: []string{"p1", "p2", "p3"}, ISR: []string{"p3"}, MinISR: 2})
	p2.Apply(Assignment{Part: c.part("p2"), Topic: topic, Partition: partID, LifecycleEpoch: lifecycle, LeaderEpoch: 9,
		Leader: "p2", Replicas: []string{"p1", "p2", "p3"}, ISR: []string{"p2"}, MinISR: 2})
	if _, _, ok := p2.Leading(topic, partID); ok {
		t.Fatal("a closed manager took up leadership")
	}
	within("closing again", p2.Close)

	c.close()
	goleak.VerifyNone(t, before)
}

// managerGoroutines returns the stacks of goroutines running a manager's
// code (fetchers, the ISR loop, ALTER_ISR calls).
func managerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/replica.(*fetcher).run") || strings.Contains(g, "internal/replica.(*Manager).isrLoop") ||
			strings.Contains(g, "internal/replica.(*leaderState).maybeAlterISR") {
			out = append(out, g)
		}
	}
	return out
}

// closeHeld runs closeFn while something it must wait for is held: after
// started, it must not have returned (within 100 ms), and once release is
// closed it must return.
func closeHeld(t *testing.T, what string, closeFn, started func(), release chan struct{}) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		closeFn()
	}()
	started()
	select {
	case <-closed:
		t.Fatalf("%s returned without waiting", what)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(waitLimit):
		t.Fatalf("%s did not return once released", what)
	}
}
