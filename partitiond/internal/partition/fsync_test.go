package partition

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/strataio/strata/libs/errcode"
)

// syncFailer fails the k-th fdatasync of segment files under chosen
// directories (counting from 0) and every later one there.
type syncFailer struct {
	mu     sync.Mutex
	target map[string]int
	seen   map[string]int
	fired  atomic.Int64
}

func newSyncFailer() *syncFailer {
	return &syncFailer{target: map[string]int{}, seen: map[string]int{}}
}

func (f *syncFailer) arm(dir string, k int) {
	f.mu.Lock()
	f.target[dir] = k
	f.mu.Unlock()
}

func (f *syncFailer) MaybeError(op errorfs.Op) error {
	if op.Kind != errorfs.OpFileSyncData && op.Kind != errorfs.OpFileSync {
		return nil
	}
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	// Segment files sit directly in their partition's directory; a map
	// lookup (not a scan of every armed directory) keeps the 1,000
	// partition test fast under the race detector.
	dir := path.Base(path.Dir(op.Path))
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.target[dir]
	if !ok {
		return nil
	}
	n := f.seen[dir]
	f.seen[dir] = n + 1
	if n >= k {
		f.fired.Add(1)
		return errorfs.ErrInjected
	}
	return nil
}

func (f *syncFailer) String() string { return "syncFailer" }

// triggered reports whether dir's armed failure fired.
func (f *syncFailer) triggered(dir string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[dir] > f.target[dir]
}

func TestFsyncFailureFencesPartition(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fail := newSyncFailer()
	var reported atomic.Int32
	e := newNodeEnv(t, func(c *NodeConfig) {
		c.FS = errorfs.Wrap(mem, fail)
		c.StateFS = mem
		c.OnStorageFailure = func(string, int32, error) { reported.Add(1) }
	})
	e.fs = mem
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "f", 0, TopicConfig{})
	other := mustCreate(t, n, "g", 0, TopicConfig{})
	appendPayloads(t, p, "durable-0", "durable-1")
	fail.arm(p.meta.Load().Dir, 0)

	set, cnt := payloads(t, "f", "never-acked")
	_, err := p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, Records: set, RecordCount: cnt})
	e1 := wantCode(t, err, errcode.StorageUnavailable)
	if !e1.Retryable || field(e1, "topic") != "f" {
		t.Fatalf("%v", e1)
	}
	// Fenced: later appends fail at once, whatever the acks.
	for _, acks := range []int32{AcksNone, AcksLeader, AcksAll} {
		set, cnt := payloads(t, "f", "after")
		_, err := p.Append(context.Background(), &AppendRequest{Acks: acks, Records: set, RecordCount: cnt})
		wantCode(t, err, errcode.StorageUnavailable)
	}
	// Durable data is still served; nothing above it, and no waiting.
	r, err := p.Fetch(context.Background(), &FetchRequest{Offset: 0})
	if err != nil || r.RecordCount != 2 || r.HighWatermark != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	start := time.Now()
	_, err = p.Fetch(context.Background(), &FetchRequest{Offset: 2, Wait: time.Minute})
	wantCode(t, err, errcode.StorageUnavailable)
	if time.Since(start) > 10*time.Second {
		t.Fatal("fetch above the durable end waited on a fenced partition")
	}
	if reported.Load() != 1 || n.Stats().StorageFailures != 1 {
		t.Fatalf("failure reported %d times", reported.Load())
	}
	// Other partitions are unaffected.
	appendPayloads(t, other, "fine")
	// A restart recovers the partition from its log.
	c := e.crashClone(0)
	n2 := c.open(t)
	defer n2.Close()
	p2, _ := n2.Partition("f", 0)
	got := fetchAll(t, p2, 0)
	if len(got) < 2 || got[0].payload != "durable-0" || got[1].payload != "durable-1" {
		t.Fatalf("%+v", got)
	}
	appendPayloads(t, p2, "again")
}

// TestFsyncFailureNeverAcked injects an fdatasync failure into each of many
// partitions at a random sync while several producers append, then checks
// after a simulated power loss that every acknowledged batch is there: an
// fsync error is never retried and acknowledged.
func TestFsyncFailureNeverAcked(t *testing.T) {
	// The crash tests are CPU-bound and independent: running them in
	// parallel halves the package's wall time on two cores.
	t.Parallel()
	injections := 1000
	if testing.Short() {
		injections = 200
	}
	mem := vfs.NewCrashableMem()
	fail := newSyncFailer()
	e := newNodeEnv(t, func(c *NodeConfig) {
		c.FS = errorfs.Wrap(mem, fail)
		c.StateFS = mem
		c.Defaults.SegmentBytes = 2048
	})
	e.fs = mem
	n := e.open(t)
	defer n.Close()
	rng := rand.New(rand.NewPCG(42, uint64(time.Now().UnixNano())))
	type ack struct {
		topic      string
		base, last uint64
	}
	var mu sync.Mutex
	var acks []ack
	var failures, acked atomic.Int64
	for i := range injections {
		topic := fmt.Sprintf("t%d", i)
		p := mustCreate(t, n, topic, 0, TopicConfig{})
		fail.arm(p.meta.Load().Dir, rng.IntN(6))
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 4 {
					set, cnt := payloads(t, topic, fmt.Sprintf("%s-%d-%d-%s", topic, g, k, strings.Repeat("z", 300)))
					res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, Records: set, RecordCount: cnt})
					if err != nil {
						if !errorsIs(err, errcode.StorageUnavailable) {
							t.Errorf("append error %v", err)
						}
						failures.Add(1)
						continue
					}
					acked.Add(1)
					mu.Lock()
					acks = append(acks, ack{topic, res.BaseOffset, res.LastOffset})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if p.log.Fenced() == nil && fail.triggered(p.meta.Load().Dir) {
			t.Fatalf("%s: a sync failed but the partition is not fenced", topic)
		}
	}
	// Power loss: only synced data survives.
	c := e.crashClone(0)
	n2 := c.open(t)
	defer n2.Close()
	for _, a := range acks {
		p, err := n2.Partition(a.topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Fetch(context.Background(), &FetchRequest{Offset: a.base, MaxRecords: int(a.last - a.base + 1)})
		if err != nil || r.RecordCount != int(a.last-a.base+1) {
			t.Fatalf("acked %s %d..%d lost after power loss: %+v %v", a.topic, a.base, a.last, r, err)
		}
	}
	if fail.fired.Load() < int64(injections) {
		t.Fatalf("only %d injections fired", fail.fired.Load())
	}
	t.Logf("fsync failure injection: %d partitions, %d failed syncs injected, %d acks (all durable after power loss), %d appends refused",
		injections, fail.fired.Load(), acked.Load(), failures.Load())
}
