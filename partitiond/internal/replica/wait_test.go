package replica

import (
	"testing"
	"time"
)

// TestWaitAny: a long poll wakes for any of its partitions' channels, the
// timer or the end of its stream, and for nothing else.
func TestWaitAny(t *testing.T) {
	never := make(chan struct{})
	closed := make(chan struct{})
	close(closed)
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for n := 1; n <= maxWaitPartitions; n++ {
		for i := range n {
			chs := make([]<-chan struct{}, n)
			for j := range chs {
				chs[j] = never
			}
			chs[i] = closed
			if got := waitAny(chs, idle.C, never); got != waitChanged {
				t.Fatalf("%d channels, #%d closed: got %d", n, i, got)
			}
		}
		chs := make([]<-chan struct{}, n)
		for j := range chs {
			chs[j] = never
		}
		if got := waitAny(chs, idle.C, closed); got != waitDone {
			t.Fatalf("%d channels, stream done: got %d", n, got)
		}
		fired := time.NewTimer(time.Millisecond)
		if got := waitAny(chs, fired.C, never); got != waitTimer {
			t.Fatalf("%d channels, timer: got %d", n, got)
		}
	}
}
