package pace

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackoffDoublesUpToMax(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
}

func TestBackoffResetStartsOver(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute}
	b.Next()
	b.Next()
	b.Reset()
	if got := b.Next(); got != time.Second {
		t.Fatalf("wait after Reset = %v, want 1s", got)
	}
}

func TestBackoffMaxBelowInitialKeepsInitial(t *testing.T) {
	for _, max := range []time.Duration{0, time.Millisecond} {
		b := Backoff{Initial: time.Second, Max: max}
		for range 3 {
			if got := b.Next(); got != time.Second {
				t.Fatalf("Max %v: wait = %v, want 1s", max, got)
			}
		}
	}
}

func TestBackoffJitterStaysWithinItsFraction(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: 0.5}
	for range 1000 {
		if got := b.Next(); got < 100*time.Millisecond || got > 150*time.Millisecond {
			t.Fatalf("wait = %v, want within [100ms, 150ms]", got)
		}
	}
}

func TestWaitStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{Initial: time.Hour, Max: time.Hour}
	if b.Wait(ctx) {
		t.Fatal("Wait reported a full wait on an ended context")
	}
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep reported a full wait on an ended context")
	}
}

func TestSleepReportsAFullWait(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep reported an interrupted wait")
	}
}

func TestEveryRunsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if got := calls.Load(); got < 3 {
		t.Fatalf("f ran %d times, want at least 3", got)
	}
}
