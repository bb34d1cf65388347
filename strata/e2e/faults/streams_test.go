package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
)

// streamWriters append to aggregates agg-0..n-1 of topic, each version's
// payload a function of (aggregate, version), until stop. After any failure
// a writer asks STREAM_VERSION where the stream stands (an append in flight
// at a kill may or may not have been stored) and goes on from there.
type streamWriters struct {
	topic  string
	mu     sync.Mutex
	acked  map[string]uint64 // highest acknowledged version per aggregate
	count  atomic.Int64
	failed atomic.Int64
	wg     sync.WaitGroup
}

func streamPayload(agg string, v uint64) string { return fmt.Sprintf("%s-v%d", agg, v) }

func startStreamWriters(ctx context.Context, t *testing.T, addrs []string, topic string, n int) *streamWriters {
	w := &streamWriters{topic: topic, acked: map[string]uint64{}}
	for i := range n {
		agg := fmt.Sprintf("agg-%d", i)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			cl, err := client.Dial(ctx, addrs[i%len(addrs)], client.Options{ClientID: agg, RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer cl.Close()
			next := uint64(1)
			for ctx.Err() == nil {
				res, err := cl.AppendStream(ctx, client.Event{Topic: topic, Key: agg, Version: next, EventType: "Tick",
					Payload: []byte(streamPayload(agg, next))})
				if err == nil {
					if res.Version != next {
						t.Errorf("%s: appended %d, answer says %d", agg, next, res.Version)
						return
					}
					w.mu.Lock()
					w.acked[agg] = next
					w.mu.Unlock()
					w.count.Add(1)
					next++
					continue
				}
				w.failed.Add(1)
				if e, ok := errcode.As(err); ok && e.Code == errcode.VersionConflict.Name() {
					var cur uint64
					fmt.Sscan(e.Field("current"), &cur)
					next = cur + 1
					continue
				}
				for ctx.Err() == nil {
					cur, err := cl.StreamVersion(ctx, topic, agg)
					if err == nil {
						next = cur + 1
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	return w
}

// waitForVersion waits until agg has version v acknowledged: the total
// count says nothing about one aggregate, whose writer may start last.
func (w *streamWriters) waitForVersion(t *testing.T, agg string, v uint64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		w.mu.Lock()
		got := w.acked[agg]
		w.mu.Unlock()
		if got >= v {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: version %d of %d acknowledged", agg, got, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *streamWriters) waitFor(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for w.count.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d appends acknowledged", w.count.Load(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check reads every aggregate back: versions dense from 1, none above the
// head twice, every acknowledged version present with its payload.
func (w *streamWriters) check(t *testing.T, ctx context.Context, cl *client.Client) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for agg, acked := range w.acked {
		// An append in flight when the writers stopped may still become
		// committed: the version is read first, the history may only have
		// more.
		v, err := cl.StreamVersion(ctx, w.topic, agg)
		if err != nil {
			t.Fatal(err)
		}
		var r *client.StreamRead
		framework.Retry(t, ctx, func() (err error) {
			r, err = cl.ReadStreamHistory(ctx, w.topic, agg, 1, 1024)
			return err
		})
		var events []uint64
		from := uint64(1)
		for {
			for i, ev := range r.Events {
				want := from + uint64(i)
				if ev.AggregateVersion != want || string(ev.Payload) != streamPayload(agg, want) {
					t.Fatalf("%s: event %d is version %d payload %q", agg, want, ev.AggregateVersion, ev.Payload)
				}
				events = append(events, want)
			}
			if !r.HasMore {
				break
			}
			from = r.NextVersion
			framework.Retry(t, ctx, func() (err error) {
				r, err = cl.ReadStreamHistory(ctx, w.topic, agg, from, 1024)
				return err
			})
		}
		if uint64(len(events)) < acked {
			t.Fatalf("%s: %d events read back, %d acknowledged", agg, len(events), acked)
		}
		if uint64(len(events)) < v || r.HeadVersion != uint64(len(events)) {
			t.Fatalf("%s: STREAM_VERSION %d before the read, %d events, head %d", agg, v, len(events), r.HeadVersion)
		}
	}
}

// streamsSurviveKill9 appends to several aggregates, saves a snapshot, kills
// every process with SIGKILL during the appends, restarts them on the same
// data and checks that every acknowledged version is there, none doubled or
// skipped, the snapshot kept, and that appends go on from the head.
func streamsSurviveKill9(t *testing.T, c framework.Killable) {
	ctx, cl := framework.Connect(t, c, 3*time.Minute)
	const topic = "kill9-streams"
	framework.CreateTopics(t, ctx, cl, "topic="+topic+" partitions=2 event_sourcing=true")
	wctx, stop := context.WithCancel(ctx)
	w := startStreamWriters(wctx, t, framework.ClientAddrs(c), topic, 4)
	w.waitFor(t, 100)
	w.waitForVersion(t, "agg-0", 3)
	if err := cl.SaveSnapshot(ctx, topic, "agg-0", 3, []byte(`{"at":3}`)); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, 200)
	cl.Close()
	c.Kill()
	stop()
	w.wg.Wait()
	t.Logf("%d appends acknowledged, %d failed around the kill", w.count.Load(), w.failed.Load())
	c.Start()

	cl = framework.Dial(t, ctx, c.Gateways()[0].ClientAddr)
	w.check(t, ctx, cl)
	var snap *client.Snapshot
	framework.Retry(t, ctx, func() (err error) {
		snap, err = cl.ReadSnapshot(ctx, topic, "agg-0")
		return err
	})
	if snap == nil || snap.Version != 3 || snap.Payload != `{"at":3}` {
		t.Fatalf("snapshot after restart: %+v", snap)
	}
	head, err := cl.StreamVersion(ctx, topic, "agg-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AppendStream(ctx, client.Event{Topic: topic, Key: "agg-1", Version: head + 1, Payload: []byte(streamPayload("agg-1", head+1))}); err != nil {
		t.Fatalf("append after restart: %v", err)
	}
}

// TestStreamLeaderFailover: RF 3, appends running, a snapshot saved (so on
// every in-sync replica), then the aggregate partition's leader is killed
// with SIGKILL. The new leader answers the same versions and the snapshot,
// appends continue from the head, and after the old leader is back every
// acknowledged version is present exactly once.
func TestStreamLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster: skipped with -short")
	}
	c := clustertest.Start(t, replicatedSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gw := c.GatewayAddrs()
	admin := framework.Dial(t, ctx, gw[0])
	const topic = "streams-failover"
	framework.CreateTopics(t, ctx, admin, "topic="+topic+" partitions=1 event_sourcing=true")
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := startStreamWriters(wctx, t, gw, topic, 4)
	w.waitFor(t, 150)
	w.waitForVersion(t, "agg-2", 5)
	if err := admin.SaveSnapshot(ctx, topic, "agg-2", 5, []byte(`{"at":5}`)); err != nil {
		t.Fatal(err)
	}
	victim := framework.LeaderOf(t, ctx, c, admin, topic, 0)
	before := w.count.Load()
	t.Logf("kill -9 %s at %d acknowledged appends", victim.Name, before)
	victim.Kill()
	w.waitFor(t, before+150)

	if newLeader := framework.LeaderOf(t, ctx, c, admin, topic, 0); newLeader.Name == victim.Name {
		t.Fatalf("leader still %s", victim.Name)
	}
	var snap *client.Snapshot
	framework.Retry(t, ctx, func() (err error) {
		snap, err = admin.ReadSnapshot(ctx, topic, "agg-2")
		return err
	})
	if snap == nil || snap.Version != 5 {
		t.Fatalf("snapshot on the new leader: %+v", snap)
	}
	victim.Start()
	victim.WaitReady(60 * time.Second)
	w.waitFor(t, w.count.Load()+50)
	stop()
	w.wg.Wait()
	t.Logf("%d appends acknowledged, %d failed or conflicted around the failover", w.count.Load(), w.failed.Load())
	w.check(t, ctx, admin)
}

// retentionSpec is a small process cluster whose partition server rolls
// 4 KiB segments and runs retention every 300 ms.
var retentionSpec = clustertest.Spec{Metad: 1, Partitiond: 1, Coordinatord: 1, Gateways: 1,
	Env: map[pki.Role][]string{pki.RolePartitiond: {"STRATA_PARTITIOND_SEGMENT_BYTES=4096", "STRATA_PARTITIOND_RETENTION_CHECK_INTERVAL=300ms"}}}

// TestStreamRetentionGapProof: on an aggregate replay topic with a short
// retention (retention_bytes=1: every closed segment goes), retention
// removes the head of one match and all of another. AGGREGATE_REPLAY_PROOF
// reports the retained gap with the diagnostic proof JSON; after the
// partition server is killed with SIGKILL and restarted, the removed
// match keeps its version (no version 1 again) and the proof still says
// retention_gap.
func TestStreamRetentionGapProof(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster: skipped with -short")
	}
	start := time.Now()
	c := clustertest.Start(t, retentionSpec)
	t.Logf("cluster up after %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := framework.Dial(t, ctx, c.GatewayAddrs()[0])
	const topic = "retained-matches"
	framework.CreateTopics(t, ctx, cl, "topic="+topic+" partitions=1 event_sourcing=true aggregate_replay=true idempotent=true retention_bytes=1")
	big := make([]byte, 1500)
	appendEv := func(match string, v uint64, payload []byte) {
		t.Helper()
		if _, err := cl.AppendStream(ctx, client.Event{Topic: topic, Key: match, Version: v, EventID: fmt.Sprintf("%s-%d", match, v),
			ProducerID: "p", SeqNum: v, Payload: payload}); err != nil {
			t.Fatalf("append %s %d: %v", match, v, err)
		}
	}
	for v := uint64(1); v <= 3; v++ {
		appendEv("m1", v, big)
		appendEv("gone", v, big)
	}
	for v := uint64(1); v <= 8; v++ {
		appendEv("filler", v, big)
	}
	appendEv("m1", 4, []byte("small"))
	appendEv("m1", 5, []byte("small"))

	gapOf := func(match string) *client.ReplayProof {
		t.Helper()
		_, err := cl.AggregateReplayProof(ctx, topic, match, client.ProofOptions{})
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.AggregateProofRetentionGap.Name() || e.Field("reason") != "retention_removed" {
			return nil
		}
		diag, ok := client.ProofOf(err)
		if !ok {
			t.Fatalf("%s: retention gap without the diagnostic proof: %v", match, err)
		}
		return diag
	}
	var m1 *client.ReplayProof
	// Retention runs during the appends too; once they are done its next
	// pass removes every closed segment: m1's versions 1-3, all of gone.
	// Versions 1-3 sit in closed segments; 4 and 5 usually stay in the
	// active one, but retention may roll an idle active segment between
	// the two small appends (CI saw 1-4 removed), so the gap is 1-3 or 1-4.
	framework.Eventually(t, 60*time.Second, "retention removes versions 1-3 of m1", func() (bool, string) {
		m1 = gapOf("m1")
		return m1 != nil && m1.MissingTo >= 3, fmt.Sprintf("proof %+v", m1)
	})
	if m1.Status != "aggregate_proof_retention_gap" || m1.MissingFrom != 1 || m1.MissingTo > 4 || m1.FirstRetainedSequence != m1.MissingTo+1 ||
		m1.HeadSequence != 5 || m1.LogStartOffset == 0 || m1.MatchID != "m1" || m1.ProofHWM == 0 {
		t.Fatalf("m1 diagnostic proof %+v", m1)
	}
	checkGone := func(when string) {
		t.Helper()
		var g *client.ReplayProof
		framework.Eventually(t, 60*time.Second, "proof of gone "+when, func() (bool, string) {
			g = gapOf("gone")
			return g != nil && g.FirstRetainedSequence == 0, fmt.Sprintf("proof %+v", g)
		})
		if g.MissingFrom != 1 || g.MissingTo != 3 || g.HeadSequence != 3 || g.FirstRetainedSequence != 0 {
			t.Fatalf("gone %s: diagnostic proof %+v", when, g)
		}
		v, err := cl.StreamVersion(ctx, topic, "gone")
		if err != nil || v != 3 {
			t.Fatalf("gone %s: version %d %v", when, v, err)
		}
		_, err = cl.AppendStream(ctx, client.Event{Topic: topic, Key: "gone", Version: 1, EventID: "again", ProducerID: "p", SeqNum: 99, Payload: []byte("x")})
		framework.CheckErr(t, "version 1 of gone "+when, err, *framework.Want("version_conflict", errcode.ClassConflict, false, "current", "3"))
	}
	checkGone("after retention")
	t.Logf("retention gap proven after %v", time.Since(start).Round(time.Millisecond))

	for _, p := range c.Procs {
		if p.Role == pki.RolePartitiond {
			p.Kill()
			p.Start()
			p.WaitReady(60 * time.Second)
		}
	}
	cl = framework.Dial(t, ctx, c.GatewayAddrs()[0])
	framework.Retry(t, ctx, func() error {
		_, err := cl.StreamVersion(ctx, topic, "gone")
		return err
	})
	checkGone("after kill -9 and restart")
	t.Logf("restarted and checked after %v", time.Since(start).Round(time.Millisecond))
}
