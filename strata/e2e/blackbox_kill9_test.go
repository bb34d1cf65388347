package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/clustertest"
)

// TestBlackboxKill9UnderLoadLosesNoAck runs the `strata run` binary, keeps
// producers publishing with acks=1 (text form and batches) from several
// connections, kills the process with SIGKILL in the middle of the load,
// restarts it on the same data directory and reads every acknowledged record
// back at the offset its acknowledgement named.
func TestBlackboxKill9UnderLoadLosesNoAck(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	p := clustertest.StartAllInOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, partitions, producers = "kill9-load", 4, 4
	cl := dial(t, ctx, p.ClientAddr)
	if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	bbOffsets(t, ctx, cl, topic) // every partition open on its leader
	cl.Close()

	type acked struct {
		part   int32
		offset uint64
		value  string
	}
	var (
		killed  atomic.Bool
		failed  atomic.Int64 // publishes that failed: in flight at the kill, or after it
		mu      sync.Mutex
		all     []acked
		wg      sync.WaitGroup
		started = make(chan struct{}, producers)
	)
	for g := 0; g < producers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			c, err := client.Dial(ctx, p.ClientAddr, client.Options{ClientID: fmt.Sprintf("load-%d", g), RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Errorf("producer %d dial: %v", g, err)
				started <- struct{}{}
				return
			}
			defer c.Close()
			part := int32(g % partitions)
			first := true
			for i := 0; !killed.Load() && ctx.Err() == nil; i++ {
				var got []acked
				if g%2 == 0 {
					v := fmt.Sprintf("p%d-text-%d", g, i)
					ack, err := c.Publish(ctx, client.PublishRequest{Topic: topic, Partition: part, Acks: "1", ProducerID: fmt.Sprintf("load-%d", g), Message: v})
					if err != nil {
						failed.Add(1)
						continue // only acknowledged records count
					}
					got = append(got, acked{part, ack.LastOffset, v})
				} else {
					const n = 20
					b := &wire.Batch{BatchHeader: wire.BatchHeader{Topic: topic, Partition: part, Acks: "1"}}
					for k := 0; k < n; k++ {
						b.Records = append(b.Records, wire.Record{Topic: topic, Partition: part, Payload: []byte(fmt.Sprintf("p%d-batch-%d-%d", g, i, k))})
					}
					ack, err := c.PublishBatch(ctx, b)
					if err != nil {
						failed.Add(1)
						continue
					}
					for k := 0; k < n; k++ {
						got = append(got, acked{part, ack.LastOffset - uint64(n-1-k), string(b.Records[k].Payload)})
					}
				}
				mu.Lock()
				all = append(all, got...)
				mu.Unlock()
				if first {
					started <- struct{}{}
					first = false
				}
			}
		}(g)
	}
	for g := 0; g < producers; g++ {
		<-started
	}
	// Let the load run, then kill -9 while every producer is mid-flight.
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	beforeKill := len(all)
	mu.Unlock()
	p.Kill()
	killed.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d records acknowledged (%d when the kill was sent), %d publishes failed by the kill", len(all), beforeKill, failed.Load())
	if len(all) == 0 || failed.Load() == 0 {
		t.Fatalf("the kill did not land mid-load: %d acknowledged, %d failed", len(all), failed.Load())
	}

	p.Start()
	p.WaitReady(60 * time.Second)
	cl = dial(t, ctx, p.ClientAddr)
	want := map[int32]map[uint64]string{}
	var maxOff [partitions]uint64
	for _, a := range all {
		if want[a.part] == nil {
			want[a.part] = map[uint64]string{}
		}
		if prev, dup := want[a.part][a.offset]; dup {
			t.Fatalf("two acknowledgements for P%d offset %d: %q and %q", a.part, a.offset, prev, a.value)
		}
		want[a.part][a.offset] = a.value
		if a.offset+1 > maxOff[a.part] {
			maxOff[a.part] = a.offset + 1
		}
	}
	// A lost record would make readAll wait for it; bound that wait.
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	for part, offs := range want {
		got := readAll(t, rctx, cl, topic, part, maxOff[part])
		for off, v := range offs {
			if got[off] != v {
				t.Fatalf("P%d offset %d after kill -9: %q, acknowledged %q", part, off, got[off], v)
			}
		}
	}
}
