package partition

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

// pair is a leader and a follower replica of one partition on two nodes.
type pair struct {
	le, fe   *nodeEnv
	ln, fn   *Node
	leader   *Partition
	follower *Partition
}

func newPair(t *testing.T) *pair {
	t.Helper()
	x := &pair{le: newNodeEnv(t), fe: newNodeEnv(t)}
	x.ln, x.fn = x.le.open(t), x.fe.open(t)
	t.Cleanup(func() { x.ln.Close(); x.fn.Close() })
	spec := PartitionSpec{Topic: "t", Partition: 0, LifecycleEpoch: 1, LeaderEpoch: 1}
	var err error
	if x.leader, err = x.ln.CreatePartition(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if x.follower, err = x.fn.CreatePartition(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	x.follower.SetFollower(true)
	return x
}

// sync copies the leader's durable batches to the follower and makes them
// durable there, as one fetch round of the follower's fetcher would.
func (x *pair) sync(t *testing.T) {
	t.Helper()
	for x.follower.LogEndOffset() < x.leader.DurableEnd() {
		raw, _, err := x.leader.ReadBatches(1, x.follower.LogEndOffset(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		end, err := x.follower.AppendReplica(1, raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.follower.WaitDurable(context.Background(), end); err != nil {
			t.Fatal(err)
		}
	}
}

func replAppend(t *testing.T, p *Partition, acks int32, seq uint64, ps ...string) (AppendResult, error) {
	t.Helper()
	set, n := payloads(t, p.Topic(), ps...)
	return p.Append(context.Background(), &AppendRequest{LifecycleEpoch: 1, Acks: acks, Records: set, RecordCount: n,
		ProducerID: "prod", ProducerEpoch: 1, BaseSequence: seq, Idempotent: true})
}

func TestFollowerRefusesClientAppendsAndLeaderRefusesReplicatedBatches(t *testing.T) {
	x := newPair(t)
	set, n := payloads(t, "t", "a")
	_, err := x.follower.Append(context.Background(), &AppendRequest{LifecycleEpoch: 1, Acks: AcksLeader, Records: set, RecordCount: n})
	wantCode(t, err, errcode.NotPartitionLeader)
	appendPayloads(t, x.leader, "a")
	raw, _, err := x.leader.ReadBatches(1, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.leader.AppendReplica(1, raw)
	wantCode(t, err, errcode.NotPartitionLeader)
	_, err = x.follower.AppendReplica(2, raw)
	wantCode(t, err, errcode.LifecycleEpochPending)
}

// acks=all waits for the HWM, which replication caps at what the in-sync
// followers hold; acks=1 does not. Reads never go past the HWM.
func TestAcksAllWaitsForTheCappedHighWatermark(t *testing.T) {
	x := newPair(t)
	x.leader.SetHWMCap(0) // one in-sync follower that has fetched nothing
	res := make(chan error, 1)
	go func() {
		_, err := replAppend(t, x.leader, AcksAll, 1, "r0", "r1")
		res <- err
	}()
	// The batch is durable on the leader but not committed.
	if err := x.leader.WaitDurable(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		t.Fatalf("acks=all answered (%v) before the follower held the batch", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := fetchAll(t, x.leader, 0); len(got) != 0 || x.leader.HighWatermark() != 0 {
		t.Fatalf("read %d records past the HWM %d", len(got), x.leader.HighWatermark())
	}
	appendPayloads(t, x.leader, "r2") // acks=1: durable on the leader is enough
	x.sync(t)
	x.leader.SetHWMCap(x.follower.DurableEnd())
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if got := fetchAll(t, x.leader, 0); len(got) != 3 || x.leader.HighWatermark() != 3 {
		t.Fatalf("after the follower caught up: %d records, HWM %d", len(got), x.leader.HighWatermark())
	}
	// The cap never moves the HWM back.
	x.leader.SetHWMCap(1)
	if x.leader.HighWatermark() != 3 {
		t.Fatalf("HWM moved back to %d", x.leader.HighWatermark())
	}
}

// A replica that takes over answers a retry of a batch it received from the
// old leader with the original offsets (the dedup window replicates).
func TestFollowerDeduplicatesAfterTakingOver(t *testing.T) {
	x := newPair(t)
	for seq := uint64(1); seq <= 7; seq += 2 {
		if _, err := replAppend(t, x.leader, AcksAll, seq, "a", "b"); err != nil {
			t.Fatal(err)
		}
	}
	x.sync(t)
	x.follower.SetFollower(false)
	res, err := replAppend(t, x.follower, AcksAll, 7, "a", "b")
	if err != nil || !res.Duplicate || res.BaseOffset != 6 || res.LastOffset != 7 {
		t.Fatalf("retry on the new leader: %+v %v", res, err)
	}
	res, err = replAppend(t, x.follower, AcksAll, 9, "c")
	if err != nil || res.Duplicate || res.BaseOffset != 8 {
		t.Fatalf("next batch on the new leader: %+v %v", res, err)
	}
	_, err = replAppend(t, x.follower, AcksAll, 12, "gap")
	wantCode(t, err, errcode.OutOfOrderSequence)
}

// Truncation cuts the divergent tail, moves the HWM back, forgets the
// producer batches that were cut (their retries are new appends) and
// survives a restart.
func TestFollowerTruncationRebuildsProducerState(t *testing.T) {
	x := newPair(t)
	for range 5 {
		appendPayloads(t, x.leader, "plain")
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if _, err := replAppend(t, x.leader, AcksAll, seq, "s"); err != nil {
			t.Fatal(err)
		}
	}
	x.sync(t)
	x.follower.SetHWMCap(10)
	if x.follower.HighWatermark() != 10 {
		t.Fatalf("follower HWM %d", x.follower.HighWatermark())
	}
	end, err := x.follower.TruncateTo(1, 7) // keeps sequences 1 and 2
	if err != nil || end != 7 || x.follower.HighWatermark() != 7 {
		t.Fatalf("truncate: end %d err %v HWM %d", end, err, x.follower.HighWatermark())
	}
	check := func(p *Partition) {
		t.Helper()
		p.SetFollower(false)
		res, err := replAppend(t, p, AcksAll, 2, "s")
		if err != nil || !res.Duplicate || res.BaseOffset != 6 {
			t.Fatalf("sequence 2 (kept): %+v %v", res, err)
		}
		res, err = replAppend(t, p, AcksAll, 3, "s-new")
		if err != nil || res.Duplicate || res.BaseOffset != 7 {
			t.Fatalf("sequence 3 (cut) must be a new append at 7: %+v %v", res, err)
		}
	}
	// Restart first: the checkpoint written at the cut is what a restart sees.
	if err := x.fn.Close(); err != nil {
		t.Fatal(err)
	}
	x.fn = x.fe.open(t)
	p, err := x.fn.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 7 {
		t.Fatalf("restarted follower ends at %d", p.LogEndOffset())
	}
	check(p)
}

func TestStoppingToLeadFailsAcksAllWaiters(t *testing.T) {
	x := newPair(t)
	x.leader.SetHWMCap(0)
	res := make(chan error, 1)
	go func() {
		_, err := replAppend(t, x.leader, AcksAll, 1, "r0")
		res <- err
	}()
	if err := x.leader.WaitDurable(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	x.leader.SetFollower(true)
	select {
	case err := <-res:
		wantCode(t, err, errcode.NotPartitionLeader)
	case <-time.After(10 * time.Second):
		t.Fatal("acks=all waiter not woken by the role change")
	}
}

// Retention never removes a segment above the high watermark: a follower
// may not have copied it yet.
func TestRetentionStopsAtTheHighWatermark(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "ret", 0, TopicConfig{RetentionBytes: 2 << 10})
	p.SetHWMCap(0) // one in-sync follower that copied nothing
	for i := range 200 {
		appendPayloads(t, p, payloadN(i)+strings.Repeat("x", 400))
	}
	if len(p.log.Segments()) < 4 {
		t.Fatalf("want several segments, got %d", len(p.log.Segments()))
	}
	n.Maintain(context.Background())
	if p.LogStartOffset() != 0 {
		t.Fatalf("retention moved the log start to %d above the HWM %d", p.LogStartOffset(), p.HighWatermark())
	}
	p.SetHWMCap(NoHWMCap)
	n.Maintain(context.Background())
	if p.LogStartOffset() == 0 {
		t.Fatal("retention removed nothing once the HWM covered the log")
	}
}
