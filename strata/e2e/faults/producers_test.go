package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
)

// loadTopic creates the topic of an under-load scenario on c and waits until
// every partition is open on its leader; it returns the scenario's context
// and c's gateways.
func loadTopic(t *testing.T, c framework.Killable, topic string, partitions int) (context.Context, []string) {
	t.Helper()
	ctx, cl := framework.Connect(t, c, 3*time.Minute)
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	framework.Offsets(t, ctx, cl, topic)
	return ctx, framework.ClientAddrs(c)
}

// producerLoad is the load of the under-load fault scenarios: n producers,
// producer g on its own connection to gateways[g%len(gateways)] and
// partition g%partitions, each running step (its i-th publish) until stop
// says so or ctx ends.
type producerLoad struct {
	gateways   []string
	n          int
	partitions int
	// clientID names producer g's connection: clientID-g.
	clientID       string
	requestTimeout time.Duration
	stop           func() bool
	// step publishes once; started says whether the producer counts as
	// under way from now on.
	step func(pc *client.Client, g int, part int32, i int) (started bool)
}

// start runs the producers and returns once every one is under way (or
// failed to dial, which fails t); wait waits for them all to end.
func (l producerLoad) start(t *testing.T, ctx context.Context) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	started := make(chan struct{}, l.n)
	for g := 0; g < l.n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			pc, err := client.Dial(ctx, l.gateways[g%len(l.gateways)], client.Options{ClientID: fmt.Sprintf("%s-%d", l.clientID, g), RequestTimeout: l.requestTimeout})
			if err != nil {
				t.Errorf("producer %d dial: %v", g, err)
				started <- struct{}{}
				return
			}
			defer pc.Close()
			part := int32(g % l.partitions)
			first := true
			for i := 0; ctx.Err() == nil && !l.stop(); i++ {
				if l.step(pc, g, part, i) && first {
					started <- struct{}{}
					first = false
				}
			}
		}(g)
	}
	for g := 0; g < l.n; g++ {
		<-started
	}
	return wg.Wait
}
