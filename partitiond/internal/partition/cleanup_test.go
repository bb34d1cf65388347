package partition

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func smallSegments(c *NodeConfig) {
	c.Defaults.SegmentBytes = 1 << 10
	c.Defaults.IndexInterval = 128
}

func appendBig(t *testing.T, p *Partition, i int) {
	t.Helper()
	appendPayloads(t, p, strings.Repeat("r", 180)+payloadN(i))
}

func TestRetentionByTimeDeletesWholeSegments(t *testing.T) {
	e := newNodeEnv(t, smallSegments)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "ret", 0, TopicConfig{RetentionHours: 1})
	for i := range 20 {
		appendBig(t, p, i)
	}
	e.clock.Advance(30 * time.Minute)
	for i := 20; i < 40; i++ {
		appendBig(t, p, i)
	}
	e.clock.Advance(45 * time.Minute)
	before := p.log.Segments()
	rep := n.Maintain(context.Background())
	if rep[0].Err != nil || rep[0].DeletedSegments == 0 {
		t.Fatalf("report %+v", rep[0])
	}
	o, _ := p.ListOffsets()
	if o.LEO != 40 || o.Earliest == 0 || o.Earliest > 20 {
		t.Fatalf("offsets %+v", o)
	}
	// Whole segments only: the new start is a former segment base.
	found := false
	for _, s := range before {
		found = found || s.Base == o.Earliest
	}
	if !found {
		t.Fatalf("log start %d is not a segment boundary", o.Earliest)
	}
	got := fetchAll(t, p, o.Earliest)
	if len(got) != int(40-o.Earliest) {
		t.Fatalf("%d records after retention", len(got))
	}
	for _, d := range got[len(got)-20:] {
		if !strings.HasSuffix(d.payload, payloadN(int(d.offset))) {
			t.Fatalf("record %d damaged", d.offset)
		}
	}
}

func TestRetentionRollsIdleActiveSegment(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "idle", 0, TopicConfig{RetentionHours: 1})
	appendPayloads(t, p, "a", "b")
	e.clock.Advance(61 * time.Minute)
	rep := n.Maintain(context.Background())
	if !rep[0].Rolled || rep[0].DeletedSegments != 1 {
		t.Fatalf("report %+v", rep[0])
	}
	if o, _ := p.ListOffsets(); o != (Offsets{Earliest: 2, Latest: 2, LEO: 2, HWM: 2, LSO: 2}) {
		t.Fatalf("offsets %+v", o)
	}
	if r, err := p.Fetch(context.Background(), &FetchRequest{Offset: 2}); err != nil || r.RecordCount != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	res := appendPayloads(t, p, "c")
	if res.BaseOffset != 2 {
		t.Fatalf("%+v", res)
	}
}

func TestRetentionByBytes(t *testing.T) {
	e := newNodeEnv(t, smallSegments)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "bytes", 0, TopicConfig{RetentionBytes: 3 << 10})
	for i := range 60 {
		appendBig(t, p, i)
	}
	n.Maintain(context.Background())
	var total int64
	segs := p.log.Segments()
	for _, s := range segs {
		total += s.Size
	}
	if total > 3<<10+(1<<10) || total-segs[0].Size >= 3<<10 {
		t.Fatalf("retained %d bytes in %d segments", total, len(segs))
	}
	o, _ := p.ListOffsets()
	if o.Earliest == 0 || o.LEO != 60 {
		t.Fatalf("%+v", o)
	}
}

func TestRetentionDefaultsAndUnlimited(t *testing.T) {
	e := newNodeEnv(t, smallSegments, func(c *NodeConfig) { c.Defaults.Retention = 2 * time.Hour })
	n := e.open(t)
	defer n.Close()
	def := mustCreate(t, n, "def", 0, TopicConfig{})
	unl := mustCreate(t, n, "unl", 0, TopicConfig{RetentionHours: -1})
	cmp := mustCreate(t, n, "cmp", 0, TopicConfig{CleanupPolicy: PolicyCompact, RetentionHours: 1})
	for i := range 10 {
		appendBig(t, def, i)
		appendBig(t, unl, i)
		if _, err := cmp.Append(context.Background(), &AppendRequest{Acks: AcksLeader, RecordCount: 1,
			Records: recordSet(t, "cmp", rec{key: fmt.Sprint(i), payload: []byte(strings.Repeat("c", 180))})}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(90 * time.Minute)
	n.Maintain(context.Background())
	if o, _ := def.ListOffsets(); o.Earliest != 0 {
		t.Fatalf("broker default 2h deleted after 90m: %+v", o)
	}
	e.clock.Advance(time.Hour)
	n.Maintain(context.Background())
	if o, _ := def.ListOffsets(); o.Earliest != 10 {
		t.Fatalf("broker default retention did not apply: %+v", o)
	}
	if o, _ := unl.ListOffsets(); o.Earliest != 0 {
		t.Fatalf("unlimited retention deleted data: %+v", o)
	}
	if o, _ := cmp.ListOffsets(); o.Earliest != 0 {
		t.Fatalf("compact-only policy deleted by time: %+v", o)
	}
}

func TestSegmentRollByAge(t *testing.T) {
	e := newNodeEnv(t, func(c *NodeConfig) { c.Defaults.SegmentAge = 10 * time.Minute })
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "age", 0, TopicConfig{RetentionHours: -1})
	appendPayloads(t, p, "a")
	e.clock.Advance(11 * time.Minute)
	appendPayloads(t, p, "b") // rolls on append
	if got := len(p.log.Segments()); got != 2 {
		t.Fatalf("%d segments", got)
	}
	e.clock.Advance(11 * time.Minute)
	n.Maintain(context.Background()) // rolls without an append
	segs := p.log.Segments()
	if len(segs) != 3 || segs[2].Size != 0 || segs[2].Base != 2 {
		t.Fatalf("segments %+v", segs)
	}
}

// compactEnv is a node whose cleaner eligibility the test controls.
func compactEnv(t *testing.T, eligible *atomic.Bool, mod ...func(*NodeConfig)) *nodeEnv {
	return newNodeEnv(t, append([]func(*NodeConfig){smallSegments, func(c *NodeConfig) {
		c.CompactionEligible = func(f CompactionFacts) (bool, string) {
			if !eligible.Load() {
				return false, "replicas_not_in_isr"
			}
			return f.HWM == f.LEO, "hwm_behind_leo"
		}
		c.Defaults.DeleteRetention = time.Hour
	}}, mod...)...)
}

func appendKeyed(t *testing.T, p *Partition, key, val string) uint64 {
	t.Helper()
	res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, RecordCount: 1,
		Records: recordSet(t, p.Topic(), rec{key: key, payload: []byte(val)})})
	if err != nil {
		t.Fatal(err)
	}
	return res.BaseOffset
}

func TestCompactionKeepsLatestValuePerKey(t *testing.T) {
	var eligible atomic.Bool
	eligible.Store(true)
	e := compactEnv(t, &eligible)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "cmp", 0, TopicConfig{CleanupPolicy: PolicyCompact})
	latest := map[string]uint64{}
	pad := strings.Repeat("v", 100)
	for round := range 6 {
		for k := range 5 {
			key := fmt.Sprintf("k%d", k)
			latest[key] = appendKeyed(t, p, key, fmt.Sprintf("%s-r%d-%s", key, round, pad))
		}
	}
	before := fetchAll(t, p, 0)
	rep := n.Maintain(context.Background())
	if rep[0].Compaction != CompactionCompleted || rep[0].CompactReason != "cleaned" || rep[0].Compacted.RecordsRemoved == 0 {
		t.Fatalf("report %+v", rep[0])
	}
	after := fetchAll(t, p, 0)
	if len(after) >= len(before) {
		t.Fatalf("nothing removed: %d -> %d", len(before), len(after))
	}
	activeBase := p.log.Segments()[len(p.log.Segments())-1].Base
	seen := map[string]bool{}
	prev := int64(-1)
	for _, d := range after {
		if int64(d.offset) <= prev {
			t.Fatalf("offsets not increasing")
		}
		prev = int64(d.offset)
		// In cleaned segments only the latest value of a key remains.
		if d.offset < activeBase && d.offset != latest[d.key] {
			t.Fatalf("superseded record %d of %s kept", d.offset, d.key)
		}
		if d.offset == latest[d.key] {
			seen[d.key] = true
		}
		if !strings.HasPrefix(d.payload, d.key+"-r") {
			t.Fatalf("record %d damaged", d.offset)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("latest values missing: %v", seen)
	}
	// Offsets are preserved: every surviving record has its old offset.
	old := map[uint64]decoded{}
	for _, d := range before {
		old[d.offset] = d
	}
	for _, d := range after {
		if old[d.offset] != d {
			t.Fatalf("record at %d changed", d.offset)
		}
	}
	// Fetch from inside a gap lands on the next surviving record.
	var firstFrom1 uint64
	for _, d := range after {
		if d.offset >= 1 {
			firstFrom1 = d.offset
			break
		}
	}
	if firstFrom1 == 1 {
		t.Fatal("offset 1 should have been compacted away")
	}
	r, err := p.Fetch(context.Background(), &FetchRequest{Offset: 1, MaxRecords: 1})
	if err != nil || r.RecordCount != 1 || decode(t, r.Records)[0].offset != firstFrom1 || r.NextOffset != firstFrom1+1 {
		t.Fatalf("fetch in a gap: %+v %v, want record %d", r, err, firstFrom1)
	}
	// Survives a restart.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = e.open(t)
	defer n.Close()
	p, _ = n.Partition("cmp", 0)
	again := fetchAll(t, p, 0)
	if len(again) != len(after) {
		t.Fatalf("after restart %d records, want %d", len(again), len(after))
	}
}

func TestCompactionTombstonesExpireAfterDeleteRetention(t *testing.T) {
	var eligible atomic.Bool
	eligible.Store(true)
	e := compactEnv(t, &eligible)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "tomb", 0, TopicConfig{CleanupPolicy: PolicyCompact})
	pad := strings.Repeat("p", 150)
	appendKeyed(t, p, "gone", "value-"+pad)
	tomb := appendKeyed(t, p, "gone", "") // tombstone: key, empty payload
	for i := range 12 {
		appendKeyed(t, p, fmt.Sprintf("other%d", i), pad)
	}
	n.Maintain(context.Background())
	got := fetchAll(t, p, 0)
	if got[0].offset != tomb || got[0].payload != "" {
		t.Fatalf("within delete retention the tombstone stays, value goes: %+v", got[0])
	}
	e.clock.Advance(2 * time.Hour)
	n.Maintain(context.Background())
	got = fetchAll(t, p, 0)
	for _, d := range got {
		if d.key == "gone" {
			t.Fatalf("tombstone survived delete retention: %+v", d)
		}
	}
	if o, _ := p.ListOffsets(); o.Earliest != 0 {
		t.Fatalf("compaction moved the log start: %+v", o)
	}
}

func TestCompactionOnlyWhenEligible(t *testing.T) {
	var eligible atomic.Bool
	e := compactEnv(t, &eligible)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "cmp", 0, TopicConfig{CleanupPolicy: PolicyDeleteCompact})
	for i := range 30 {
		appendKeyed(t, p, "same", fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 100)))
	}
	rep := n.Maintain(context.Background())
	if rep[0].Compaction != CompactionSkipped || rep[0].CompactReason != "replicas_not_in_isr" {
		t.Fatalf("%+v", rep[0])
	}
	if got := fetchAll(t, p, 0); len(got) != 30 {
		t.Fatalf("skipped compaction removed data: %d", len(got))
	}
	eligible.Store(true)
	rep = n.Maintain(context.Background())
	if rep[0].Compaction != CompactionCompleted {
		t.Fatalf("%+v", rep[0])
	}
	st := n.Stats()
	want := map[[2]string]uint64{{"skipped", "replicas_not_in_isr"}: 1, {"completed", "cleaned"}: 1}
	for _, c := range st.Compactions {
		if want[[2]string{c.Result, c.Reason}] != c.Count {
			t.Fatalf("compaction counters %+v", st.Compactions)
		}
	}
	if len(st.Compactions) != 2 {
		t.Fatalf("compaction counters %+v", st.Compactions)
	}
}

func TestCompactionCrashBeforeIndexRewrite(t *testing.T) {
	var eligible atomic.Bool
	eligible.Store(true)
	var failIndex atomic.Bool
	var e *nodeEnv
	e = compactEnv(t, &eligible, func(c *NodeConfig) {
		c.FS = errorfs.Wrap(c.FS, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if failIndex.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".timeindex.tmp") {
				return errorfs.ErrInjected
			}
			return nil
		}))
	})
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "cmp", 0, TopicConfig{CleanupPolicy: PolicyCompact})
	for i := range 30 {
		appendKeyed(t, p, fmt.Sprintf("k%d", i%3), fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 100)))
	}
	failIndex.Store(true)
	rep := n.Maintain(context.Background())
	if rep[0].Compaction != CompactionFailed {
		t.Fatalf("%+v", rep[0])
	}
	live := fetchAll(t, p, 0)
	c := e.crashClone(0)
	c.cfg.FS = c.fs
	n2 := c.open(t)
	defer n2.Close()
	p2, err := n2.Partition("cmp", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := fetchAll(t, p2, 0)
	if len(got) != len(live) {
		t.Fatalf("after crash %d records, live view had %d", len(got), len(live))
	}
	for i := range got {
		if got[i] != live[i] {
			t.Fatalf("record %d differs", i)
		}
	}
}

// TestBeforeRetentionHook: the hook sees the new log start before the
// segments go; a failing hook keeps them (the rest of the pass still runs)
// until a pass where it succeeds.
func TestBeforeRetentionHook(t *testing.T) {
	var fail atomic.Bool
	var seen atomic.Uint64
	e := newNodeEnv(t, smallSegments, func(c *NodeConfig) {
		c.BeforeRetention = func(p *Partition, newStart uint64) error {
			seen.Store(newStart)
			if fail.Load() {
				return fmt.Errorf("heads not saved")
			}
			if p.LogStartOffset() != 0 {
				return fmt.Errorf("the hook ran after the deletion")
			}
			return nil
		}
	})
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "hook", 0, TopicConfig{RetentionBytes: 3 << 10})
	for i := range 60 {
		appendBig(t, p, i)
	}
	fail.Store(true)
	rep := n.Maintain(context.Background())
	if rep[0].Err == nil || rep[0].DeletedSegments != 0 || p.LogStartOffset() != 0 || seen.Load() == 0 {
		t.Fatalf("failing hook: report %+v, log start %d", rep[0], p.LogStartOffset())
	}
	fail.Store(false)
	rep = n.Maintain(context.Background())
	if rep[0].Err != nil || rep[0].DeletedSegments == 0 || p.LogStartOffset() != seen.Load() {
		t.Fatalf("hook: report %+v, log start %d, hook saw %d", rep[0], p.LogStartOffset(), seen.Load())
	}
}
