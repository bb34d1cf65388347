package faults

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
)

// replicatedSpec is the process cluster of the replication tests: three
// partition servers (so RF 3 and min ISR 2, clustertest's defaults for that
// size), two coordinators and two gateways, and short leases so failover
// happens within seconds.
var replicatedSpec = clustertest.Spec{Metad: 3, Partitiond: 3, Coordinatord: 2, Gateways: 2,
	Env: map[pki.Role][]string{
		pki.RoleMetad:      {"STRATA_METAD_NODE_LEASE_TIMEOUT=3s"},
		pki.RolePartitiond: {"STRATA_PARTITIOND_REPLICA_LAG_TIME_MAX=3s"},
	}}

// faultPlan sizes the replication fault run: the CI size by default, the
// soak size (make soak) with STRATA_SOAK=1.
type faultPlan struct {
	leaderFaults int   // partition-leader faults (kill -9, clean stop, SIGSTOP in turn)
	pauses       int   // of which at least this many are SIGSTOP pauses
	writes       int64 // acknowledged acks=all writes, at least
}

func planFromEnv() faultPlan {
	if os.Getenv("STRATA_SOAK") != "" {
		return faultPlan{leaderFaults: 200, pauses: 100, writes: 1_000_000}
	}
	return faultPlan{leaderFaults: 12, pauses: 4, writes: 20_000}
}

// ackedLog records what writers had acknowledged: payload → partition and
// offset.
type ackedLog struct {
	mu    sync.Mutex
	byVal map[string][2]uint64
	count atomic.Int64
}

func newAckedLog() *ackedLog { return &ackedLog{byVal: map[string][2]uint64{}} }

func (a *ackedLog) add(v string, part int32, off uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.byVal[v]; ok && prev != [2]uint64{uint64(part), off} {
		return fmt.Errorf("%s acknowledged at p%d/%d and again at p%d/%d", v, prev[0], prev[1], part, off)
	}
	a.byVal[v] = [2]uint64{uint64(part), off}
	a.count.Add(1)
	return nil
}

// runWriters starts one writer per partition. With acks all they are
// idempotent: a batch is retried with the same sequence number until it is
// acknowledged, so a record is acknowledged once or never. With acks 1 they
// just move on after a failure (the acks=1 loss measurement). They stop
// when ctx ends and report unexpected errors on errs.
func runWriters(ctx context.Context, addrs []string, topic string, parts int32, acks string, acked *ackedLog) (wait func(), errs chan error) {
	errs = make(chan error, 64)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := client.Dial(ctx, addrs[int(p)%len(addrs)], client.Options{ClientID: fmt.Sprintf("%s-w%d", topic, p), RequestTimeout: 10 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			idempotent := acks == client.AcksAll
			for seq := uint64(1); ctx.Err() == nil; seq++ {
				v := fmt.Sprintf("%s-w%d-%07d", topic, p, seq)
				for ctx.Err() == nil {
					req := client.PublishRequest{Topic: topic, Partition: p, Acks: acks, Message: v,
						ProducerID: fmt.Sprintf("%s-writer-%d", topic, p)}
					if idempotent {
						req.SeqNum, req.Idempotent = seq, true
					}
					ack, err := cl.Publish(ctx, req)
					if err == nil {
						if err := acked.add(v, p, ack.LastOffset); err != nil {
							errs <- err
						}
						break
					}
					if ctx.Err() != nil {
						return
					}
					if e, ok := errcode.As(err); ok && !e.Retryable && e.Class != errcode.ClassRouting {
						errs <- fmt.Errorf("%s: %w", v, err)
						return
					}
					if !idempotent {
						break // acks=1: a failed record is simply not acknowledged
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	return wg.Wait, errs
}

// groupReader consumes topic as a group member the whole time, committing
// every second, and records every payload it saw (at least once).
type groupReader struct {
	mu   sync.Mutex
	seen map[string]int
}

func (g *groupReader) run(ctx context.Context, addr, topic string) {
	cl, err := client.Dial(ctx, addr, client.Options{ClientID: "reader", RequestTimeout: 10 * time.Second})
	if err != nil {
		return
	}
	defer cl.Close()
	k := client.NewConsumer(cl, client.ConsumerOptions{Group: "replicated-readers", Topic: topic, Member: "reader", WaitMS: 200})
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = k.Commit(cctx)
		_ = k.Close(cctx)
	}()
	last := time.Now()
	for ctx.Err() == nil {
		recs, err := k.Poll(ctx)
		if err != nil {
			time.Sleep(100 * time.Millisecond) // failover: rejoin or retry
			continue
		}
		g.mu.Lock()
		for _, r := range recs {
			g.seen[string(r.Payload)]++
		}
		g.mu.Unlock()
		if time.Since(last) > time.Second {
			_ = k.Commit(ctx)
			last = time.Now()
		}
	}
}

// TestReplicationFailover is issue 12's replication proof at CI size (make
// soak runs it at 200 faults and 1M writes): RF 3, min ISR 2, idempotent
// acks=all writers on every partition and a consumer group reading along,
// while partition leaders are killed (kill -9), stopped cleanly (controlled
// shutdown) and paused (SIGSTOP), the metad Raft leader and a coordinatord
// are killed too. Afterwards: every acknowledged record is readable at its
// offset exactly once, no partition stores a record twice, the group saw
// every acknowledged record, and the three replicas of every partition are
// byte-identical below the HWM. The acks=1 loss under the same faults is
// measured and logged, not asserted.
func TestReplicationFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster: skipped with -short")
	}
	plan := planFromEnv()
	c := clustertest.Start(t, replicatedSpec)
	timeout := 6 * time.Minute
	if plan.leaderFaults > 12 {
		timeout = 3 * time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	gw := c.GatewayAddrs()
	admin := framework.Dial(t, ctx, gw[0])
	const topic, lossy, parts = "replicated", "replicated-acks1", 3
	for _, name := range []string{topic, lossy} {
		if _, err := admin.CreateTopic(ctx, client.TopicConfig{Name: name, Partitions: parts}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := admin.Describe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Partitions {
		if len(p.Replicas) != 3 || len(p.ISR) != 3 {
			t.Fatalf("partition %d: replicas %v ISR %v, want 3 and 3", p.ID, p.Replicas, p.ISR)
		}
	}

	acked, lossyAcked := newAckedLog(), newAckedLog()
	wctx, stopWriters := context.WithCancel(ctx)
	waitWriters, errs := runWriters(wctx, gw, topic, parts, client.AcksAll, acked)
	waitLossy, lossyErrs := runWriters(wctx, gw, lossy, parts, client.AcksLeader, lossyAcked)
	reader := &groupReader{seen: map[string]int{}}
	rctx, readerCancel := context.WithCancel(ctx)
	defer readerCancel()
	var readerWG sync.WaitGroup
	readerWG.Add(1)
	go func() { defer readerWG.Done(); reader.run(rctx, gw[1], topic) }()
	waitFor := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for acked.count.Load() < n {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d writes acknowledged", acked.count.Load(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(200)

	// Leader faults, in turn: kill -9, clean stop, SIGSTOP; the SIGSTOP share
	// grows to plan.pauses. Every third fault the metad Raft leader or a
	// coordinatord is killed as well.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kinds := []string{"kill9", "stop", "pause"}
	perFault := max(plan.writes/int64(plan.leaderFaults), 200)
	counts := map[string]int{}
	start := time.Now()
	for i := 0; i < plan.leaderFaults; i++ {
		how := kinds[i%3]
		if counts["pause"] < plan.pauses && plan.leaderFaults-i <= plan.pauses-counts["pause"] {
			how = "pause"
		}
		counts[how]++
		victim := framework.LeaderOf(t, ctx, c, admin, topic, int32(rng.IntN(parts)))
		t.Logf("fault %d: %s %s at %d acknowledged writes (%v)", i, how, victim.Name, acked.count.Load(), time.Since(start).Round(time.Second))
		switch how {
		case "kill9":
			victim.Kill()
		case "stop":
			victim.Stop()
		case "pause":
			victim.Pause()
		}
		switch i % 6 {
		case 2: // the metad Raft leader too
			st, err := framework.Status(ctx, admin)
			if err == nil && st.RaftLeader.ID != "" {
				m := framework.ProcByID(t, c, st.RaftLeader.ID)
				t.Logf("fault %d: kill -9 the metad leader %s", i, m.Name)
				m.Restart()
				m.WaitReady(60 * time.Second)
				counts["metad"]++
			}
		case 5: // and a coordinatord
			co := c.ByRole(pki.RoleCoordinatord)[rng.IntN(2)]
			t.Logf("fault %d: kill -9 %s", i, co.Name)
			co.Restart()
			co.WaitReady(60 * time.Second)
			counts["coordinatord"]++
		}
		waitFor(acked.count.Load() + perFault/2) // writes go on with two replicas
		if how == "pause" {
			victim.Resume()
		} else {
			victim.Start()
			victim.WaitReady(60 * time.Second)
		}
		waitFor(acked.count.Load() + perFault/2)
	}
	waitFor(plan.writes)
	stopWriters()
	waitWriters()
	waitLossy()
	close(errs)
	close(lossyErrs)
	for err := range errs {
		t.Error(err)
	}
	for err := range lossyErrs {
		t.Logf("acks=1 writer: %v", err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d acknowledged acks=all writes, %d faults (%v) in %v", acked.count.Load(), plan.leaderFaults, counts,
		time.Since(start).Round(time.Second))

	// Healed: every replica back in the ISR (so the HWM covers every log).
	framework.Retry(t, ctx, func() error {
		st, err := framework.Status(ctx, admin)
		if err != nil {
			return err
		}
		for _, p := range st.Partitions {
			if (p.Topic == topic || p.Topic == lossy) && len(p.ISR) != 3 {
				return fmt.Errorf("%s/%d ISR %v", p.Topic, p.Partition, p.ISR)
			}
		}
		return nil
	})

	// Every acknowledged record is at its offset; nothing is stored twice.
	cl := framework.Dial(t, ctx, gw[1])
	logs := map[int32][]string{}
	for p := range int32(parts) {
		got := readPartition(t, ctx, cl, topic, p)
		logs[p] = got
		seen := map[string]uint64{}
		for off, v := range got {
			if prev, dup := seen[v]; dup {
				t.Fatalf("partition %d: %s stored at %d and %d", p, v, prev, off)
			}
			seen[v] = uint64(off)
		}
		for v, at := range acked.byVal {
			if int32(at[0]) != p {
				continue
			}
			if off, ok := seen[v]; !ok || off != at[1] {
				t.Fatalf("partition %d: acknowledged %s at %d, stored at %d (found %v)", p, v, at[1], off, ok)
			}
		}
	}

	// The group read every acknowledged record (at least once).
	framework.Eventually(t, 60*time.Second, "the group read every acknowledged record", func() (bool, string) {
		reader.mu.Lock()
		defer reader.mu.Unlock()
		missing := 0
		for v := range acked.byVal {
			if reader.seen[v] == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d acknowledged records not seen by the group", missing)
	})
	readerCancel()
	readerWG.Wait()
	redelivered := 0
	for _, n := range reader.seen {
		redelivered += n - 1
	}
	t.Logf("group: %d distinct records read, %d redelivered (at-least-once across rebalances and failovers)", len(reader.seen), redelivered)

	// The acks=1 loss, measured.
	lost := 0
	for p := range int32(parts) {
		stored := map[string]bool{}
		for _, v := range readPartition(t, ctx, cl, lossy, p) {
			stored[v] = true
		}
		for v, at := range lossyAcked.byVal {
			if int32(at[0]) == p && !stored[v] {
				lost++
			}
		}
	}
	t.Logf("acks=1 under the same faults: %d acknowledged, %d lost (%.4f%%)", lossyAcked.count.Load(), lost,
		100*float64(lost)/float64(max(lossyAcked.count.Load(), 1)))

	// The three copies of every partition are byte-identical below the HWM.
	compareReplicas(t, ctx, c, topic, parts)
	compareReplicas(t, ctx, c, lossy, parts)

	minISRAndStatus(t, ctx, c, admin, cl, topic, parts)
}

// readPartition reads a whole partition (to its HWM) in offset order.
func readPartition(t *testing.T, ctx context.Context, cl *client.Client, topic string, p int32) []string {
	t.Helper()
	var end uint64
	framework.Retry(t, ctx, func() error {
		offs, err := cl.ListOffsets(ctx, topic, p)
		if err == nil && len(offs) == 1 {
			end = offs[0].HWM
		}
		return err
	})
	return framework.ReadAll(t, ctx, cl, topic, p, end)
}

// compareReplicas reads every replica's own copy of each partition
// (replica reads, admin certificate) and checks they hold the same bytes
// below the smallest of their HWMs, and that this covers the leader's HWM.
func compareReplicas(t *testing.T, ctx context.Context, c *clustertest.Cluster, topic string, parts int32) {
	t.Helper()
	src := c.AdminSource()
	copies := map[string]partitionv1.PartitionServiceClient{}
	for _, p := range c.ByRole(pki.RolePartitiond) {
		conn, err := rpc.Dial(p.RPCAddr, rpc.ClientOptions{Source: src, ServerRoles: []pki.Role{pki.RolePartitiond}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		copies[p.NodeID] = partitionv1.NewPartitionServiceClient(conn)
	}
	for part := range parts {
		var ids []string
		images := map[string][]byte{}
		hwms := map[string]uint64{}
		framework.Retry(t, ctx, func() error {
			for id, pc := range copies {
				img, hwm, err := replicaImage(ctx, pc, topic, part)
				if err != nil {
					return fmt.Errorf("%s: %w", id, err)
				}
				images[id], hwms[id] = img, hwm
			}
			// Followers learn the HWM with their next fetch: wait until
			// every copy has caught up with the same HWM.
			var first uint64
			for id, h := range hwms {
				if first == 0 {
					first = h
				}
				if h != first {
					return fmt.Errorf("%s/%d: HWMs differ: %v (%s)", topic, part, hwms, id)
				}
			}
			return nil
		})
		for id := range images {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids[1:] {
			if !bytes.Equal(images[id], images[ids[0]]) {
				t.Fatalf("%s/%d: %s's copy (%d bytes) differs from %s's (%d bytes) below HWM %d", topic, part, id,
					len(images[id]), ids[0], len(images[ids[0]]), hwms[id])
			}
		}
		t.Logf("%s/%d: 3 replicas byte-identical below HWM %d (%d bytes of records)", topic, part, hwms[ids[0]], len(images[ids[0]]))
	}
}

// replicaImage returns the record bytes of one node's copy from offset 0
// to its HWM.
func replicaImage(ctx context.Context, pc partitionv1.PartitionServiceClient, topic string, part int32) ([]byte, uint64, error) {
	var img []byte
	var off, hwm uint64
	for {
		resp, err := pc.Fetch(ctx, &partitionv1.FetchRequest{Topic: topic, Partition: part, Offset: off,
			MaxBytes: 4 << 20, ReplicaRead: true})
		if err != nil {
			return nil, 0, err
		}
		hwm = resp.GetHighWatermark()
		img = append(img, resp.GetRecords()...)
		if resp.GetNextOffset() == off || resp.GetNextOffset() >= hwm {
			return img, hwm, nil
		}
		off = resp.GetNextOffset()
	}
}

// minISRAndStatus: CLUSTER_STATUS reports the HWM LIST_OFFSETS reports; and
// with two of three replicas down acks=all is refused before the append
// every time while the HWM stands still (acks=1 still appends), until the
// replicas return and catch up.
func minISRAndStatus(t *testing.T, ctx context.Context, c *clustertest.Cluster, admin, cl *client.Client, topic string, parts int32) {
	t.Helper()
	st, err := framework.Status(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Partitions {
		if p.Topic != topic {
			continue
		}
		offs, err := cl.ListOffsets(ctx, topic, p.Partition)
		if err != nil || len(offs) != 1 || offs[0].HWM != p.HWM {
			t.Fatalf("partition %d: CLUSTER_STATUS hwm %d, LIST_OFFSETS %+v %v", p.Partition, p.HWM, offs, err)
		}
	}

	survivor := framework.LeaderOf(t, ctx, c, admin, topic, 0)
	var down []*clustertest.Proc
	for _, p := range c.ByRole(pki.RolePartitiond) {
		if p != survivor {
			p.Kill()
			down = append(down, p)
		}
	}
	framework.Retry(t, ctx, func() error {
		for p := range parts {
			_, err := cl.Publish(ctx, client.PublishRequest{Topic: topic, Partition: p, Acks: client.AcksAll, Message: "refused"})
			if errcode.CodeOf(err) != errcode.InsufficientInSyncReplicas.Name() {
				return fmt.Errorf("partition %d: acks=all with two replicas down: %v", p, err)
			}
		}
		return nil
	})
	before := map[int32]uint64{}
	for p := range parts {
		offs, err := cl.ListOffsets(ctx, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = offs[0].HWM
		for i := range 3 {
			if _, err := cl.Publish(ctx, client.PublishRequest{Topic: topic, Partition: p, Acks: client.AcksAll, Message: "refused"}); errcode.CodeOf(err) != errcode.InsufficientInSyncReplicas.Name() {
				t.Fatalf("partition %d attempt %d: acks=all with two replicas down: %v", p, i, err)
			}
			if _, err := cl.Publish(ctx, client.PublishRequest{Topic: topic, Partition: p, Acks: client.AcksLeader, Message: "acks1-" + strconv.Itoa(i)}); err != nil {
				t.Fatalf("partition %d: acks=1 with two replicas down: %v", p, err)
			}
		}
	}
	// (An acks=all publish that raced the ISR shrink may have been appended
	// and then timed out: it is in the log, uncommitted, like the acks=1
	// ones.)
	time.Sleep(500 * time.Millisecond)
	leo := map[int32]uint64{}
	for p := range parts {
		offs, err := cl.ListOffsets(ctx, topic, p)
		if err != nil || offs[0].HWM != before[p] || offs[0].LEO < before[p]+3 {
			t.Fatalf("partition %d with one in-sync replica: HWM %d (was %d), LEO %d: %v", p, offs[0].HWM, before[p], offs[0].LEO, err)
		}
		leo[p] = offs[0].LEO
	}
	clustertest.StartAndWait(down...)
	framework.Retry(t, ctx, func() error {
		for p := range parts {
			offs, err := cl.ListOffsets(ctx, topic, p)
			if err != nil {
				return err
			}
			if offs[0].HWM != leo[p] {
				return fmt.Errorf("partition %d: HWM %d after the replicas returned, want %d", p, offs[0].HWM, leo[p])
			}
		}
		return nil
	})
}
