package faults

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/strata/e2e/framework"
)

// gracefulStopUnderLoadFailsOnlyRetryably keeps producers publishing
// (acks=all, pipelined from several connections over every gateway), stops
// the deployment with SIGTERM in the middle of the load, and checks what a
// client sees: requests in flight finish, every failed publish failed with a
// retryable error for want of a connection (spec 7: unavailability, never
// internal_error or a cancelled request), every process exited by itself
// with status 0, and after a restart every acknowledged record is there at
// its offset.
func gracefulStopUnderLoadFailsOnlyRetryably(t *testing.T, c framework.Killable) {
	const topic, partitions, producers = "sigterm-load", 4, 8
	ctx, gateways := loadTopic(t, c, topic, partitions)

	var (
		stopped  atomic.Bool // set once every process has exited
		mu       sync.Mutex
		acked    = map[int32]map[uint64]string{}
		failures = map[string]int{} // error code -> count
		bad      []string           // non-retryable errors
	)
	// Producers keep going past the SIGTERM until every process has
	// exited: publishes in flight while it drains are what this checks.
	wait := producerLoad{gateways: gateways, n: producers, partitions: partitions, clientID: "sigterm", requestTimeout: 10 * time.Second,
		stop: stopped.Load,
		step: func(pc *client.Client, g int, part int32, i int) bool {
			v := fmt.Sprintf("p%d-%d", g, i)
			ack, err := pc.Publish(ctx, client.PublishRequest{Topic: topic, Partition: part, Acks: client.AcksAll, Message: v})
			mu.Lock()
			if err != nil {
				code := errcode.CodeOf(err)
				failures[code]++
				if !errcode.IsRetryable(err) && len(bad) < 10 {
					bad = append(bad, err.Error())
				}
			} else {
				if acked[part] == nil {
					acked[part] = map[uint64]string{}
				}
				acked[part][ack.LastOffset] = v
			}
			mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond) // the client redials with its own backoff too
			}
			return true
		}}.start(t, ctx)
	time.Sleep(1500 * time.Millisecond)
	c.Stop()
	stopped.Store(true)
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("producers still busy 60 s after the graceful stop")
	}
	total := 0
	for _, m := range acked {
		total += len(m)
	}
	t.Logf("%d publishes acknowledged; failures by code: %v", total, failures)
	if len(bad) > 0 {
		t.Fatalf("non-retryable failures during a graceful stop: %q", bad)
	}
	// A request the gateway had started finishes while it drains: a
	// publish fails only for want of a connection (closed after its last
	// answer, or nothing listening), or refused by a stopping gateway —
	// never cancelled or timed out half-way.
	for code := range failures {
		if code != client.CodeConnectionLost && code != errcode.RouterNotAvailable.Name() {
			t.Errorf("publishes failed with %s during the graceful stop: in-flight requests must finish", code)
		}
	}
	if total == 0 {
		t.Fatal("nothing was acknowledged before the stop")
	}

	c.Start()
	cl := framework.Dial(t, ctx, gateways[0])
	for part, want := range acked {
		var end uint64
		for off := range want {
			end = max(end, off+1)
		}
		got := framework.ReadAll(t, ctx, cl, topic, part, end)
		for off, v := range want {
			if got[off] != v {
				t.Fatalf("P%d offset %d: %q after the restart, acknowledged %q", part, off, got[off], v)
			}
		}
	}
}
