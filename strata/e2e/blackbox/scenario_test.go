package blackbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
)

// TestScenarioExternal runs produceReadGroupCommit against an already
// running deployment whose gateway client addresses are listed in
// STRATA_E2E_GATEWAYS (comma separated), e.g. the docker-compose stack
// (deploy/compose/test.sh sets it). Skipped when unset.
// It also takes a topic of the longest legal name through create, write,
// delete and recreate there, and checks CLUSTER_STATUS (HWMs as
// LIST_OFFSETS, `strata cluster status` on one screen) and LIST_CLUSTER.
func TestScenarioExternal(t *testing.T) {
	c := framework.External(t)
	t.Run("ProduceReadGroupCommit", func(t *testing.T) { produceReadGroupCommit(t, c) })
	t.Run("MaxLengthTopic", func(t *testing.T) { bugMaxLengthTopicNeverOpens(t, c) })
	t.Run("ClusterStatus", func(t *testing.T) { clusterStatusAndList(t, c) })
}

// produceReadGroupCommit publishes keyed records through one gateway, reads
// them back through another (the same one on the all-in-one), consumes them
// as a group with commits, and checks a second group member starts from the
// committed offsets.
func produceReadGroupCommit(t *testing.T, c framework.Cluster) {
	ctx, pub := framework.Connect(t, c, 2*time.Minute)
	gateways := framework.ClientAddrs(c)
	sub := framework.Dial(t, ctx, gateways[len(gateways)-1])

	const topic, partitions, n = "orders", 3, 300
	if _, err := pub.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: partitions}); err != nil {
		t.Fatalf("create: %v", err)
	}
	framework.WaitTopic(t, ctx, sub, topic)

	prod := client.NewProducer(pub, client.ProducerOptions{Acks: "all"})
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
	got := framework.ConsumeGroup(t, ctx, sub, group, topic, n)
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
	if again := framework.ConsumeGroup(t, ctx, pub, group, topic, 0); len(again) != 0 {
		t.Fatalf("second member re-read %d committed records", len(again))
	}
}
