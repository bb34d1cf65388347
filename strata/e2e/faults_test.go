package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/strata/clustertest"
)

// TestProcessClusterFaults runs the fault scenarios on one process cluster:
// acknowledged records survive kill -9 of every partition server, each metad
// voter can be killed in turn (so the Raft leader is killed at least once)
// while topics are still created, and a group's committed offsets survive
// kill -9 of every coordinator.
func TestProcessClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster: skipped with -short")
	}
	c := clustertest.Start(t, clustertest.FullSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	gw := c.GatewayAddrs()

	t.Run("acknowledged records survive kill -9 of every partitiond", func(t *testing.T) {
		cl := dial(t, ctx, gw[0])
		const topic, n = "durable", 200
		if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 3}); err != nil {
			t.Fatal(err)
		}
		acked := publishAcked(t, ctx, cl, topic, n)
		for _, p := range c.ByRole(pki.RolePartitiond) {
			p.Kill()
		}
		for _, p := range c.ByRole(pki.RolePartitiond) {
			p.Start()
		}
		for _, p := range c.ByRole(pki.RolePartitiond) {
			p.WaitReady(60 * time.Second)
		}
		cl2 := dial(t, ctx, gw[1])
		for part, want := range acked {
			got := readAll(t, ctx, cl2, topic, part, uint64(len(want)))
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("p%d offset %d: %q, want %q", part, i, got[i], want[i])
				}
			}
		}
	})

	t.Run("metad voters killed in turn; topics still created", func(t *testing.T) {
		cl := dial(t, ctx, gw[0])
		for i, m := range c.ByRole(pki.RoleMetad) {
			m.Kill()
			name := fmt.Sprintf("after-kill-%d", i)
			retry(t, ctx, func() error {
				_, err := cl.CreateTopic(ctx, client.TopicConfig{Name: name, Partitions: 1})
				return err
			})
			m.Start()
			m.WaitReady(60 * time.Second)
		}
		topics, err := cl.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.ByRole(pki.RoleMetad) {
			if !contains(topics, fmt.Sprintf("after-kill-%d", i)) {
				t.Fatalf("topic after-kill-%d missing from %v", i, topics)
			}
		}
	})

	t.Run("committed offsets survive kill -9 of every coordinatord", func(t *testing.T) {
		cl := dial(t, ctx, gw[1])
		const topic, group = "groups-durable", "g-durable"
		if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
		acked := publishAcked(t, ctx, cl, topic, 50)
		if got := consumeGroup(t, ctx, cl, group, topic, 50); len(got) != 50 {
			t.Fatalf("group read %d, want 50", len(got))
		}
		for _, p := range c.ByRole(pki.RoleCoordinatord) {
			p.Kill()
		}
		for _, p := range c.ByRole(pki.RoleCoordinatord) {
			p.Start()
		}
		for _, p := range c.ByRole(pki.RoleCoordinatord) {
			p.WaitReady(60 * time.Second)
		}
		for part, want := range acked {
			retry(t, ctx, func() error {
				off, err := cl.FetchOffset(ctx, topic, part, group)
				if err == nil && off != uint64(len(want)) {
					return fmt.Errorf("committed p%d = %d, want %d", part, off, len(want))
				}
				return err
			})
		}
	})
}

// publishAcked publishes n keyed records with acks=1 and returns the
// acknowledged payloads per partition in offset order.
func publishAcked(t *testing.T, ctx context.Context, cl *client.Client, topic string, n int) map[int32][]string {
	t.Helper()
	prod := client.NewProducer(cl, client.ProducerOptions{Acks: "1"})
	type sent struct {
		r *client.Result
		v string
	}
	var all []sent
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%04d", topic, i)
		r, err := prod.Send(ctx, client.Message{Topic: topic, Partition: -1, Key: fmt.Sprintf("k%d", i), Value: []byte(v)})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{r, v})
	}
	if err := prod.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := map[int32][]string{}
	for _, s := range all {
		off, err := s.r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		list := out[s.r.Partition]
		for uint64(len(list)) <= off {
			list = append(list, "")
		}
		list[off] = s.v
		out[s.r.Partition] = list
	}
	return out
}

// readAll reads offsets [0, n) of one partition, retrying while the
// partition comes back after a restart.
func readAll(t *testing.T, ctx context.Context, cl *client.Client, topic string, part int32, n uint64) []string {
	t.Helper()
	var out []string
	for uint64(len(out)) < n {
		var b []string
		retry(t, ctx, func() error {
			batch, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: part, Offset: uint64(len(out)), MaxRecords: 100, WaitMS: 200})
			if err != nil {
				return err
			}
			b = b[:0]
			for _, r := range batch.Records {
				b = append(b, string(r.Payload))
			}
			return nil
		})
		out = append(out, b...)
	}
	return out
}

// retry calls f until it succeeds or ctx ends (cluster changes settle in
// seconds; the test's context bounds the wait).
func retry(t *testing.T, ctx context.Context, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("gave up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
