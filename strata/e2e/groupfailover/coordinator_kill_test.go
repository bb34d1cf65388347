package groupfailover

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
)

// nodeLease is metad's node lease in the process cluster: a killed
// coordinatord leaves the ring this long after its last lease renewal.
const nodeLease = 3 * time.Second

// commitState is the committer's view: the highest acknowledged next offset
// per partition.
type commitState struct {
	acked   []atomic.Uint64
	total   atomic.Int64
	lastAck atomic.Int64 // unix nanos of the latest acknowledgement
}

func (s *commitState) ack(p int32, off uint64) {
	s.acked[p].Store(off)
	s.total.Add(1)
	s.lastAck.Store(time.Now().UnixNano())
}

// waitCommits waits until n more commits than now were acknowledged.
func (s *commitState) waitCommits(t *testing.T, ctx context.Context, n int64, what string) time.Duration {
	t.Helper()
	start, want := time.Now(), s.total.Load()+n
	for s.total.Load() < want {
		if ctx.Err() != nil {
			t.Fatalf("%s: only %d of %d commits acknowledged", what, s.total.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// coordinatorKill is issue 6's coordinator failure test: one member commits
// offsets of a 4-partition topic through one gateway (COMMIT_OFFSET and
// BATCH_COMMIT, each retried until acknowledged) while one reader per
// gateway polls FETCH_OFFSET. The coordinator owning the group is
// kill -9'ed; the other takes the group over; then the killed one restarts
// and takes it back (fencing the live previous owner). Throughout, every
// FETCH_OFFSET answer must be at least what was acknowledged before it was
// sent and never lower than an earlier answer; at the end every partition
// holds exactly the last acknowledged commit.
func coordinatorKill(t *testing.T, c *framework.ProcessCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gw := framework.ClientAddrs(c)
	const topic, group, parts = "commits", "g-commits", int32(4)
	createTopic(t, ctx, framework.Dial(t, ctx, gw[0]), topic, parts)
	committer := framework.Dial(t, ctx, gw[0])

	st := &commitState{acked: make([]atomic.Uint64, parts)}
	var (
		mu         sync.Mutex
		violations []string
		commitErrs = map[string]int{}
		readErrs   = map[string]int{}
		reads      atomic.Int64
		rejoins    atomic.Int64
	)
	violate := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(violations) < 20 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	// tally counts one error by name in errs (commitErrs or readErrs).
	tally := func(errs map[string]int, name string) {
		mu.Lock()
		defer mu.Unlock()
		errs[name]++
	}
	stopCommit, commitDone := make(chan struct{}), make(chan struct{})
	stopRead := make(chan struct{})

	go func() {
		defer close(commitDone)
		var member string
		var gen int64
		join := func() bool {
			for ctx.Err() == nil {
				id := member
				if id == "" {
					id = "committer"
				}
				jr, err := committer.JoinGroup(ctx, group, id, topic)
				if err == nil {
					var got []int32
					if got, err = committer.SyncGroup(ctx, group, jr.Member, jr.Generation, topic); err == nil {
						if len(got) != int(parts) {
							violate("sole member got partitions %v", got)
						}
						member, gen = jr.Member, jr.Generation
						rejoins.Add(1)
						return true
					}
				}
				tally(commitErrs, "join: "+errName(err))
				time.Sleep(50 * time.Millisecond)
			}
			return false
		}
		if !join() {
			return
		}
		for i := 0; !closed(stopCommit); i++ {
			p := int32(i) % parts
			batch := i%5 == 4
			var offs []wire.PartitionOffset
			if batch {
				for q := int32(0); q < parts; q++ {
					offs = append(offs, wire.PartitionOffset{Partition: q, Offset: st.acked[q].Load() + 1})
				}
			}
			next := st.acked[p].Load() + 1
			// Retry the same values until acknowledged: an unknown outcome
			// may have been stored, and the equal value then answers OK.
			for {
				var err error
				if batch {
					_, err = committer.BatchCommit(ctx, topic, group, member, gen, offs)
				} else {
					err = committer.CommitOffset(ctx, topic, p, group, next, member, gen)
				}
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				name := errName(err)
				tally(commitErrs, name)
				if errors.Is(err, errcode.OffsetRegression) {
					violate("commit %s answered %v: a stored offset is above the acknowledged one", name, err)
					cancel() // fail now, not at the next wait's timeout
					return
				}
				if needsRejoin(err) && !join() {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			if batch {
				for _, o := range offs {
					st.ack(o.Partition, o.Offset)
				}
			} else {
				st.ack(p, next)
			}
		}
	}()

	// One reader per gateway. seen holds the highest answer any reader has
	// had: a read that starts after an answer must not return less, whichever
	// gateway and coordinator serve it.
	seen := make([]atomic.Uint64, parts)
	var readers sync.WaitGroup
	for _, addr := range gw {
		reader := framework.Dial(t, ctx, addr)
		framework.WaitTopic(t, ctx, reader, topic)
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; !closed(stopRead); i++ {
				p := int32(i) % parts
				acked, prev := st.acked[p].Load(), seen[p].Load()
				v, err := reader.FetchOffset(ctx, topic, p, group)
				if err != nil {
					tally(readErrs, errName(err))
					if ctx.Err() != nil {
						return
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				reads.Add(1)
				if v < prev {
					violate("p%d: FETCH_OFFSET via %s %d after %d was read (a lower offset appeared)", p, addr, v, prev)
				}
				if v < acked {
					violate("p%d: FETCH_OFFSET via %s %d below the acknowledged %d", p, addr, v, acked)
				}
				for cur := seen[p].Load(); v > cur && !seen[p].CompareAndSwap(cur, v); cur = seen[p].Load() {
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(stopCommit)
			<-commitDone
			close(stopRead)
			readers.Wait()
		}
	}
	// Also on a failure: cancel first (the committer's retry loops end with
	// ctx), then report what the goroutines saw.
	defer func() {
		cancel()
		stop()
		mu.Lock()
		defer mu.Unlock()
		if len(violations) > 0 {
			t.Errorf("violations:\n%s", strings.Join(violations, "\n"))
		}
	}()

	st.waitCommits(t, ctx, 100, "before the kill")
	coords := c.ByRole(pki.RoleCoordinatord)
	owner, other := groupOwner(t, ctx, coords, group)
	killAt := time.Now()
	owner.Kill()
	t.Logf("kill -9 %s (owner of %s) after %d commits", owner.Name, group, st.total.Load())
	gap := st.waitCommits(t, ctx, 100, "after the kill")
	t.Logf("commits resumed on the survivor: 100 more acknowledged %v after the kill", time.Since(killAt).Round(time.Millisecond))
	if now, _ := groupOwner(t, ctx, coords, group); now != other {
		t.Fatalf("after the kill %s owns the group, want %s", now.Name, other.Name)
	}

	restartAt := time.Now()
	owner.Start()
	owner.WaitReady(60 * time.Second)
	for {
		if now, _ := groupOwner(t, ctx, coords, group); now == owner {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted %s never took %s back", owner.Name, group)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st.waitCommits(t, ctx, 100, "after the restart")
	t.Logf("%s restarted and took %s back; 100 more commits %v after its start", owner.Name, group, time.Since(restartAt).Round(time.Millisecond))
	stop()

	for p := int32(0); p < parts; p++ {
		want := st.acked[p].Load()
		for _, addr := range gw {
			if off := framework.Committed(t, ctx, framework.Dial(t, ctx, addr), topic, p, group); off != want {
				t.Fatalf("final committed p%d = %d via %s, want the last acknowledged %d", p, off, addr, want)
			}
		}
	}
	mu.Lock()
	t.Logf("commits acknowledged %d, joins %d, commit errors %v; FETCH_OFFSET reads %d, read errors %v; first 100 post-kill commits took %v",
		st.total.Load(), rejoins.Load(), commitErrs, reads.Load(), readErrs, gap.Round(time.Millisecond))
	mu.Unlock()
}

// groupOwner finds the coordinatord reporting coordinator_up 1 for group
// (waiting until exactly one does) and returns it and another coordinatord.
func groupOwner(t *testing.T, ctx context.Context, coords []*clustertest.Proc, group string) (owner, other *clustertest.Proc) {
	t.Helper()
	for {
		var owners []*clustertest.Proc
		for _, p := range coords {
			if up, _ := coordinatorUp(ctx, p.MetricsAddr, group); up {
				owners = append(owners, p)
			}
		}
		// Two owners can show for a moment: the new owner reports 1 after its
		// takeover, the old one 0 once its metadata view shows the change.
		// Poll until the answer is unique.
		if len(owners) == 1 {
			for _, p := range coords {
				if p != owners[0] {
					return owners[0], p
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no coordinatord owns %s", group)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// coordinatorUp reads strata_consumer_group_coordinator_up of group from a
// process's /metrics (false when the process does not answer).
func coordinatorUp(ctx context.Context, addr, group string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "strata_consumer_group_coordinator_up{") &&
			strings.Contains(line, `group="`+group+`"`) && strings.HasSuffix(line, " 1") {
			return true, nil
		}
	}
	return false, sc.Err()
}

// closed reports, without blocking, whether ch is closed: the committer and
// the readers check their stop channel before each request.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// needsRejoin: the member must join again (its coordinator lost or moved its
// soft state).
func needsRejoin(err error) bool {
	e, ok := errcode.As(err)
	if !ok {
		return false
	}
	return e.Class == errcode.ClassFencing || e.Code == errcode.MemberNotFound.Name() ||
		e.Code == errcode.GroupNotFound.Name() || e.Code == errcode.NotOwner.Name()
}

func errName(err error) string {
	if e, ok := errcode.As(err); ok {
		return e.Code
	}
	s := err.Error()
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}
