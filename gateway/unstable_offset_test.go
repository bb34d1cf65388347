package gateway

import (
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

// TestUnstableOffsetCommitIsWaitedOut: while a transaction's staged offsets
// are pending, the coordinator answers FetchOffset unstable_offset_commit;
// the gateway asks again within the request's deadline (FETCH_OFFSET and
// the start offset of a group's CONSUME), and answers the client the
// retryable code only when the deadline draws near.
func TestUnstableOffsetCommitIsWaitedOut(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.RequestTimeout = time.Second })
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("CREATE topic=t partitions=1")
	c.coord.SetPartitions("t", 1)
	for range 5 {
		cl.OK("PUBLISH topic=t partition=0 producerId=p message=m")
	}
	commitAndLeave(t, c, cl, "g", "t", "P0:3")
	unstable := errcode.UnstableOffsetCommit.New("a transaction in flight staged offsets", "group", "g", "topic", "t",
		"partition", "0", "transactional_id", "tx")

	// A pending mark resolved after three answers: the client sees the
	// committed offset.
	before := c.coord.Calls("FetchOffset")
	c.coord.On("FetchOffset", 3, fakerpc.Fail(unstable))
	if got := cl.OK("FETCH_OFFSET topic=t partition=0 group=g"); got != "OK offset=3" {
		t.Fatalf("FETCH_OFFSET = %q", got)
	}
	if n := c.coord.Calls("FetchOffset") - before; n != 4 {
		t.Fatalf("FETCH_OFFSET asked the coordinator %d times, want 4", n)
	}
	// CONSUME's start offset waits the same way: the committed offset
	// decides where the read begins.
	c.coord.On("FetchOffset", 2, fakerpc.Fail(unstable))
	b, err := wire.DecodeBatch(cl.Do("CONSUME topic=t partition=0 offset=0 member=m group=g").Payload)
	if err != nil || len(b.Records) != 2 || b.Records[0].Offset != 3 {
		t.Fatalf("consume from committed after unstable answers: %+v %v", b, err)
	}

	// Still pending at the deadline: the client gets the retryable code
	// with its fields, within the request timeout.
	remove := c.coord.On("FetchOffset", 0, fakerpc.Fail(unstable))
	defer remove()
	start := time.Now()
	e := cl.FailWith("FETCH_OFFSET topic=t partition=0 group=g", "unstable_offset_commit", "transactional_id", "tx", "partition", "0")
	if !e.Retryable {
		t.Fatalf("unstable_offset_commit not retryable: %+v", e)
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("answered after %v: want the wait to end shortly before the 1 s request deadline", d)
	}
}
