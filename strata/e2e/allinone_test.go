package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/clustertest"
)

// TestAllInOneBinarySurvivesKill9 publishes through the `strata run` binary,
// kills it with SIGKILL, restarts it on the same data directory and reads
// every acknowledged record and the committed group offsets back.
func TestAllInOneBinarySurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	p := clustertest.StartAllInOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := dial(t, ctx, p.ClientAddr)
	const topic, group, n = "kill9", "g-kill9", 300
	if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	acked := publishAcked(t, ctx, cl, topic, n)
	if got := consumeGroup(t, ctx, cl, group, topic, n); len(got) != n {
		t.Fatalf("group read %d, want %d", len(got), n)
	}
	cl.Close()

	p.Kill()
	p.Start()
	p.WaitReady(60 * time.Second)

	cl = dial(t, ctx, p.ClientAddr)
	for part, want := range acked {
		got := readAll(t, ctx, cl, topic, part, uint64(len(want)))
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("p%d offset %d: %q, want %q", part, i, got[i], want[i])
			}
		}
		retry(t, ctx, func() error {
			off, err := cl.FetchOffset(ctx, topic, part, group)
			if err == nil && off != uint64(len(want)) {
				t.Fatalf("committed p%d = %d after restart, want %d", part, off, len(want))
			}
			return err
		})
	}
}
