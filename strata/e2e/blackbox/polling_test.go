package blackbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// pollingConsumerExactlyOnce (issue 19) runs a group consumer the way the
// public SDKs' polling consumers do: FETCH_OFFSET after joining, CONSUME with
// offset = last delivered + 1, a BATCH_COMMIT every commitEvery, and a
// reconnect (new connection, rejoin) halfway. Without failures it must see
// every record exactly once, including records published after the
// reconnect.
func pollingConsumerExactlyOnce(t *testing.T, c framework.Cluster) {
	ctx, admin := framework.Connect(t, c, 120*time.Second)
	gw := c.Gateways()[0].ClientAddr
	framework.OK(t, ctx, admin, "CREATE topic=sdkpoll partitions=2")
	publish := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := admin.Publish(ctx, client.PublishRequest{Topic: "sdkpoll", Partition: int32(i % 2), Message: fmt.Sprint("r", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[string]int{}
	const commitEvery = 700 * time.Millisecond
	// session joins, polls until it has read want records in total, and
	// commits every commitEvery (and once more before leaving, as an SDK's
	// close does, only when commitOnClose).
	session := func(want int, commitOnClose bool) {
		cl := framework.Dial(t, ctx, gw)
		defer cl.Close()
		var j client.JoinResult
		framework.Retry(t, ctx, func() (err error) { j, err = cl.JoinGroup(ctx, "sdk", "poller", "sdkpoll"); return err })
		next := map[int32]uint64{}
		for _, p := range j.Assignments {
			off, err := cl.FetchOffset(ctx, "sdkpoll", p, "sdk")
			if err != nil {
				t.Fatal(err)
			}
			next[p] = off
		}
		commit := func() {
			var offs []wire.PartitionOffset
			for p, o := range next {
				offs = append(offs, wire.PartitionOffset{Partition: p, Offset: o})
			}
			if _, err := cl.BatchCommit(ctx, "sdkpoll", "sdk", j.Member, j.Generation, offs); err != nil {
				t.Fatal(err)
			}
		}
		lastCommit := time.Now()
		for len(seen) < want {
			for _, p := range j.Assignments {
				b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: "sdkpoll", Partition: p, Offset: next[p], Member: j.Member,
					Group: "sdk", MaxRecords: 7, WaitMS: 50})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range b.Records {
					seen[string(r.Payload)]++
					next[p] = r.Offset + 1
				}
			}
			if time.Since(lastCommit) > commitEvery {
				commit()
				lastCommit = time.Now()
			}
		}
		if commitOnClose {
			commit()
		}
		if err := cl.LeaveGroup(ctx, "sdkpoll", "sdk", j.Member); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, 60)
	session(60, true)
	publish(60, 40) // the reproduction: 40 new records after a reconnect
	session(100, true)
	for i := 0; i < 100; i++ {
		if n := seen[fmt.Sprint("r", i)]; n != 1 {
			t.Errorf("record r%d delivered %d times, want exactly once", i, n)
		}
	}
	if len(seen) != 100 {
		t.Fatalf("saw %d distinct records, want 100", len(seen))
	}
}
