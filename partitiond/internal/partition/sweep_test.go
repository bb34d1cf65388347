package partition

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/clock"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/recordtest"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/syncer"
)

// crashPoint simulates a power loss at the k-th file operation: just before
// that operation runs it clones the file systems as a crash would leave them
// (all synced data, pct% of the unsynced blocks and directory entries), and
// that operation and every later one fail, so nothing more reaches the
// disk. With k < 0 it only counts operations.
type crashPoint struct {
	mu      sync.Mutex
	k       int
	ops     int
	crashed bool
	pct     int
	rng     *rand.Rand
	// mems are cloned in order at the crash: the state store first, so it
	// is never newer than the logs (as on a real disk, where it was
	// written before the log operations that followed).
	mems   []*vfs.MemFS
	clones []*vfs.MemFS
	// allOrNothing marks mems (by index) whose unsynced share is rounded
	// to 0 or 100 %: the pebble state store. pebble's manifest rotation
	// (on every open) relies on the file system keeping unsynced
	// directory operations in order, as ext4's and xfs's journals do; a
	// crash model that keeps a random subset of them (a new marker without
	// the MANIFEST it names) breaks pebble itself, not this code.
	allOrNothing map[int]bool
}

// cloneAll takes the crash clones; the caller holds mu.
func (c *crashPoint) cloneAll() {
	c.crashed = true
	for i, m := range c.mems {
		pct := c.pct
		if c.allOrNothing[i] {
			pct = 0
			if c.pct >= 50 {
				pct = 100
			}
		}
		c.clones = append(c.clones, m.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: c.rng}))
	}
}

func (c *crashPoint) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return errorfs.ErrInjected
	}
	if c.ops == c.k {
		c.cloneAll()
		return errorfs.ErrInjected
	}
	c.ops++
	return nil
}

func (c *crashPoint) String() string { return "crashPoint" }

// stateCrash makes the state store's file operations crash points of c too
// (one operation count over both file systems), but never fails one:
// pebble treats a failed WAL or MANIFEST write as fatal, and what it writes
// after the crash is not in the clones anyway. The log operations, which do
// fail from the crash on, stop any further acknowledgement.
type stateCrash struct{ c *crashPoint }

func (s stateCrash) MaybeError(errorfs.Op) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return nil
	}
	if c.ops == c.k {
		c.cloneAll()
		return nil
	}
	c.ops++
	return nil
}

func (s stateCrash) String() string { return "stateCrash" }

// sweepCrashPoints crashes a workload at every file operation index below
// ops (and a few beyond; every shortStep-th with -short) for each unsynced
// share in pcts. crashAt runs
// the workload crashing at operation k with pct% of the unsynced data kept,
// checks the recovery, reporting each violation through fail, and returns
// false when the run did fewer operations than k (no crash). The tally is
// logged under name.
//
// Then the sweep fails unless, for every share, it crashed at (nearly)
// every index it visited: a run may do fewer operations than the counting
// run where goroutines interleave differently (the three-producer workload
// varies by ≈ 10 %) or pebble works in the background. The deterministic
// workloads crash at every index (see the logged counts).
func sweepCrashPoints(t *testing.T, name string, pcts []int, ops, shortStep int, crashAt func(k, pct int, fail func(format string, args ...any)) bool) {
	t.Helper()
	step := 1
	if testing.Short() {
		step = shortStep
	}
	points, violations := 0, 0
	perPct := map[int]int{}
	start := time.Now()
	for _, pct := range pcts {
		for k := 0; k < ops+3; k += step {
			fail := func(format string, args ...any) {
				violations++
				t.Errorf("crash at op %d (unsynced kept %d%%): %s", k, pct, fmt.Sprintf(format, args...))
			}
			if crashAt(k, pct, fail) {
				points++
				perPct[pct]++
			}
		}
	}
	t.Logf("%s: %d file operations, %d crash points checked (x%d unsynced shares), %d violations, %v",
		name, ops, points, len(pcts), violations, time.Since(start).Round(time.Millisecond))
	want := (ops + step - 1) / step
	for _, pct := range pcts {
		if got := perPct[pct]; got < want*3/4 {
			t.Fatalf("unsynced share %d%%: only %d crash points for %d operations (every %d)", pct, got, ops, step)
		}
	}
}

// sweepPayload is record j of batch i of n records.
func sweepPayload(i, j, n int) []byte {
	p := bytes.Repeat([]byte{byte(i*13 + j)}, 40+(i*37+j*11)%300)
	copy(p, fmt.Sprintf("i=%d j=%d n=%d ", i, j, n))
	return p
}

func sweepBatch(t testing.TB, i int) *seglog.Batch {
	n := 1 + i%4
	recs := make([]wire.Record, n)
	for j := range n {
		recs[j] = wire.Record{Topic: "sweep", Payload: sweepPayload(i, j, n)}
	}
	set := recordtest.Set(t, recs...)
	return &seglog.Batch{Records: set, OffsetPos: recordtest.OffsetPositions(t, set)}
}

type sweepAck struct {
	base uint64
	i, n int
}

// sweepBatches is the workload size: 36 batches (about 8 rolls) in the
// normal run, 400 with STRATA_LONG=1.
var sweepBatches = func() int {
	if os.Getenv("STRATA_LONG") != "" {
		return 400
	}
	return 36
}()

// logWorkload appends sweepBatches batches with acks (wait for the covering
// fdatasync) through the node syncer, rolling every few batches and
// checkpointing now and then, until the first failure.
func logWorkload(t testing.TB, fs vfs.FS, concurrent bool) []sweepAck {
	sy := syncer.New(0)
	defer sy.Close()
	// ZeroFill: the segment files are preallocated (by zeros, MemFS has no
	// fallocate) in 512-byte steps, so crash points fall between
	// preallocation, appends inside it, the cut at each roll and the
	// clean close.
	l, err := seglog.Open(seglog.Config{Dir: "/log", FS: fsys.ZeroFill(fsys.FromVFS(fs)), Syncer: sy, Cache: seglog.NewReaderCache(4),
		Clock: clock.NewManual(t0), SegmentBytes: 2048, IndexInterval: 256, Preallocate: 512})
	if err != nil {
		return nil
	}
	defer l.Close()
	var mu sync.Mutex
	var acks []sweepAck
	run := func(from, step int) {
		for i := from; i < sweepBatches; i += step {
			b := sweepBatch(t, i)
			base, err := l.Append(b)
			if err != nil {
				return
			}
			if err := l.WaitDurable(context.Background(), base+uint64(len(b.OffsetPos))); err != nil {
				return
			}
			mu.Lock()
			acks = append(acks, sweepAck{base: base, i: i, n: len(b.OffsetPos)})
			mu.Unlock()
			if i%10 == 9 {
				if err := l.Checkpoint(); err != nil {
					return
				}
			}
		}
	}
	if !concurrent {
		run(0, 1)
		return acks
	}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); run(g, 3) }()
	}
	wg.Wait()
	return acks
}

// checkRecoveredLog opens the log on a crash clone and checks: it opens
// (a crash never looks like corruption), the whole log verifies (CRCs,
// indexes), offsets are dense from 0, every batch is whole (nothing
// unacknowledged is half visible), every acknowledged batch is there and
// byte-identical, and the log takes appends again.
func checkRecoveredLog(t testing.TB, fs vfs.FS, acks []sweepAck) error {
	l, err := seglog.Open(seglog.Config{Dir: "/log", FS: fsys.FromVFS(fs), Cache: seglog.NewReaderCache(4),
		Clock: clock.NewManual(t0), SegmentBytes: 2048, IndexInterval: 256})
	if err != nil {
		return fmt.Errorf("recovery failed: %w", err)
	}
	defer l.Close()
	if err := l.Verify(); err != nil {
		return err
	}
	if l.StartOffset() != 0 || l.DurableEnd() != l.EndOffset() {
		return fmt.Errorf("offsets after recovery: start %d durable %d end %d", l.StartOffset(), l.DurableEnd(), l.EndOffset())
	}
	r, err := l.Read(0, 0, 0, l.EndOffset())
	if err != nil {
		return err
	}
	recs := map[uint64][]byte{}
	set := r.Records
	for o := uint64(0); len(set) > 0; o++ {
		rb, rest, ok, _ := record.Next(set)
		if !ok {
			return fmt.Errorf("malformed record set")
		}
		if record.OffsetOf(rb) != o {
			return fmt.Errorf("offsets not dense at %d", o)
		}
		recs[o] = rb
		set = rest
	}
	if uint64(len(recs)) != l.EndOffset() {
		return fmt.Errorf("read %d records, end %d", len(recs), l.EndOffset())
	}
	expect := func(o uint64, i, j, n int) []byte {
		w := wire.Record{Topic: "sweep", Offset: o, Payload: sweepPayload(i, j, n)}
		b, _ := w.AppendTo(nil)
		return b
	}
	for o := uint64(0); o < l.EndOffset(); {
		v, err := wire.ParseRecord(recs[o])
		if err != nil {
			return err
		}
		var i, j, n int
		if _, err := fmt.Sscanf(string(v.Payload()), "i=%d j=%d n=%d ", &i, &j, &n); err != nil || j != 0 {
			return fmt.Errorf("record %d does not start a batch", o)
		}
		for k := range n {
			if !bytes.Equal(recs[o+uint64(k)], expect(o+uint64(k), i, k, n)) {
				return fmt.Errorf("batch %d at %d is not whole", i, o)
			}
		}
		o += uint64(n)
	}
	for _, a := range acks {
		for k := range a.n {
			if !bytes.Equal(recs[a.base+uint64(k)], expect(a.base+uint64(k), a.i, k, a.n)) {
				return fmt.Errorf("acknowledged batch %d at %d lost", a.i, a.base)
			}
		}
	}
	b := sweepBatch(t, 99)
	base, err := l.Append(b)
	if err != nil || base != l.EndOffset()-uint64(len(b.OffsetPos)) {
		return fmt.Errorf("append after recovery: %v", err)
	}
	return l.WaitDurable(context.Background(), l.EndOffset())
}

// newSweepMem returns a crashable file system holding an empty, synced
// directory dir.
func newSweepMem(t testing.TB, dir string) *vfs.MemFS {
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsyncDir(mem, "/"); err != nil {
		t.Fatal(err)
	}
	return mem
}

// TestCrashPointSweep crashes an append + roll workload at every file
// operation index, for several shares of unsynced data surviving, and
// checks the recovered log each time.
func TestCrashPointSweep(t *testing.T) {
	t.Parallel()
	for _, concurrent := range []bool{false, true} {
		name := "OneProducer"
		pcts := []int{0, 50, 100}
		if concurrent {
			// 100 % (nothing unsynced lost: a process crash) is left to
			// the one-producer run and the kill -9 test, for time.
			name, pcts = "ThreeProducers", []int{0, 50}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			count := &crashPoint{k: -1}
			mem := newSweepMem(t, "/log")
			logWorkload(t, errorfs.Wrap(mem, count), concurrent)
			sweepCrashPoints(t, "crash-point sweep ("+name+")", pcts, count.ops, 7, func(k, pct int, fail func(string, ...any)) bool {
				mem := newSweepMem(t, "/log")
				cp := &crashPoint{k: k, pct: pct, rng: rand.New(rand.NewPCG(uint64(k), uint64(pct))), mems: []*vfs.MemFS{mem}}
				acks := logWorkload(t, errorfs.Wrap(mem, cp), concurrent)
				if !cp.crashed {
					return false // the run did fewer operations than the count
				}
				if err := checkRecoveredLog(t, cp.clones[0], acks); err != nil {
					fail("%v", err)
				}
				return true
			})
		})
	}
}

// sweepRetentionBytes makes the node sweep's maintenance passes delete old
// segments, some holding the only copy of a producer's batches.
const sweepRetentionBytes = 2048

// sweepProducer is the producer and sequence of the node sweep's batch i
// (even i): "p" writes the first half, "q" the second, so by the end
// retention has removed p's batches.
func sweepProducer(i int) (string, uint64) {
	if i < 12 {
		return "p", uint64(i/2 + 1)
	}
	return "q", uint64((i-12)/2 + 1)
}

// nodeSweep crashes a node workload at every file operation of its logs and
// of its state store (pebble), both cloned at the same moment, and checks
// the partition each crash leaves after recovery: the node opens, the
// partition is there when anything was acknowledged, its log verifies, and
// check finds nothing wrong.
type nodeSweep[A any] struct {
	name   string // the sweep in its log line
	topic  string // of the one partition (0) the workload writes
	seed   uint64 // of the crash clones' random choices
	config func(logFS, stateFS vfs.FS) NodeConfig
	// workload runs until its first failure and returns what was
	// acknowledged.
	workload func(logFS, stateFS vfs.FS) []A
	// check examines the recovered partition against the acknowledgements,
	// calling fail for a violation (and returning after one).
	check func(p *Partition, acks []A, fail func(format string, args ...any))
}

// nodeSweepShares are the unsynced shares the node sweeps keep at a crash:
// none and all, every quarter with STRATA_LONG.
func nodeSweepShares() []int {
	if os.Getenv("STRATA_LONG") != "" {
		return []int{0, 25, 50, 75, 100}
	}
	return []int{0, 100}
}

// newNodeSweepMems returns crashable log and state file systems, each with
// an empty, synced /data.
func newNodeSweepMems(t *testing.T) (logMem, stateMem *vfs.MemFS) {
	return newSweepMem(t, "/data"), newSweepMem(t, "/data")
}

// countNodeOps runs workload once on fresh file systems without crashing and
// returns them and the number of file operations it did on both.
func countNodeOps(t *testing.T, workload func(logFS, stateFS vfs.FS)) (logMem, stateMem *vfs.MemFS, ops int) {
	logMem, stateMem = newNodeSweepMems(t)
	count := &crashPoint{k: -1}
	workload(errorfs.Wrap(logMem, count), errorfs.Wrap(stateMem, stateCrash{count}))
	return logMem, stateMem, count.ops
}

// run crashes the workload at every file operation index below ops (every
// fifth with -short) for each unsynced share and checks each recovery.
func (s nodeSweep[A]) run(t *testing.T, ops int) {
	sweepCrashPoints(t, s.name, nodeSweepShares(), ops, 5, func(k, pct int, fail func(string, ...any)) bool {
		logMem, stateMem := newNodeSweepMems(t)
		cp := &crashPoint{k: k, pct: pct, rng: rand.New(rand.NewPCG(uint64(k), s.seed)), mems: []*vfs.MemFS{stateMem, logMem},
			allOrNothing: map[int]bool{0: true}}
		acks := s.workload(errorfs.Wrap(logMem, cp), errorfs.Wrap(stateMem, stateCrash{cp}))
		if !cp.crashed {
			return false
		}
		s.checkRecovery(cp.clones[1], cp.clones[0], acks, fail)
		return true
	})
}

func (s nodeSweep[A]) checkRecovery(logFS, stateFS vfs.FS, acks []A, fail func(format string, args ...any)) {
	n, err := Open(context.Background(), s.config(logFS, stateFS))
	if err != nil {
		fail("node recovery: %v", err)
		return
	}
	defer n.Close()
	p, err := n.Partition(s.topic, 0)
	if err != nil {
		if len(acks) > 0 {
			fail("partition with acknowledged data missing: %v", err)
		}
		return
	}
	if err := p.log.Verify(); err != nil {
		fail("verify: %v", err)
		return
	}
	s.check(p, acks, fail)
}

// TestNodeCrashPointSweep crashes a node workload (create partition,
// idempotent and plain appends across rolls, maintenance passes with
// checkpoints and retention by bytes) at every file operation of the logs
// and of the state store (pebble), both cloned at the same moment, and
// checks every acknowledged batch and the dedup window after recovery.
func TestNodeCrashPointSweep(t *testing.T) {
	t.Parallel()
	type ack struct {
		res   AppendResult
		i     int
		idemp bool
	}
	sweep := nodeSweep[ack]{name: "node crash-point sweep (logs and state store)", topic: "sweep", seed: 9}
	sweep.config = func(logFS, stateFS vfs.FS) NodeConfig {
		return NodeConfig{Dir: "/data", FS: logFS, StateFS: stateFS, Clock: clock.NewManual(t0),
			Defaults: Defaults{SegmentBytes: 1536, IndexInterval: 256}}
	}
	sweep.workload = func(logFS, stateFS vfs.FS) []ack {
		n, err := Open(context.Background(), sweep.config(logFS, stateFS))
		if err != nil {
			return nil
		}
		defer n.Close()
		p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "sweep", Partition: 0,
			Config: TopicConfig{RetentionBytes: sweepRetentionBytes}})
		if err != nil {
			return nil
		}
		var acks []ack
		for i := range 24 {
			idemp := i%2 == 0
			set := recordSet(t, "sweep", rec{payload: sweepPayload(i, 0, 1)})
			req := &AppendRequest{Acks: AcksLeader, Records: set, RecordCount: 1}
			if idemp {
				pid, seq := sweepProducer(i)
				req.Acks, req.Idempotent, req.ProducerID, req.ProducerEpoch, req.BaseSequence = AcksAll, true, pid, 1, seq
			}
			res, err := p.Append(context.Background(), req)
			if err != nil {
				return acks
			}
			acks = append(acks, ack{res, i, idemp})
			if i%8 == 7 {
				n.Maintain(context.Background())
			}
		}
		return acks
	}
	sweep.check = func(p *Partition, acks []ack, fail func(format string, args ...any)) {
		// Retention removes whole segments from the front: what is left
		// is dense from the log start, and every acknowledged batch at or
		// above it is there.
		start := p.log.StartOffset()
		got := fetchAll(t, p, start)
		for j, d := range got {
			if d.offset != start+uint64(j) {
				fail("offsets not dense from the log start %d", start)
				return
			}
		}
		for _, a := range acks {
			if a.res.BaseOffset < start {
				continue
			}
			if j := a.res.BaseOffset - start; j >= uint64(len(got)) || got[j].payload != string(sweepPayload(a.i, 0, 1)) {
				fail("acknowledged batch %d at %d lost (log start %d)", a.i, a.res.BaseOffset, start)
				return
			}
		}
		// The dedup window recognises each producer's last acknowledged
		// batch, also when retention removed it (the producer checkpoint
		// keeps it).
		retried := map[string]bool{}
		for j := len(acks) - 1; j >= 0; j-- {
			a := acks[j]
			pid, seq := sweepProducer(a.i)
			if !a.idemp || retried[pid] {
				continue
			}
			retried[pid] = true
			res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksAll, Idempotent: true, ProducerID: pid,
				ProducerEpoch: 1, BaseSequence: seq, RecordCount: 1,
				Records: recordSet(t, "sweep", rec{payload: sweepPayload(a.i, 0, 1)})})
			if err != nil || !res.Duplicate || res.BaseOffset != a.res.BaseOffset {
				fail("retry of acked idempotent batch %d of %s (log start %d): %+v %v", a.i, pid, start, res, err)
			}
		}
	}
	var full []ack
	logMem, stateMem, total := countNodeOps(t, func(logFS, stateFS vfs.FS) { full = sweep.workload(logFS, stateFS) })
	// Without a crash, retention must have removed all of p's batches, or
	// the sweep would not exercise the producer checkpoint.
	func() {
		n, err := Open(context.Background(), sweep.config(logMem, stateMem))
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		p, err := n.Partition("sweep", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(full) != 24 || p.log.StartOffset() <= full[10].res.BaseOffset {
			t.Fatalf("workload: %d acks, log start %d: retention did not remove producer p's batches", len(full), p.log.StartOffset())
		}
	}()
	sweep.run(t, total)
}
