package gateway

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// TestConsumeFetchesWhileAskingTheCoordinator: CONSUME starts the partition
// fetch at the requested offset while the coordinator looks up the group's
// committed offset, and answers with that fetch only when the committed
// offset is not past the requested one; otherwise the fetch (a long poll
// included) is cancelled and the read starts at the committed offset.
func TestConsumeFetchesWhileAskingTheCoordinator(t *testing.T) {
	c, cl := startDialed(t)
	cl.OK("CREATE topic=t partitions=1")
	for range 5 {
		cl.OK("PUBLISH topic=t partition=0 producerId=p message=m")
	}
	c.part.Record("Fetch")
	// commit answers the next FetchOffset with committed, once a Fetch has
	// reached the partition server (at most 5 s later): the coordinator
	// is slower than the leader, and the answer shows whether the fetch
	// overlapped the lookup.
	commit := func(committed uint64) (overlapped func() bool) {
		fetches := c.part.Calls("Fetch")
		seen := make(chan bool, 1)
		c.coord.On("FetchOffset", 1, func(ctx context.Context, _ proto.Message, _ fakerpc.Next) (proto.Message, error) {
			deadline := time.Now().Add(5 * time.Second)
			for c.part.Calls("Fetch") == fetches && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			seen <- c.part.Calls("Fetch") > fetches
			return &coordinatorv1.FetchOffsetResponse{Offset: committed, Found: true}, nil
		})
		return func() bool { return <-seen }
	}
	fetchOffsets := func() []uint64 {
		var out []uint64
		for _, m := range c.part.Requests("Fetch") {
			out = append(out, m.(*partitionv1.FetchRequest).GetOffset())
		}
		return out
	}
	consume := func(cmd string, first uint64, n int) {
		t.Helper()
		b, err := wire.DecodeBatch(cl.Do(cmd).Payload)
		if err != nil || len(b.Records) != n || (n > 0 && b.Records[0].Offset != first) {
			t.Fatalf("%s: %+v %v, want %d records from %d", cmd, b, err, n, first)
		}
	}

	// Committed below the requested offset: the early fetch is the answer,
	// the only one made.
	overlapped := commit(2)
	consume("CONSUME topic=t partition=0 offset=3 member=m group=g", 3, 2)
	if !overlapped() {
		t.Fatal("the fetch waited for the committed offset")
	}
	if got := fetchOffsets(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("fetch offsets %v, want [3]", got)
	}

	// Committed past the requested offset: the early fetch's records (from
	// 1) are dropped and the read starts at the commit.
	overlapped = commit(4)
	consume("CONSUME topic=t partition=0 offset=1 member=m group=g", 4, 1)
	if !overlapped() {
		t.Fatal("the fetch waited for the committed offset")
	}
	if got := fetchOffsets(); len(got) != 3 || got[1] != 1 || got[2] != 4 {
		t.Fatalf("fetch offsets %v, want [3 1 4]", got)
	}

	// The early fetch long-polls at the log end; a commit past it cancels
	// the poll, and the answer is the committed offset's (beyond the log:
	// offset_out_of_range), not an empty batch after 30 s.
	overlapped = commit(7)
	cl.FailWith("CONSUME topic=t partition=0 offset=5 member=m group=g wait_ms=30000", "OFFSET_OUT_OF_RANGE")
	if !overlapped() {
		t.Fatal("the fetch waited for the committed offset")
	}
	// Without a commit a long poll through the early fetch still sees
	// records published while it waits.
	c.coord.On("FetchOffset", 1, func(context.Context, proto.Message, fakerpc.Next) (proto.Message, error) {
		return &coordinatorv1.FetchOffsetResponse{}, nil
	})
	id := cl.SendText("CONSUME topic=t partition=0 offset=5 member=m group=g wait_ms=30000")
	fetches := len(fetchOffsets())
	for deadline := time.Now().Add(10 * time.Second); len(fetchOffsets()) == fetches; { // the poll reached the leader
		if time.Now().After(deadline) {
			t.Fatal("no fetch reached the partition server")
		}
		time.Sleep(time.Millisecond)
	}
	pub := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	pub.OK("PUBLISH topic=t partition=0 producerId=p message=late")
	f := cl.MustRead()
	b, err := wire.DecodeBatch(f.Payload)
	if f.Header.RequestID != id || err != nil || len(b.Records) != 1 || b.Records[0].Offset != 5 {
		t.Fatalf("long poll answer %+v: %+v %v", f.Header, b, err)
	}
}
