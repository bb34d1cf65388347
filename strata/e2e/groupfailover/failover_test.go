package groupfailover

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
)

// Group failover timings shared by the in-process and the process runner:
// a short session timeout (configured on coordinatord) keeps the test in
// seconds; consumers heartbeat well inside it.
const (
	failoverSession   = 2 * time.Second
	failoverExpiry    = 200 * time.Millisecond
	failoverHeartbeat = 200 * time.Millisecond
)

// processed records every processing of a record: by whom and when.
type processed struct {
	mu    sync.Mutex
	seen  map[string][]time.Time
	total int
}

func (p *processed) add(recs []string) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range recs {
		p.seen[v] = append(p.seen[v], now)
		p.total++
	}
}

func (p *processed) distinct() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// consumer is one consumer of the failover test: its own connection, a
// group Consumer and the loop that polls, processes and then commits.
type consumer struct {
	name    string
	cl      *client.Client
	k       *client.Consumer
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	lastErr error
	// dieAfter > 0: after processing this many non-empty batches the member
	// dies without committing the last one (its connection is closed, so it
	// stops heartbeating); lastBatch holds that uncommitted batch.
	dieAfter  int
	lastBatch []string
	diedAt    time.Time
	// ids are the member ids the consumer had (several: it lost its
	// membership and joined as a new member).
	ids []string
}

func (m *consumer) noteID() {
	id := m.k.Member()
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != m.name && (len(m.ids) == 0 || m.ids[len(m.ids)-1] != id) {
		m.ids = append(m.ids, id)
	}
}

func (m *consumer) memberIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ids)
}

func (m *consumer) run(ctx context.Context, out *processed) {
	defer close(m.done)
	batches := 0
	for {
		select {
		case <-m.stop:
			m.setErr(m.k.Commit(ctx))
			return
		default:
		}
		recs, err := m.k.Poll(ctx)
		m.noteID()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Fencing answers schedule a rejoin inside the Consumer; anything
			// else is retried and kept for the failure message.
			m.setErr(err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		vals := make([]string, len(recs))
		for i, r := range recs {
			vals[i] = string(r.Payload)
		}
		out.add(vals)
		if len(vals) > 0 {
			batches++
			if m.dieAfter > 0 && batches >= m.dieAfter {
				m.lastBatch, m.diedAt = vals, time.Now()
				m.cl.Close()
				return
			}
		}
		// Commit after processing; a GEN_MISMATCH here (the group moved on)
		// makes the Consumer rejoin and re-read from the committed offsets.
		if err := m.k.Commit(ctx); err != nil && ctx.Err() == nil {
			m.setErr(err)
		}
	}
}

func (m *consumer) setErr(err error) {
	if err != nil {
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
	}
}

func (m *consumer) err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

// converged reports whether members share one generation above minGen whose
// assignments are disjoint and cover partitions 0..n-1. Members of one
// generation that overlap or leave a partition out fail the test: that is the
// assignment invariant itself.
func converged(t *testing.T, members []*consumer, n int32, minGen int64) (int64, bool) {
	t.Helper()
	gen := members[0].k.Generation()
	if gen <= minGen {
		return 0, false
	}
	owner := map[int32]string{}
	for _, m := range members {
		if m.k.Generation() != gen {
			return 0, false
		}
		for _, p := range m.k.Assignments() {
			if prev, dup := owner[p]; dup {
				t.Fatalf("generation %d: partition %d assigned to %s and %s", gen, p, prev, m.name)
			}
			owner[p] = m.name
		}
	}
	// Generations match locally; the assignment must then be complete.
	if int32(len(owner)) != n {
		return 0, false
	}
	for p := int32(0); p < n; p++ {
		if _, ok := owner[p]; !ok {
			return 0, false
		}
	}
	return gen, true
}

func waitConverged(t *testing.T, ctx context.Context, members []*consumer, n int32, minGen int64) int64 {
	t.Helper()
	for {
		if gen, ok := converged(t, members, n, minGen); ok {
			return gen
		}
		if ctx.Err() != nil {
			var state []string
			for _, m := range members {
				state = append(state, fmt.Sprintf("%s gen=%d parts=%v err=%v", m.name, m.k.Generation(), m.k.Assignments(), m.err()))
			}
			t.Fatalf("group never converged above generation %d: %s", minGen, strings.Join(state, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createTopic creates topic with parts partitions, retrying: CREATE patches
// an existing topic, so retrying is safe, and right after start the
// partition servers may not be live in metad yet.
func createTopic(t *testing.T, ctx context.Context, cl *client.Client, topic string, parts int32) {
	t.Helper()
	framework.Retry(t, ctx, func() error {
		_, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: int(parts)})
		return err
	})
}

// publishWave publishes n keyed records "<prefix>-<i>" (acks=1) and returns
// their payloads.
func publishWave(t *testing.T, ctx context.Context, cl *client.Client, topic, prefix string, n int) []string {
	t.Helper()
	prod := client.NewProducer(cl, client.ProducerOptions{Acks: "1"})
	var res []*client.Result
	var vals []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%04d", prefix, i)
		r, err := prod.Send(ctx, client.Message{Topic: topic, Partition: -1, Key: v, Value: []byte(v)})
		if err != nil {
			t.Fatal(err)
		}
		res, vals = append(res, r), append(vals, v)
	}
	if err := prod.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return vals
}

// failover is issue 6's three-consumer scenario: three consumers (one
// connection each, spread over the gateways) join a group, get disjoint
// assignments covering every partition and consume with commit-after-process;
// one dies after processing a batch it never commits and stops heartbeating;
// after the session timeout the two others own every partition, and every
// record is processed (0 missing) with duplicates only after the death —
// at least the dead member's uncommitted batch, which its successor re-reads
// from the committed offset.
func failover(t *testing.T, c framework.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gateways := framework.ClientAddrs(c)
	const topic, group, parts, wave = "failover", "g-failover", int32(6), 300
	admin := framework.Dial(t, ctx, gateways[0])
	createTopic(t, ctx, admin, topic, parts)
	for _, gw := range gateways {
		framework.WaitTopic(t, ctx, framework.Dial(t, ctx, gw), topic)
	}

	out := &processed{seen: map[string][]time.Time{}}
	var members []*consumer
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("c%d", i+1)
		cl, err := client.Dial(ctx, gateways[i%len(gateways)], client.Options{ClientID: name})
		if err != nil {
			t.Fatal(err)
		}
		m := &consumer{name: name, cl: cl, stop: make(chan struct{}), done: make(chan struct{}),
			k: client.NewConsumer(cl, client.ConsumerOptions{Group: group, Topic: topic, MaxRecords: 10,
				WaitMS: 100, HeartbeatInterval: failoverHeartbeat})}
		members = append(members, m)
	}
	victim, survivors := members[2], members[:2]
	// The victim dies on its third non-empty batch: two committed, one not.
	victim.dieAfter = 3
	t.Cleanup(func() {
		cancel()
		for _, m := range members {
			select {
			case <-m.stop:
			default:
				close(m.stop)
			}
			<-m.done
			// Stops the heartbeat goroutine; the leave fails on the victim's
			// closed connection, which is fine.
			m.k.Close(context.Background())
			m.cl.Close()
		}
	})
	// Join while the topic is empty: the joins' rebalances then re-deliver
	// nothing, so every duplicate below belongs to the failover.
	start := time.Now()
	for _, m := range members {
		go m.run(ctx, out)
	}
	// Watch the group while it forms: three consumers must make exactly three
	// members. A consumer that loses its new member id (say, when SYNC_GROUP
	// races another join) joins again as a fourth member and leaves an orphan
	// holding partitions until its session expires.
	watchStop, watchDone := make(chan struct{}), make(chan map[string]bool, 1)
	go func() {
		ids := map[string]bool{}
		defer func() { watchDone <- ids }()
		for {
			if st, err := admin.GroupStatus(ctx, group); err == nil {
				for _, m := range st.Members {
					ids[m.MemberID] = true
				}
			}
			select {
			case <-watchStop:
				return
			case <-ctx.Done(): // the test failed; nobody reads watchDone
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	gen1 := waitConverged(t, ctx, members, parts, 0)
	close(watchStop)
	if ids := <-watchDone; len(ids) != len(members) {
		t.Errorf("3 consumers made the members %v while the group formed", slices.Sorted(maps.Keys(ids)))
	}
	t.Logf("3 members converged on generation %d in %v: %s=%v %s=%v %s=%v", gen1, time.Since(start).Round(time.Millisecond),
		members[0].name, members[0].k.Assignments(), members[1].name, members[1].k.Assignments(), victim.name, victim.k.Assignments())

	all := publishWave(t, ctx, admin, topic, "w1", wave)
	select {
	case <-victim.done:
	case <-ctx.Done():
		t.Fatalf("victim never processed 3 batches (processed %d records, err %v)", out.distinct(), victim.err())
	}
	killAt := victim.diedAt
	if len(victim.lastBatch) == 0 {
		t.Fatal("victim died without an uncommitted batch")
	}

	gen2 := waitConverged(t, ctx, survivors, parts, gen1)
	takeover := time.Since(killAt)
	t.Logf("survivors converged on generation %d %v after the victim died: %s=%v %s=%v", gen2, takeover.Round(time.Millisecond),
		survivors[0].name, survivors[0].k.Assignments(), survivors[1].name, survivors[1].k.Assignments())
	// The victim's last heartbeat lies at most one interval before its death,
	// so only the session timeout can explain a takeover this late; an
	// earlier one would mean something else removed the member.
	if min := failoverSession - failoverHeartbeat - 100*time.Millisecond; takeover < min {
		t.Fatalf("takeover after %v, before the session timeout allows (%v)", takeover, min)
	}

	all = append(all, publishWave(t, ctx, admin, topic, "w2", wave)...)
	for out.distinct() < len(all) {
		if ctx.Err() != nil {
			t.Fatalf("processed %d of %d records; errors %v / %v", out.distinct(), len(all), survivors[0].err(), survivors[1].err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range survivors {
		close(m.stop)
		<-m.done
	}

	out.mu.Lock()
	var missing, dups int
	for _, v := range all {
		times := out.seen[v]
		if len(times) == 0 {
			missing++
			continue
		}
		dups += len(times) - 1
		for _, at := range times[1:] {
			if at.Before(killAt) {
				t.Errorf("%s processed again at %v, before the victim died (%v)", v, at, killAt)
			}
		}
	}
	for _, v := range victim.lastBatch {
		if len(out.seen[v]) < 2 {
			t.Errorf("%s of the victim's uncommitted batch was not re-delivered (processed %d times)", v, len(out.seen[v]))
		}
	}
	total, distinct := out.total, len(out.seen)
	out.mu.Unlock()
	t.Logf("records %d, processed %d times (%d distinct), missing %d, duplicates %d (victim's uncommitted batch %d), takeover %v",
		len(all), total, distinct, missing, dups, len(victim.lastBatch), takeover.Round(time.Millisecond))
	if missing != 0 || distinct != len(all) {
		t.Fatalf("%d records missing, %d distinct of %d", missing, distinct, len(all))
	}

	// Every partition's committed offset reached its end: nothing would be
	// delivered again to a new member.
	ends, err := admin.ListOffsets(ctx, topic, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ends {
		framework.Retry(t, ctx, func() error {
			off, err := admin.FetchOffset(ctx, topic, e.Partition, group)
			if err == nil && off != e.Latest {
				return fmt.Errorf("committed p%d = %d, want %d", e.Partition, off, e.Latest)
			}
			return err
		})
	}
	st, err := admin.GroupStatus(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if st.MemberCount != 2 {
		t.Fatalf("group status after failover: %d members, want 2 (%s)", st.MemberCount, st.Raw)
	}
	// Informational: a survivor starved of CPU past the session timeout is
	// expired and joins again as a new member (not an error by itself).
	for _, m := range members {
		if ids := m.memberIDs(); len(ids) != 1 {
			t.Logf("%s was the members %v", m.name, ids)
		}
	}
}
