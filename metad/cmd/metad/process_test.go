package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/proctest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// proc is one metad process and its addresses.
type proc struct {
	*proctest.Proc
	id      string
	rpc     string
	metrics string
}

// waitReady waits for /ready of each process; a process that exits
// meanwhile fails the test at once with the end of its log.
func waitReady(ps ...*proc) {
	for _, p := range ps {
		p.WaitReady(30 * time.Second)
	}
}

// cluster is three metad processes on loopback with an admin metaclient.
type cluster struct {
	ps     []*proc
	pool   *rpc.Pool
	client *metaclient.Client
}

// startCluster builds the binary and starts three voters (300 ms Raft
// timeouts) with extra flags appended to each command line.
func startCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	bin := proctest.Binary(t, "github.com/strataio/strata/metad/cmd/metad")
	dir := t.TempDir()
	ca := pkitest.New(t)
	var voters []string
	raftAddrs := map[string]string{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("m%d", i)
		raftAddrs[id] = looptest.FreeAddr(t)
		voters = append(voters, id+"="+raftAddrs[id])
	}
	c := &cluster{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("m%d", i)
		files := ca.Files(t, pki.RoleMetad, id)
		rpcAddr, health, metrics := looptest.FreeAddr(t), looptest.FreeAddr(t), looptest.FreeAddr(t)
		p := &proc{id: id, rpc: rpcAddr, metrics: metrics, Proc: proctest.New(t, proctest.Spec{Name: id, Path: bin,
			HealthAddr: health, LogPath: filepath.Join(dir, id+".log"), Args: append([]string{
				"--node-id", id, "--data-dir", filepath.Join(dir, id), "--rpc-listen", rpcAddr,
				"--tls.ca", files.CA, "--tls.cert", files.Cert, "--tls.key", files.Key,
				"--ops-host", "127.0.0.1", "--health-check-port", looptest.Port(health),
				"--enable-exporter", "--exporter-port", looptest.Port(metrics),
				"--log.level", "warn", "--shutdown-timeout", "5s",
				"--metad.raft-listen", raftAddrs[id],
				"--metad.voters", strings.Join(voters, ","),
				"--metad.raft-heartbeat-timeout", "300ms", "--metad.raft-election-timeout", "300ms",
				"--metad.raft-leader-lease-timeout", "150ms", "--metad.node-lease-timeout", "3s",
			}, extra...)})}
		c.ps = append(c.ps, p)
	}
	for _, p := range c.ps {
		p.Start()
	}
	waitReady(c.ps...)
	c.pool = rpc.NewPool(rpc.ClientOptions{Source: ca.Source(t, pki.RoleAdmin, "admin"), ServerRoles: []pki.Role{pki.RoleMetad}})
	t.Cleanup(func() { c.pool.Close() })
	c.client = metaclient.New(metaclient.Options{Addrs: c.addrs(), Dial: c.pool.Get, CallTimeout: 2 * time.Second})
	return c
}

func (c *cluster) addrs() []string {
	var out []string
	for _, p := range c.ps {
		out = append(out, p.rpc)
	}
	return out
}

// leader asks the cluster (linearizably, on the leader) who leads.
func (c *cluster) leader(t *testing.T, ctx context.Context) *proc {
	t.Helper()
	st, err := c.client.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.ps {
		if p.id == st.GetRaftLeaderId() {
			return p
		}
	}
	t.Fatalf("leader %q unknown", st.GetRaftLeaderId())
	return nil
}

// Three metad processes on loopback: kill -9 the Raft leader, write through
// the survivors, restart every process, and every committed topic is there.
func TestThreeProcessesSurviveKillOfTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the metad binary")
	}
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.client.Register(ctx, &metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1", Incarnation: 1}); err != nil {
		t.Fatal(err)
	}
	create := func(name string) {
		t.Helper()
		if _, err := c.client.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: name, Partitions: proto.Int32(2), ReplicationFactor: proto.Int32(1)}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	create("before")
	leader := c.leader(t, ctx)
	killed := time.Now()
	leader.Kill()
	create("after")
	t.Logf("write committed %v after kill -9 of leader %s", time.Since(killed), leader.id)

	// Restart everything (the killed node included) and read back.
	for _, p := range c.ps {
		_ = p.Stop(15 * time.Second) // killed after 15 s; the data is what counts
	}
	for _, p := range c.ps {
		p.Start()
	}
	waitReady(c.ps...)
	for _, name := range []string{"before", "after"} {
		got, err := c.client.GetTopic(ctx, name)
		if err != nil || len(got.GetTopic().GetPartitions()) != 2 {
			t.Fatalf("%s after restart: %v %v", name, got, err)
		}
	}
}

// ledger records every acknowledged topic change: the partition count a
// CREATE (create or grow) was acknowledged with.
type ledger struct {
	mu        sync.Mutex
	acked     map[string]int32 // topic -> highest acknowledged partition count
	attempted map[string]int32 // topic -> highest partition count asked for
	acks      int
	lastAck   time.Time
	failures  map[string]int // error code -> count (outcome unknown)
}

func newLedger() *ledger {
	return &ledger{acked: map[string]int32{}, attempted: map[string]int32{}, failures: map[string]int{}}
}

func (l *ledger) snapshot() (acks int, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks, l.lastAck
}

// write is one writer's load: new topics, and every third operation a
// patch growing one of its earlier topics by a partition. Each change is
// recorded only once metad acknowledged it; a failed call's outcome is
// unknown (it may or may not have committed), so it is only counted.
func (l *ledger) write(ctx context.Context, c *metaclient.Client, writer int) {
	var mine []string
	for i := 0; ctx.Err() == nil; i++ {
		req := &metav1.CreateTopicRequest{ReplicationFactor: proto.Int32(1)}
		if i%3 == 2 && len(mine) > 0 {
			req.Name = mine[(i*7)%len(mine)]
		} else {
			req.Name = fmt.Sprintf("w%d-%05d", writer, i)
			mine = append(mine, req.Name)
		}
		l.mu.Lock()
		parts := l.attempted[req.Name] + 1
		l.attempted[req.Name] = parts
		l.mu.Unlock()
		req.Partitions = proto.Int32(parts)
		octx, cancel := context.WithTimeout(ctx, 15*time.Second)
		resp, err := c.CreateTopic(octx, req)
		cancel()
		l.mu.Lock()
		if err == nil {
			if n := int32(len(resp.GetTopic().GetPartitions())); n < parts {
				l.failures[fmt.Sprintf("acknowledged %s with %d partitions, asked %d", req.Name, n, parts)]++
			}
			l.acked[req.Name] = max(l.acked[req.Name], parts)
			l.acks++
			l.lastAck = time.Now()
		} else if ctx.Err() == nil {
			l.failures[errCode(err)]++
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func errCode(err error) string {
	s := err.Error()
	if i := strings.Index(s, "ERROR: "); i >= 0 {
		s = s[i+len("ERROR: "):]
	}
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	return s
}

var seriesRE = regexp.MustCompile(`^strata_cluster_partition_replicas\{partition="(\d+)",topic="([^"]+)"\}`)

// nodeView scrapes one process's /metrics: the partition count per topic
// from its own FSM (strata_cluster_partition_replicas series) and its watch
// revision.
func nodeView(p *proc) (map[string]int32, uint64, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	topics := map[string]int32{}
	var rev uint64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := seriesRE.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[1])
			topics[m[2]] = max(topics[m[2]], int32(pid+1))
		} else if v, ok := strings.CutPrefix(line, "strata_metad_revision "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			rev = uint64(f)
		}
	}
	return topics, rev, sc.Err()
}

// The Raft leader is killed with SIGKILL ten times (STRATA_LONG=1: thirty)
// while two writers create and grow topics through one leader-following
// metaclient and a raw Watch stream follows every leader change; the killed
// process is restarted each time. Snapshots are taken every few hundred
// entries, so restarted nodes also catch up by InstallSnapshot. At the end
// every acknowledged change is in each of the three processes' own state
// (scraped from its /metrics: the per-partition series come from its FSM),
// the processes agree on the revision, the leader's ListTopics holds them,
// and the watcher saw every revision exactly once and in order across all
// reconnects, ending with exactly the leader's topics.
func TestKillNineTheLeaderInALoopUnderWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three metad binaries, kills the leader repeatedly")
	}
	rounds := 10
	if os.Getenv("STRATA_LONG") != "" {
		rounds = 30
	}
	began := time.Now()
	c := startCluster(t, "--metad.node-lease-timeout", "6s",
		"--metad.raft-snapshot-threshold", "64", "--metad.raft-trailing-logs", "16", "--metad.raft-snapshot-interval", "200ms", "--log.level", "info")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	// A partition server keeps its lease so topics can be placed.
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	p1 := &metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1", Incarnation: 1}
	if _, err := c.client.Register(ctx, p1); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = c.client.KeepAlive(bg, p1)
	}()
	w := newWatchCheck()
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.run(bg, c)
	}()
	l := newLedger()
	writers, stopWriters := context.WithCancel(bg)
	var wwg sync.WaitGroup
	for i := range 2 {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			l.write(writers, c.client, i)
		}()
	}
	defer func() {
		stopWriters()
		wwg.Wait()
		stopBG()
		wg.Wait()
	}()

	waitAcks := func(n int, what string) time.Time {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			acks, last := l.snapshot()
			if acks >= n {
				return last
			}
			if time.Now().After(deadline) {
				l.mu.Lock()
				defer l.mu.Unlock()
				t.Fatalf("%s: %d acknowledged writes, want %d (failures %v)", what, acks, n, l.failures)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Logf("binary built and cluster ready in %v", time.Since(began).Round(time.Millisecond))
	waitAcks(20, "warm-up")
	var gaps, restarts []time.Duration
	start := time.Now()
	for round := range rounds {
		leader := c.leader(t, ctx)
		leader.Kill()
		dead := time.Now()
		acks, _ := l.snapshot()
		// Writes that started before the kill may land on the old leader
		// just before it dies; three fresh acknowledgements need the new one.
		waitAcks(acks+3, fmt.Sprintf("round %d (leader %s killed)", round, leader.id))
		first := time.Now()
		gaps = append(gaps, first.Sub(dead))
		if round%2 == 1 {
			// Keep it down while the log moves past the trailing entries
			// the others keep: it comes back through InstallSnapshot.
			waitAcks(acks+80, fmt.Sprintf("round %d (%s down)", round, leader.id))
		}
		restarted := time.Now()
		leader.Start()
		waitReady(leader)
		restarts = append(restarts, time.Since(restarted))
		// Some load with all three up before the next kill.
		acks, _ = l.snapshot()
		waitAcks(acks+10, fmt.Sprintf("round %d (after restarting %s)", round, leader.id))
	}
	elapsed := time.Since(start)
	stopWriters()
	wwg.Wait()
	waitReady(c.ps...)

	l.mu.Lock()
	acked := l.acked
	t.Logf("%d kill -9 rounds in %v: %d acknowledged changes on %d topics; unknown outcomes %v", rounds, elapsed.Round(time.Millisecond), l.acks, len(acked), l.failures)
	for k := range l.failures {
		if strings.HasPrefix(k, "acknowledged") {
			t.Errorf("bad acknowledgement: %s", k)
		}
	}
	l.mu.Unlock()
	t.Logf("kill -> three new acknowledgements: %v", gaps)
	t.Logf("restart -> ready: %v", restarts)

	// Every acknowledged change is in the leader's answer...
	lt, _, err := listTopics(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range acked {
		if got := len(lt[name].GetPartitions()); int32(got) < want {
			t.Errorf("leader: %s has %d partitions, %d acknowledged", name, got, want)
		}
	}
	// ... and in every process's own state, at one common revision.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var problems []string
		revs := map[uint64]bool{}
		for _, p := range c.ps {
			view, rev, err := nodeView(p)
			if err != nil {
				problems = append(problems, p.id+": "+err.Error())
				continue
			}
			revs[rev] = true
			missing := 0
			for name, want := range acked {
				if view[name] < want {
					missing++
				}
			}
			if missing > 0 {
				problems = append(problems, fmt.Sprintf("%s: %d acknowledged changes missing (revision %d)", p.id, missing, rev))
			}
		}
		if len(revs) != 1 {
			problems = append(problems, fmt.Sprintf("revisions differ: %v", revs))
		}
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("survivors disagree: %v", problems)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The watcher saw every revision once, in order, and ends on the
	// leader's topics.
	deadline = time.Now().Add(20 * time.Second)
	for {
		lt, rev, err := listTopics(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		diff := w.diff(rev, lt)
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher: %s", diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("checks done %v after the last round", time.Since(start.Add(elapsed)).Round(time.Millisecond))
	for _, p := range c.ps {
		lower := strings.ToLower(p.Log())
		t.Logf("%s: %d snapshots taken, %d installed from the leader", p.id, strings.Count(lower, "snapshot complete"), strings.Count(lower, "installed remote snapshot"))
	}
	w.mu.Lock()
	t.Logf("watcher: %d events, %d snapshots, %d reconnects, final revision %d", w.events, w.snapshots, w.reconnects, w.rev)
	for _, v := range w.violations {
		t.Error("watch: " + v)
	}
	w.mu.Unlock()
}

// listTopics reads every topic and the revision they are at from the leader.
func listTopics(ctx context.Context, c *cluster) (map[string]*metav1.Topic, uint64, error) {
	r, err := metaclient.Invoke(ctx, c.client, metav1.MetadataServiceClient.ListTopics, &metav1.ListTopicsRequest{IncludeInternal: true})
	out := map[string]*metav1.Topic{}
	for _, tp := range r.GetTopics() {
		out[tp.GetConfig().GetName()] = tp
	}
	return out, r.GetRevision(), err
}
