package partition

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/strataio/strata/partitiond/internal/clock"
)

// compactSweepValue is the value of the keyed record i.
func compactSweepValue(i int) string {
	return fmt.Sprintf("i=%d k=%s %s", i, compactSweepKey(i), strings.Repeat("c", 60+(i*37)%200))
}

func compactSweepKey(i int) string { return fmt.Sprintf("k%d", i%4) }

// TestCompactionCrashPointSweep crashes a compacted topic's workload
// (keyed appends across rolls, maintenance passes that compact closed
// segments, with the producer checkpoint and index rewrites that go with
// them) at every file operation of the logs and the state store, and
// checks after recovery: the log opens and verifies, offsets increase,
// every record is one that was sent at that offset, and every acknowledged
// record is either there byte for byte or superseded by a later record of
// its key that is there (what compaction may remove, and nothing else).
func TestCompactionCrashPointSweep(t *testing.T) {
	t.Parallel()
	pcts := []int{0, 100}
	if os.Getenv("STRATA_LONG") != "" {
		pcts = []int{0, 25, 50, 75, 100}
	}
	cfg := func(logFS, stateFS vfs.FS) NodeConfig {
		return NodeConfig{Dir: "/data", FS: logFS, StateFS: stateFS, Clock: clock.NewManual(t0),
			Defaults:           Defaults{SegmentBytes: 1024, IndexInterval: 128, DeleteRetention: time.Hour},
			CompactionEligible: func(CompactionFacts) (bool, string) { return true, "" }}
	}
	type ack struct {
		i   int
		off uint64
	}
	workload := func(logFS, stateFS vfs.FS) (acks []ack, compactions int) {
		n, err := Open(context.Background(), cfg(logFS, stateFS))
		if err != nil {
			return nil, 0
		}
		defer n.Close()
		p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "cs", Partition: 0,
			Config: TopicConfig{CleanupPolicy: PolicyCompact}})
		if err != nil {
			return nil, 0
		}
		for i := range 12 {
			res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, RecordCount: 1,
				Records: recordSet(t, "cs", rec{key: compactSweepKey(i), payload: []byte(compactSweepValue(i))})})
			if err != nil {
				return acks, compactions
			}
			acks = append(acks, ack{i, res.BaseOffset})
			if i%4 == 3 {
				for _, r := range n.Maintain(context.Background()) {
					if r.Compaction == CompactionCompleted && r.CompactReason == "cleaned" {
						compactions++
					}
				}
			}
		}
		return acks, compactions
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
	_, compactions := workload(errorfs.Wrap(logMem, count), errorfs.Wrap(stateMem, stateCrash{count}))
	if compactions < 2 {
		t.Fatalf("the workload compacted %d times; the sweep would not exercise compaction", compactions)
	}
	total := count.ops
	step := 1
	if testing.Short() {
		step = 5
	}
	points, violations := 0, 0
	perPct := map[int]int{}
	start := time.Now()
	for _, pct := range pcts {
		for k := 0; k < total+3; k += step {
			logMem, stateMem := newMems()
			cp := &crashPoint{k: k, pct: pct, rng: rand.New(rand.NewPCG(uint64(k), 11)), mems: []*vfs.MemFS{stateMem, logMem},
				allOrNothing: map[int]bool{0: true}}
			acks, _ := workload(errorfs.Wrap(logMem, cp), errorfs.Wrap(stateMem, stateCrash{cp}))
			if !cp.crashed {
				continue
			}
			points++
			perPct[pct]++
			fail := func(format string, args ...any) {
				violations++
				t.Errorf("crash at op %d (unsynced kept %d%%): %s", k, pct, fmt.Sprintf(format, args...))
			}
			n, err := Open(context.Background(), cfg(cp.clones[1], cp.clones[0]))
			if err != nil {
				fail("node recovery: %v", err)
				continue
			}
			func() {
				defer n.Close()
				p, err := n.Partition("cs", 0)
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
				at := map[uint64]decoded{}
				latest := map[string]uint64{} // key → highest offset present
				prev := int64(-1)
				for _, d := range got {
					if int64(d.offset) <= prev {
						fail("offsets not increasing at %d", d.offset)
						return
					}
					prev = int64(d.offset)
					var i int
					if _, err := fmt.Sscanf(d.payload, "i=%d ", &i); err != nil || d.payload != compactSweepValue(i) || d.key != compactSweepKey(i) {
						fail("record %d was not sent: %q", d.offset, d.payload)
						return
					}
					at[d.offset] = d
					latest[d.key] = d.offset
				}
				for _, a := range acks {
					key := compactSweepKey(a.i)
					if d, ok := at[a.off]; ok {
						if d.payload != compactSweepValue(a.i) {
							fail("acknowledged offset %d holds %q", a.off, d.payload)
							return
						}
						continue
					}
					if l, ok := latest[key]; !ok || l < a.off {
						fail("acknowledged record %d (key %s) lost without a later value of its key", a.off, key)
						return
					}
				}
			}()
		}
	}
	t.Logf("compaction crash-point sweep: %d file operations (logs and state store), %d compaction passes, %d crash points checked (x%d unsynced shares), %d violations, %v",
		total, compactions, points, len(pcts), violations, time.Since(start).Round(time.Millisecond))
	checkSweepCoverage(t, perPct, pcts, total, step)
}
