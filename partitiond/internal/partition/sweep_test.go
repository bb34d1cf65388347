package partition

import (
	"bytes"
	"context"
	"encoding/binary"
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
}

func (c *crashPoint) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return errorfs.ErrInjected
	}
	if c.ops == c.k {
		c.crashed = true
		for _, m := range c.mems {
			c.clones = append(c.clones, m.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: c.pct, RNG: c.rng}))
		}
		return errorfs.ErrInjected
	}
	c.ops++
	return nil
}

func (c *crashPoint) String() string { return "crashPoint" }

// sweepPayload is record j of batch i of n records.
func sweepPayload(i, j, n int) []byte {
	p := bytes.Repeat([]byte{byte(i*13 + j)}, 40+(i*37+j*11)%300)
	copy(p, fmt.Sprintf("i=%d j=%d n=%d ", i, j, n))
	return p
}

func sweepBatch(t testing.TB, i int) *seglog.Batch {
	n := 1 + i%4
	b := &seglog.Batch{}
	for j := range n {
		r := wire.Record{Topic: "sweep", Payload: sweepPayload(i, j, n)}
		rb, err := r.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := record.Wire{}.Inspect(rb)
		if err != nil {
			t.Fatal(err)
		}
		b.OffsetPos = append(b.OffsetPos, len(b.Records)+4+in.OffsetPos)
		b.Records = binary.BigEndian.AppendUint32(b.Records, uint32(len(rb)))
		b.Records = append(b.Records, rb...)
	}
	return b
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
	l, err := seglog.Open(seglog.Config{Dir: "/log", FS: fsys.FromVFS(fs), Syncer: sy, Cache: seglog.NewReaderCache(4),
		Clock: clock.NewManual(t0), SegmentBytes: 2048, IndexInterval: 256})
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

func newSweepMem(t testing.TB) *vfs.MemFS {
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll("/log", 0o755); err != nil {
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
	pcts := []int{0, 50, 100}
	for _, concurrent := range []bool{false, true} {
		name := "OneProducer"
		if concurrent {
			name = "ThreeProducers"
		}
		t.Run(name, func(t *testing.T) {
			count := &crashPoint{k: -1}
			mem := newSweepMem(t)
			logWorkload(t, errorfs.Wrap(mem, count), concurrent)
			total := count.ops
			step := 1
			if testing.Short() {
				step = 7
			}
			points, violations := 0, 0
			start := time.Now()
			for _, pct := range pcts {
				for k := 0; k < total+3; k += step {
					mem := newSweepMem(t)
					cp := &crashPoint{k: k, pct: pct, rng: rand.New(rand.NewPCG(uint64(k), uint64(pct))), mems: []*vfs.MemFS{mem}}
					acks := logWorkload(t, errorfs.Wrap(mem, cp), concurrent)
					if !cp.crashed {
						continue // the run did fewer operations than the count
					}
					points++
					if err := checkRecoveredLog(t, cp.clones[0], acks); err != nil {
						violations++
						t.Errorf("crash at op %d (unsynced kept %d%%): %v", k, pct, err)
					}
				}
			}
			t.Logf("crash-point sweep (%s): %d file operations in the workload, %d crash points checked (x%d unsynced shares), %d violations, %v",
				name, total, points, len(pcts), violations, time.Since(start).Round(time.Millisecond))
			if points < total {
				t.Fatalf("only %d crash points for %d operations", points, total)
			}
		})
	}
}

// TestNodeCrashPointSweep crashes a node workload (create partition,
// idempotent and plain appends across rolls, maintenance checkpoints) at
// every file operation of the logs, with pebble's state cloned at the same
// moment, and checks every acknowledged batch and the dedup window after
// recovery.
func TestNodeCrashPointSweep(t *testing.T) {
	pcts := []int{0, 100}
	if os.Getenv("STRATA_LONG") != "" {
		pcts = []int{0, 25, 50, 75, 100}
	}
	type ack struct {
		res   AppendResult
		i     int
		idemp bool
	}
	workload := func(logFS, stateFS vfs.FS) []ack {
		n, err := Open(context.Background(), NodeConfig{Dir: "/data", FS: logFS, StateFS: stateFS, Clock: clock.NewManual(t0),
			Defaults: Defaults{SegmentBytes: 1536, IndexInterval: 256}})
		if err != nil {
			return nil
		}
		defer n.Close()
		p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "sweep", Partition: 0})
		if err != nil {
			return nil
		}
		var acks []ack
		for i := range 24 {
			idemp := i%2 == 0
			set := recordSet(t, "sweep", rec{payload: sweepPayload(i, 0, 1)})
			req := &AppendRequest{Acks: AcksLeader, Records: set, RecordCount: 1}
			if idemp {
				req.Acks, req.Idempotent, req.ProducerID, req.ProducerEpoch, req.BaseSequence = AcksAll, true, "p", 1, uint64(i/2+1)
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
	newMems := func() (*vfs.MemFS, *vfs.MemFS) {
		a, b := vfs.NewCrashableMem(), vfs.NewCrashableMem()
		for _, m := range []*vfs.MemFS{a, b} {
			if err := m.MkdirAll("/data", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fsyncDir(m, "/"); err != nil {
				t.Fatal(err)
			}
		}
		return a, b
	}
	logMem, stateMem := newMems()
	count := &crashPoint{k: -1}
	workload(errorfs.Wrap(logMem, count), stateMem)
	total := count.ops
	step := 1
	if testing.Short() {
		step = 5
	}
	points, violations := 0, 0
	start := time.Now()
	for _, pct := range pcts {
		for k := 0; k < total+3; k += step {
			logMem, stateMem := newMems()
			cp := &crashPoint{k: k, pct: pct, rng: rand.New(rand.NewPCG(uint64(k), 9)), mems: []*vfs.MemFS{stateMem, logMem}}
			acks := workload(errorfs.Wrap(logMem, cp), stateMem)
			if !cp.crashed {
				continue
			}
			points++
			fail := func(format string, args ...any) {
				violations++
				t.Errorf("crash at op %d (unsynced kept %d%%): %s", k, pct, fmt.Sprintf(format, args...))
			}
			n, err := Open(context.Background(), NodeConfig{Dir: "/data", FS: cp.clones[1], StateFS: cp.clones[0],
				Clock: clock.NewManual(t0), Defaults: Defaults{SegmentBytes: 1536, IndexInterval: 256}})
			if err != nil {
				fail("node recovery: %v", err)
				continue
			}
			func() {
				defer n.Close()
				p, err := n.Partition("sweep", 0)
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
				got := fetchAll(t, p, 0)
				for j, d := range got {
					if d.offset != uint64(j) {
						fail("offsets not dense")
						return
					}
				}
				for _, a := range acks {
					if a.res.BaseOffset >= uint64(len(got)) || got[a.res.BaseOffset].payload != string(sweepPayload(a.i, 0, 1)) {
						fail("acknowledged batch %d at %d lost", a.i, a.res.BaseOffset)
						return
					}
				}
				// The dedup window recognises the last acknowledged
				// idempotent batch.
				for j := len(acks) - 1; j >= 0; j-- {
					if !acks[j].idemp {
						continue
					}
					a := acks[j]
					res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksAll, Idempotent: true, ProducerID: "p",
						ProducerEpoch: 1, BaseSequence: uint64(a.i/2 + 1), RecordCount: 1,
						Records: recordSet(t, "sweep", rec{payload: sweepPayload(a.i, 0, 1)})})
					if err != nil || !res.Duplicate || res.BaseOffset != a.res.BaseOffset {
						fail("retry of acked idempotent batch %d: %+v %v", a.i, res, err)
					}
					break
				}
			}()
		}
	}
	t.Logf("node crash-point sweep: %d log file operations, %d crash points checked (x%d unsynced shares), %d violations, %v",
		total, points, len(pcts), violations, time.Since(start).Round(time.Millisecond))
}
