package partition

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
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
	type ack struct {
		i   int
		off uint64
	}
	sweep := nodeSweep[ack]{topic: "cs", seed: 11}
	sweep.config = func(logFS, stateFS vfs.FS) NodeConfig {
		return NodeConfig{Dir: "/data", FS: logFS, StateFS: stateFS, Clock: clock.NewManual(t0),
			Defaults:           Defaults{SegmentBytes: 1024, IndexInterval: 128, DeleteRetention: time.Hour},
			CompactionEligible: func(CompactionFacts) (bool, string) { return true, "" }}
	}
	workload := func(logFS, stateFS vfs.FS) (acks []ack, compactions int) {
		n, err := Open(context.Background(), sweep.config(logFS, stateFS))
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
	sweep.workload = func(logFS, stateFS vfs.FS) []ack {
		acks, _ := workload(logFS, stateFS)
		return acks
	}
	sweep.check = func(p *Partition, acks []ack, fail func(format string, args ...any)) {
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
	}
	var compactions int
	_, _, total := countNodeOps(t, func(logFS, stateFS vfs.FS) { _, compactions = workload(logFS, stateFS) })
	if compactions < 2 {
		t.Fatalf("the workload compacted %d times; the sweep would not exercise compaction", compactions)
	}
	sweep.name = fmt.Sprintf("compaction crash-point sweep (logs and state store, %d compaction passes)", compactions)
	sweep.run(t, total)
}
