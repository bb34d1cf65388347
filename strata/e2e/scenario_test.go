// Package e2e runs one scenario suite against two deployments: the all-in-one
// process (in-process, the `strata run` code) and a process cluster of role
// binaries (3 metad, 3 partitiond, 2 coordinatord, 2 gateways) on loopback.
// The test bodies are the same; only the gateway addresses differ.
package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/clustertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	clustertest.RemoveBuilds()
	os.Exit(code)
}

// scenario publishes keyed records through one gateway, reads them back
// through another, consumes them as a group with commits, and checks a second
// group member starts from the committed offsets.
func scenario(t *testing.T, gateways []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, last := gateways[0], gateways[len(gateways)-1]
	pub := dial(t, ctx, first)
	sub := dial(t, ctx, last)

	const topic, partitions, n = "orders", 3, 300
	if _, err := pub.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: partitions}); err != nil {
		t.Fatalf("create: %v", err)
	}
	waitTopic(t, ctx, sub, topic)

	prod := client.NewProducer(pub, client.ProducerOptions{Acks: "1"})
	results := make([]*client.Result, 0, n)
	for i := 0; i < n; i++ {
		r, err := prod.Send(ctx, client.Message{Topic: topic, Partition: -1, Key: fmt.Sprintf("k%d", i%17), Value: []byte(fmt.Sprintf("v%03d", i))})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		results = append(results, r)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	perPartition := map[int32]int{}
	for i, r := range results {
		if _, err := r.Wait(ctx); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		perPartition[r.Partition]++
	}
	if err := prod.Close(ctx); err != nil {
		t.Fatalf("producer close: %v", err)
	}

	// Direct reads through the other gateway see every record exactly once,
	// in offset order per partition.
	seen := map[string]int{}
	for p := int32(0); p < partitions; p++ {
		var next uint64
		for next < uint64(perPartition[p]) {
			b, err := sub.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: p, Offset: next, MaxRecords: 100, WaitMS: 500})
			if err != nil {
				t.Fatalf("consume p%d@%d: %v", p, next, err)
			}
			for _, r := range b.Records {
				if r.Offset != next {
					t.Fatalf("p%d: offset %d, want %d", p, r.Offset, next)
				}
				seen[string(r.Payload)]++
				next++
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct records, want %d", len(seen), n)
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("record %s read %d times", v, c)
		}
	}

	// A group consumer reads everything and commits; a later member of the
	// same group starts from the committed offsets and finds nothing new.
	const group = "e2e-group"
	got := consumeGroup(t, ctx, sub, group, topic, n)
	if len(got) != n {
		t.Fatalf("group read %d records, want %d", len(got), n)
	}
	for p := int32(0); p < partitions; p++ {
		off, err := pub.FetchOffset(ctx, topic, p, group)
		if err != nil {
			t.Fatalf("fetch offset p%d: %v", p, err)
		}
		if off != uint64(perPartition[p]) {
			t.Fatalf("committed p%d = %d, want %d", p, off, perPartition[p])
		}
	}
	if again := consumeGroup(t, ctx, pub, group, topic, 0); len(again) != 0 {
		t.Fatalf("second member re-read %d committed records", len(again))
	}
}

// consumeGroup joins group, polls until want records arrived (or, for want
// 0, a few empty polls), commits and leaves.
func consumeGroup(t *testing.T, ctx context.Context, c *client.Client, group, topic string, want int) []string {
	t.Helper()
	k := client.NewConsumer(c, client.ConsumerOptions{Group: group, Topic: topic, WaitMS: 200})
	var out []string
	empty := 0
	for len(out) < want || (want == 0 && empty < 6) {
		recs, err := k.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(recs) == 0 {
			empty++
		}
		for _, r := range recs {
			out = append(out, string(r.Payload))
		}
	}
	if err := k.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := k.Close(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	sort.Strings(out)
	return out
}

func dial(t *testing.T, ctx context.Context, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, addr, client.Options{ClientID: "e2e"})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitTopic waits until a gateway's metadata cache knows the topic (another
// gateway learns it through metad's watch).
func waitTopic(t *testing.T, ctx context.Context, c *client.Client, topic string) {
	t.Helper()
	for {
		if _, err := c.Metadata(ctx, topic); err == nil {
			return
		} else if ctx.Err() != nil {
			t.Fatalf("topic %s never visible: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
