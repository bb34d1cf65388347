package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// isrOpts is a three-replica cluster with min ISR 2 and a short MaxLag.
// maxLag is 2 s, not less: under -race on a loaded 2-core CI machine a live
// follower's fetch loop can stall for over half a second, leave the ISR and
// rejoin, which adds ALTER_ISR calls the exact counts below do not expect.
func isrOpts() clusterOpts {
	return clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2, maxLag: 2 * time.Second,
		fetchMaxWait: 50 * time.Millisecond}
}

// waitISR waits until metad's ISR is want (replica order) and the leader
// works with it (its answer from metad, or the view, has reached it).
func (c *cluster) waitISR(want ...string) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("ISR %v", want), func() bool {
		st := c.meta.state()
		if !slices.Equal(st.Isr, want) {
			return false
		}
		m := c.mgr(st.Leader)
		if m == nil {
			return false
		}
		isr, _, ok := m.Leading(topic, partID)
		return ok && isr == len(want)
	})
}

// acceptedAlters returns the ISRs of the accepted ALTER_ISR calls.
func (c *cluster) acceptedAlters() [][]string {
	var out [][]string
	for _, a := range c.meta.alterCalls() {
		if a.err == nil {
			out = append(out, a.req.GetIsr())
		}
	}
	return out
}

// wantLeading checks what the leader reports to the role before an
// acks=all append.
func (c *cluster) wantLeading(id string, isr, minISR int) {
	c.t.Helper()
	gi, gm, ok := c.mgr(id).Leading(topic, partID)
	if !ok || gi != isr || gm != minISR {
		c.t.Fatalf("%s Leading = %d, %d, %v; want %d, %d, true", id, gi, gm, ok, isr, minISR)
	}
}

// A follower that stops fetching leaves the ISR after MaxLag through
// ALTER_ISR (a CAS on the leader epoch), and acks=all appends waiting for
// it complete then; with two of three in sync and min ISR 2 the HWM keeps
// advancing. With the leader alone in sync the HWM stops (strict min ISR)
// and the role refuses acks=all before writing.
func TestLaggingFollowerLeavesTheISRAndStrictMinISRFreezesTheHWM(t *testing.T) {
	c := newCluster(t, isrOpts())
	ctx := context.Background()
	leader := c.part("p1")
	c.commitAll("p1", 1, 3, "all-in-sync")

	c.stop("p3")
	waiting := make(chan error, 1)
	go func() {
		_, err := c.appendAll(ctx, "p1", 4, "while-p3-lags")
		if err == nil && slices.Contains(c.meta.isr(), "p3") {
			err = errors.New("acknowledged while p3, which does not hold it, was in the ISR")
		}
		waiting <- err
	}()
	c.waitISR("p1", "p2")
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("acks=all append not acknowledged after p3 left the ISR")
	}
	alters := c.meta.alterCalls()
	if len(alters) != 1 {
		t.Fatalf("%d ALTER_ISR calls, want 1", len(alters))
	}
	if r := alters[0].req; r.GetLeaderEpoch() != 1 || r.GetRequestedBy() != "p1" || r.GetTopic() != topic {
		t.Fatalf("ALTER_ISR %v", r)
	}
	waitFor(t, "the HWM checkpoint after the ISR change", func() bool {
		for _, h := range c.meta.checkpoints() {
			if h.GetLeaderEpoch() == 1 && h.GetLifecycleEpoch() == lifecycle && h.GetHwm() > 0 {
				return true
			}
		}
		return false
	})
	if got := c.member("p1").metrics.ISRShrinks.Load(); got != 1 {
		t.Fatalf("%d ISR shrinks counted", got)
	}
	c.wantLeading("p1", 2, 2)
	c.commitAll("p1", 5, 3, "two-in-sync")
	if h, e := leader.HighWatermark(), c.part("p2").DurableEnd(); h != leader.LogEndOffset() || h > e {
		t.Fatalf("HWM %d with log end %d and p2's durable end %d", h, leader.LogEndOffset(), e)
	}

	// The leader alone: the HWM freezes.
	c.stop("p2")
	c.waitISR("p1")
	c.wantLeading("p1", 1, 2)
	frozen := leader.HighWatermark()
	c.appendOne("p1", "uncommitted-0", "uncommitted-1")
	end := leader.LogEndOffset()
	if err := leader.WaitDurable(ctx, end); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * c.opts.maxLag) // ISR passes, fetch rounds: nothing may move it
	if h := leader.HighWatermark(); h != frozen {
		t.Fatalf("HWM moved from %d to %d with only the leader in sync (min ISR 2)", frozen, h)
	}
	_, err := c.appendAll(ctx, "p1", 8, "refused")
	wantCode(t, err, errcode.InsufficientInSyncReplicas)
	if leader.LogEndOffset() != end {
		t.Fatal("a refused acks=all batch was written")
	}
	st := c.mgr("p1").Stats()
	if len(st) != 1 || st[0].ISR != 1 || st[0].Replicas != 3 || len(st[0].Followers) != 2 {
		t.Fatalf("stats %+v", st)
	}
	for _, f := range st[0].Followers {
		if f.InSync || f.LagRecords == 0 || f.LagSeconds <= 0 {
			t.Fatalf("stopped follower's stats %+v", f)
		}
	}
}

// A follower that comes back (a new manager on its storage) catches up,
// rejoins through ALTER_ISR, and counts for the HWM again: first while the
// leader is alone in sync (the frozen HWM moves once it rejoins), then as
// the third member, whose report an acks=all append waits for.
func TestReturningFollowerRejoinsTheISRAndCountsForTheHWM(t *testing.T) {
	c := newCluster(t, isrOpts())
	leader := c.part("p1")
	c.commitAll("p1", 1, 3, "all-in-sync")
	c.stop("p3")
	c.waitISR("p1", "p2")
	c.commitAll("p1", 4, 3, "two-in-sync")
	c.stop("p2")
	c.waitISR("p1")
	frozen := leader.HighWatermark()
	for range 5 {
		c.appendOne("p1", "while-alone")
	}
	if h := leader.HighWatermark(); h != frozen {
		t.Fatalf("HWM moved to %d with the leader alone in sync", h)
	}

	// p2 restarts on its storage: it reaches the HWM, rejoins, and the HWM
	// moves over everything both hold.
	c.restart("p2", true)
	c.waitISR("p1", "p2")
	c.wantLeading("p1", 2, 2)
	end := leader.LogEndOffset()
	waitFor(t, "the HWM to move again", func() bool { return leader.HighWatermark() == end })
	if d := sameLog(t, leader, c.part("p2")); d != "" {
		t.Fatalf("p2: %s", d)
	}

	// p3 comes back the same way.
	c.restart("p3", false)
	c.waitISR("p1", "p2", "p3")
	c.wantLeading("p1", 3, 2)
	if got := c.member("p1").metrics.ISRExpands.Load(); got != 2 {
		t.Fatalf("%d ISR expansions counted, want 2", got)
	}
	if d := sameLog(t, leader, c.part("p3")); d != "" {
		t.Fatalf("p3: %s", d)
	}

	// It counts: with its reports held (and metad refusing to drop it, so
	// MaxLag cannot take it out meanwhile), an acks=all append waits.
	c.meta.refuseDropping("p3")
	c.member("p3").gate.close()
	res := c.appendAllAsync("p1", 7, "needs-p3")
	waitFor(t, "p2 to hold the batch", func() bool { return c.part("p2").DurableEnd() > end })
	stillWaiting(t, res, 2*c.opts.maxLag, "without p3's report")
	c.member("p3").gate.open()
	acknowledged(t, res, "after p3 reported")
	if !slices.Equal(c.meta.isr(), []string{"p1", "p2", "p3"}) {
		t.Fatalf("ISR %v", c.meta.isr())
	}
}

// KAFKA-7128: a new leader's HWM can lag the one its predecessor
// acknowledged acks=all writes at (a follower learns the HWM with its next
// fetch). A follower that reached that lagging HWM but not the new
// leader's log end at its election must not join the ISR: it could be
// elected next without acknowledged records. It joins once it reached the
// offset where the leader's epoch starts.
func TestFollowerRejoinsOnlyPastTheLeaderEpochStart(t *testing.T) {
	c := newCluster(t, isrOpts())
	c.commitAll("p1", 1, 8, "committed")
	waitFor(t, "p3 to hold the log", func() bool { return c.part("p3").DurableEnd() == 8 })
	c.stop("p3")
	c.waitISR("p1", "p2")
	c.commitAll("p1", 9, 2, "acknowledged") // [8, 10): on p1 and p2, not p3
	c.stop("p1")
	// p2 has not yet seen the answer that carries HWM 10 when p1 dies.
	p2 := c.part("p2")
	p2.LowerHWM(8)

	c.elect("p2", []string{"p2"}) // p1 dead, p3 out of sync: metad's RECONCILE
	if h, leo := p2.HighWatermark(), p2.LogEndOffset(); h != 8 || leo != 10 {
		t.Fatalf("new leader: HWM %d, log end %d; want 8 and 10", h, leo)
	}
	// p3 comes back; its first fetch (offset 8, the leader's HWM) is
	// answered with [8, 10), and its next one, reporting 10, is held.
	c.member("p3").gate.allow(1)
	c.restart("p3", false)
	waitFor(t, "p3 to receive [8, 10)", func() bool { return c.part("p3").DurableEnd() == 10 })
	time.Sleep(c.opts.maxLag) // several ISR passes while its reported offset is 8
	for _, isr := range c.acceptedAlters() {
		if slices.Contains(isr, "p3") {
			t.Fatalf("p3 joined the ISR %v having reported offset 8, below the leader's epoch start 10", isr)
		}
	}
	c.member("p3").gate.open()
	c.waitISR("p2", "p3")
	waitFor(t, "the HWM to reach the log end", func() bool { return p2.HighWatermark() == 10 })
}

// The ISR the leader works with is metad's answer: a refused ALTER_ISR
// leaves it unchanged (counted as a failure) and is proposed again.
func TestRefusedISRChangeIsRetried(t *testing.T) {
	c := newCluster(t, isrOpts())
	var refusing atomic.Bool
	refusing.Store(true)
	c.meta.setAlterHook(func(context.Context, *metav1.AlterIsrRequest) error {
		if refusing.Load() {
			return errcode.ClusterMetadataUnavailable.New("metad refuses ISR changes in this test")
		}
		return nil
	})
	c.stop("p3")
	waitFor(t, "two refused ALTER_ISR calls", func() bool { return len(c.meta.alterCalls()) >= 2 })
	c.wantLeading("p1", 3, 2)
	if got := c.member("p1").metrics.ISRChangeFailures.Load(); got < 2 {
		t.Fatalf("%d failed ISR changes counted", got)
	}
	refusing.Store(false)
	c.waitISR("p1", "p2")
	c.wantLeading("p1", 2, 2)
}

// A follower that keeps fetching but falls behind (one small batch per
// fetch, a fetch every 50 ms, while the leader appends faster) is not
// caught up: it leaves the ISR after MaxLag like a silent one (Kafka's
// replica.lag.time.max.ms counts time since the follower last reached the
// leader's log end, not since it last fetched).
func TestFollowerFetchingButFallingBehindLeavesTheISR(t *testing.T) {
	o := isrOpts()
	o.partitionMaxBytes = map[string]int{"p3": 1} // one batch per fetch
	c := newCluster(t, o)
	c.commitAll("p1", 1, 2, "all-in-sync")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	halt := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	t.Cleanup(halt)
	gate := c.member("p3").gate
	gate.allow(1)
	wg.Add(2)
	go func() { // p3's fetches: one every 50 ms
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				gate.allow(1)
			}
		}
	}()
	go func() { // the leader: a batch every 5 ms
		defer wg.Done()
		leader := c.part("p1")
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := leader.Append(context.Background(), &partition.AppendRequest{LifecycleEpoch: lifecycle,
				Acks: partition.AcksLeader, Records: recordSet(t, "fast"), RecordCount: 1}); err != nil {
				t.Errorf("append: %v", err)
				return
			}
		}
	}()
	c.waitISR("p1", "p2")
	if n := c.member("p3").metrics.FetchesMade.Load(); n < 5 {
		t.Fatalf("p3 made only %d fetches: it was not fetching", n)
	}
	halt()
	gate.open()
	// Unthrottled, it catches up and rejoins.
	c.waitISR("p1", "p2", "p3")
}

// A follower is caught up when it reaches the leader's log end, or what
// the leader held at its previous fetch: under steady appends a follower
// that keeps up is rarely at the very end when it reports. The lag it is
// judged by (and Stats reports) is the time since then. Checked on the
// leader's bookkeeping with a controlled clock.
func TestCaughtUpMeansReachingTheEndOfThePreviousFetch(t *testing.T) {
	var mu sync.Mutex
	now := t0
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	at := func(d time.Duration) time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = t0.Add(d)
		return now
	}
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2"}, stopped: []string{"p2"}, now: clock})
	ls := c.mgr("p1").leader(key{topic, partID})
	lag := func() (records uint64, seconds float64) {
		t.Helper()
		st := c.mgr("p1").Stats()
		f := st[0].Followers[0]
		return f.LagRecords, f.LagSeconds
	}
	leader := c.part("p1")
	fill := func(n int) {
		t.Helper()
		for range n {
			c.appendOne("p1", "r")
		}
	}

	fill(10)
	ls.recordFetch("p2", 5, at(time.Second)) // behind, and no earlier fetch
	if r, s := lag(); r != 5 || s != 1 {
		t.Fatalf("after the first fetch: lag %d records, %v s; want 5, 1", r, s)
	}
	fill(10)
	ls.recordFetch("p2", 10, at(2*time.Second)) // reached the end of its previous fetch
	if r, s := lag(); r != 10 || s != 1 {
		t.Fatalf("having reached the previous fetch's end: lag %d records, %v s; want 10, 1 (caught up at 1 s)", r, s)
	}
	ls.recordFetch("p2", 12, at(3*time.Second)) // short of the previous fetch's end (20)
	if r, s := lag(); r != 8 || s != 2 {
		t.Fatalf("short of the previous fetch's end: lag %d records, %v s; want 8, 2", r, s)
	}
	ls.recordFetch("p2", leader.DurableEnd(), at(4*time.Second))
	if r, s := lag(); r != 0 || s != 0 {
		t.Fatalf("at the log end: lag %d records, %v s; want 0, 0", r, s)
	}
}

// While an ALTER_ISR adding a follower is in flight, the HWM counts the
// follower too (the larger of the two sets): metad may already have it in
// the ISR, electable, so nothing it lacks may be committed meanwhile.
func TestISRExpansionInFlightCountsTheJoiningFollower(t *testing.T) {
	c := newCluster(t, isrOpts())
	c.commitAll("p1", 1, 2, "all-in-sync")
	c.stop("p3")
	c.waitISR("p1", "p2")

	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	c.meta.setAlterHook(func(ctx context.Context, req *metav1.AlterIsrRequest) error {
		if slices.Contains(req.GetIsr(), "p3") {
			once.Do(func() { close(entered) })
			select { // metad is slow to commit the expansion
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	c.restart("p3", false)
	select {
	case <-entered:
	case <-time.After(waitLimit):
		t.Fatal("p3 was not proposed for the ISR")
	}
	c.member("p3").gate.close() // p3 reports nothing more
	res := c.appendAllAsync("p1", 3, "while-joining")
	waitFor(t, "p2 to hold the batch", func() bool { return c.part("p2").DurableEnd() == 3 })
	stillWaiting(t, res, 2*c.opts.fetchMaxWait, "while p3, joining the ISR, had not reported the batch")
	close(release)
	c.waitISR("p1", "p2", "p3")
	c.member("p3").gate.open()
	acknowledged(t, res, "after p3 joined and reported")
}

// The role applies views from its metadata cache, which can trail metad: a
// reconcile pass that started before an ALTER_ISR committed applies its
// older view after the leader has metad's answer. That view must not undo
// the change: after an expansion, metad has the new member in the ISR (it
// may elect it), so the HWM must keep counting it until a view shows the
// ISR metad answered. Views after that are taken as they come.
func TestStaleViewDoesNotUndoAnAcceptedISRChange(t *testing.T) {
	c := newCluster(t, isrOpts())
	c.commitAll("p1", 1, 2, "all-in-sync")
	c.stop("p3")
	c.waitISR("p1", "p2")
	stale := c.meta.state()
	c.meta.watchOff.Store(true) // the views trail: the answer comes first
	c.restart("p3", false)
	c.waitISR("p1", "p2", "p3")

	leader := c.part("p1")
	staleView := Assignment{Part: leader, Topic: topic, Partition: partID, LifecycleEpoch: lifecycle,
		LeaderEpoch: stale.LeaderEpoch, Leader: "p1", Replicas: stale.Replicas, ISR: stale.Isr, MinISR: 2}
	c.pubMu.Lock()
	c.mgr("p1").Apply(staleView)
	c.pubMu.Unlock()
	c.wantLeading("p1", 3, 2)

	// metad refuses to drop p3 meanwhile, so MaxLag cannot take it out.
	c.meta.refuseDropping("p3")
	c.member("p3").gate.close()
	res := c.appendAllAsync("p1", 3, "needs-p3")
	waitFor(t, "p2 to hold the batch", func() bool { return c.part("p2").DurableEnd() == 3 })
	stillWaiting(t, res, 2*c.opts.fetchMaxWait, "without p3, which metad has in the ISR")
	c.member("p3").gate.open()
	acknowledged(t, res, "after p3 reported")

	// A view showing metad's ISR confirms it; a later change by metad
	// itself (RECONCILE dropping a member) is then taken.
	c.meta.setAlterHook(nil)
	c.meta.watchOff.Store(false)
	c.publish()
	c.wantLeading("p1", 3, 2)
	c.setISR("p1", "p2")
	c.wantLeading("p1", 2, 2)
}

// refuseDropping makes metad refuse every ISR change that leaves id out.
func (f *fakeMeta) refuseDropping(id string) {
	f.setAlterHook(func(_ context.Context, req *metav1.AlterIsrRequest) error {
		if !slices.Contains(req.GetIsr(), id) {
			return errcode.ClusterMetadataUnavailable.New("metad refuses ISR changes without " + id + " in this test")
		}
		return nil
	})
}
