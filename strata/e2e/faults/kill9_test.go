package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// acknowledgedAndCommittedSurviveKill9 publishes through the deployment,
// consumes as a group with commits, kills every process with SIGKILL,
// restarts them on the same data directories and reads every acknowledged
// record and the committed group offsets back.
func acknowledgedAndCommittedSurviveKill9(t *testing.T, c framework.Killable) {
	ctx, cl := framework.Connect(t, c, 2*time.Minute)
	const topic, group, n = "kill9", "g-kill9", 300
	if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	acked := framework.PublishAcked(t, ctx, cl, topic, n)
	if got := framework.ConsumeGroup(t, ctx, cl, group, topic, n); len(got) != n {
		t.Fatalf("group read %d, want %d", len(got), n)
	}
	cl.Close()

	c.Kill()
	c.Start()

	cl = framework.Dial(t, ctx, c.Gateways()[0].ClientAddr)
	framework.CheckAcked(t, ctx, cl, topic, acked)
	for part, want := range acked {
		if off := framework.Committed(t, ctx, cl, topic, part, group); off != uint64(len(want)) {
			t.Fatalf("committed p%d = %d after restart, want %d", part, off, len(want))
		}
	}
}

// kill9UnderLoadLosesNoAck keeps producers publishing with acks=1 (text form
// and batches) from several connections (spread over the gateways), kills
// every process with SIGKILL in the middle of the load, restarts them on the
// same data directories and reads every acknowledged record back at the
// offset its acknowledgement named.
func kill9UnderLoadLosesNoAck(t *testing.T, c framework.Killable) {
	const topic, partitions, producers = "kill9-load", 4, 4
	ctx, gateways := loadTopic(t, c, topic, partitions)

	type acked struct {
		part   int32
		offset uint64
		value  string
	}
	var (
		killed atomic.Bool
		failed atomic.Int64 // publishes that failed: in flight at the kill, or after it
		mu     sync.Mutex
		all    []acked
	)
	// acks=all: on a replicated deployment only acks=all promises that a
	// record survives the loss of its leader (acks=1 may lose the tail when
	// another replica takes over, spec 4.6); on one replica they are the
	// same.
	const acks = "all"
	wait := producerLoad{gateways: gateways, n: producers, partitions: partitions, clientID: "load", requestTimeout: 5 * time.Second,
		stop: killed.Load,
		step: func(pc *client.Client, g int, part int32, i int) bool {
			var got []acked
			if g%2 == 0 {
				v := fmt.Sprintf("p%d-text-%d", g, i)
				ack, err := pc.Publish(ctx, client.PublishRequest{Topic: topic, Partition: part, Acks: acks, ProducerID: fmt.Sprintf("load-%d", g), Message: v})
				if err != nil {
					failed.Add(1)
					return false // only acknowledged records count
				}
				got = append(got, acked{part, ack.LastOffset, v})
			} else {
				const n = 20
				b := &wire.Batch{BatchHeader: wire.BatchHeader{Topic: topic, Partition: part, Acks: acks}}
				for k := 0; k < n; k++ {
					b.Records = append(b.Records, wire.Record{Topic: topic, Partition: part, Payload: []byte(fmt.Sprintf("p%d-batch-%d-%d", g, i, k))})
				}
				ack, err := pc.PublishBatch(ctx, b)
				if err != nil {
					failed.Add(1)
					return false
				}
				for k := 0; k < n; k++ {
					got = append(got, acked{part, ack.LastOffset - uint64(n-1-k), string(b.Records[k].Payload)})
				}
			}
			mu.Lock()
			all = append(all, got...)
			mu.Unlock()
			return true
		}}.start(t, ctx)
	// Let the load run, then kill -9 while every producer is mid-flight.
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	beforeKill := len(all)
	mu.Unlock()
	c.Kill()
	killed.Store(true)
	wait()
	if t.Failed() {
		return
	}
	t.Logf("%d records acknowledged (%d when the kill was sent), %d publishes failed by the kill", len(all), beforeKill, failed.Load())
	if len(all) == 0 || failed.Load() == 0 {
		t.Fatalf("the kill did not land mid-load: %d acknowledged, %d failed", len(all), failed.Load())
	}

	c.Start()
	cl := framework.Dial(t, ctx, gateways[0])
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
		got := framework.ReadAll(t, rctx, cl, topic, part, maxOff[part])
		for off, v := range offs {
			if got[off] != v {
				t.Fatalf("P%d offset %d after kill -9: %q, acknowledged %q", part, off, got[off], v)
			}
		}
	}
}
