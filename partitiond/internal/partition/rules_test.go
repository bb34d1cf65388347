package partition

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/strataio/strata/libs/errcode"
)

// This file holds the table tests of issue 4's "done when" that the other
// files do not: idempotence rule 5 (TTL, durable checkpoints) across
// restarts and retention, the fetch edges after retention and above the
// durable end, and retention and compaction timing on the manual clock.

// restartKind is how a table test restarts a node.
type restartKind int

const (
	cleanClose restartKind = iota // Close (checkpoints), then Open
	powerLoss                     // only synced data survives
)

func (k restartKind) String() string {
	if k == powerLoss {
		return "PowerLoss"
	}
	return "CleanClose"
}

// restart reopens e's node as k describes and returns the new environment
// (sharing e's clock), node and partition topic/0.
func restart(t *testing.T, e *nodeEnv, n *Node, k restartKind, topic string) (*nodeEnv, *Node, *Partition) {
	t.Helper()
	if k == cleanClose {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		c := e.crashClone(0)
		// The crashed node keeps running on the old file system; close it
		// so its goroutines end (what it writes now is not in the clone).
		t.Cleanup(func() { _ = n.Close() })
		e = c
	}
	n2 := e.open(t)
	t.Cleanup(func() { _ = n2.Close() })
	p, err := n2.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return e, n2, p
}

// TestIdempotenceRule5 covers spec 4.6 idempotence rule 5 (producer state
// expires after producer_state_ttl_ms of inactivity; durable checkpoints
// keep the last persisted sequence until the partition data is removed)
// and the original-offsets answer to a retry after a restart, for a clean
// restart and a power loss.
func TestIdempotenceRule5(t *testing.T) {
	const ttl = 30 * time.Minute
	cases := []struct {
		name string
		run  func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind)
	}{
		{"RetryAfterRestartReturnsOriginalOffsets", func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind) {
			appendPayloads(t, p, "plain") // offsets differ from sequences
			var res []AppendResult
			for i := range 3 {
				r, err := idemAppend(t, p, idem{pid: "a", epoch: 7, base: uint64(2*i + 1), last: uint64(2*i + 2), n: 2}, AcksAll)
				if err != nil {
					t.Fatal(err)
				}
				res = append(res, r)
			}
			_, _, p = restart(t, e, n, k, "r5")
			for i := range 3 {
				r, err := idemAppend(t, p, idem{pid: "a", epoch: 7, base: uint64(2*i + 1), last: uint64(2*i + 2), n: 2}, AcksAll)
				if err != nil || !r.Duplicate || r.BaseOffset != res[i].BaseOffset || r.LastOffset != res[i].LastOffset {
					t.Fatalf("retry %d: %+v %v, want the offsets of %+v", i, r, err, res[i])
				}
			}
			if o, _ := p.ListOffsets(); o.LEO != 7 {
				t.Fatalf("retries were appended: %+v", o)
			}
		}},
		{"InactivityBelowTTLKeepsStateAcrossRestart", func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind) {
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 3, base: 1, last: 2, n: 2}, AcksAll); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(ttl - time.Minute)
			_, n, p = restart(t, e, n, k, "r5")
			n.Maintain(context.Background())
			_, err := idemAppend(t, p, idem{pid: "a", epoch: 2, base: 3, n: 1}, AcksAll)
			wantCode(t, err, errcode.StaleProducerEpoch)
			_, err = idemAppend(t, p, idem{pid: "a", epoch: 3, base: 1, n: 1}, AcksAll)
			wantCode(t, err, errcode.DuplicateSequence)
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 3, base: 3, n: 1}, AcksAll); err != nil {
				t.Fatal(err)
			}
		}},
		{"TTLCountsFromLastAppendNotFromRestart", func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind) {
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 3, base: 1, n: 1}, AcksAll); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(20 * time.Minute)
			_, _, p = restart(t, e, n, k, "r5")
			// 31 minutes after the last append, 11 after the restart, and no
			// maintenance pass: the state is expired when the batch is checked.
			e.clock.Advance(11 * time.Minute)
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 1, base: 1, n: 1}, AcksAll); err != nil {
				t.Fatalf("expired producer must start afresh under any epoch: %v", err)
			}
		}},
		{"ExpiredBeforeRestartStaysExpired", func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind) {
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 3, base: 1, last: 4, n: 4}, AcksAll); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(ttl + time.Minute)
			_, _, p = restart(t, e, n, k, "r5")
			_, err := idemAppend(t, p, idem{pid: "a", epoch: 3, base: 5, n: 1}, AcksAll)
			wantCode(t, err, errcode.OutOfOrderSequence)
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 1, base: 1, n: 1}, AcksAll); err != nil {
				t.Fatal(err)
			}
		}},
		{"ActiveProducerKeptWhileOthersExpire", func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind) {
			for _, pid := range []string{"old", "live"} {
				if _, err := idemAppend(t, p, idem{pid: pid, epoch: 1, base: 1, n: 1}, AcksAll); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 4 {
				e.clock.Advance(10 * time.Minute)
				if _, err := idemAppend(t, p, idem{pid: "live", epoch: 1, base: uint64(i + 2), n: 1}, AcksAll); err != nil {
					t.Fatal(err)
				}
			}
			if rep := n.Maintain(context.Background()); rep[0].ExpiredProducer != 1 {
				t.Fatalf("expired %d producers, want 1", rep[0].ExpiredProducer)
			}
			_, _, p = restart(t, e, n, k, "r5")
			if _, err := idemAppend(t, p, idem{pid: "old", epoch: 0, base: 1, n: 1}, AcksAll); err != nil {
				t.Fatalf("expired producer: %v", err)
			}
			_, err := idemAppend(t, p, idem{pid: "live", epoch: 0, base: 6, n: 1}, AcksAll)
			wantCode(t, err, errcode.StaleProducerEpoch)
			if r, err := idemAppend(t, p, idem{pid: "live", epoch: 1, base: 5, n: 1}, AcksAll); err != nil || !r.Duplicate {
				t.Fatalf("retry of the live producer's last batch: %+v %v", r, err)
			}
		}},
		{"CheckpointKeepsSequenceAfterRetentionRemovedItsBatches", func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind) {
			var first, last AppendResult
			for i := range 3 {
				r, err := idemAppend(t, p, idem{pid: "a", epoch: 2, base: uint64(i + 1), n: 1}, AcksAll)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = r
				}
				last = r
			}
			// Other producers fill segments; retention by bytes removes
			// every segment holding a's batches before any checkpoint was
			// written by a maintenance pass.
			for i := range 30 {
				appendBig(t, p, i)
			}
			rep := n.Maintain(context.Background())
			if o, _ := p.ListOffsets(); rep[0].Err != nil || o.Earliest <= last.LastOffset {
				t.Fatalf("retention did not remove the producer's batches: %+v %+v", rep[0], o)
			}
			_, _, p = restart(t, e, n, k, "r5")
			// The sequence is still known: a replay of an old batch is not
			// stored again, and the producer continues where it was.
			// Retries answer with their original offsets, although these are
			// below the log start now.
			leo := p.log.EndOffset()
			for _, w := range []struct {
				seq uint64
				res AppendResult
			}{{1, first}, {3, last}} {
				r, err := idemAppend(t, p, idem{pid: "a", epoch: 2, base: w.seq, n: 1}, AcksAll)
				if err != nil || !r.Duplicate || r.BaseOffset != w.res.BaseOffset {
					t.Fatalf("retry of seq %d: %+v %v, want offsets of %+v", w.seq, r, err, w.res)
				}
			}
			if p.log.EndOffset() != leo {
				t.Fatal("an old sequence was appended again")
			}
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 2, base: 4, n: 1}, AcksAll); err != nil {
				t.Fatal(err)
			}
		}},
		{"DeleteAndRecreateForgetsProducers", func(t *testing.T, e *nodeEnv, n *Node, p *Partition, k restartKind) {
			if _, err := idemAppend(t, p, idem{pid: "a", epoch: 9, base: 1, last: 3, n: 3}, AcksAll); err != nil {
				t.Fatal(err)
			}
			if _, err := p.checkpointProducers(true); err != nil {
				t.Fatal(err)
			}
			if ok, err := n.DeletePartition(context.Background(), "r5", 0); !ok || err != nil {
				t.Fatal(ok, err)
			}
			mustCreate(t, n, "r5", 0, TopicConfig{RetentionBytes: 3 << 10})
			_, _, p = restart(t, e, n, k, "r5")
			if r, err := idemAppend(t, p, idem{pid: "a", epoch: 1, base: 1, n: 1}, AcksAll); err != nil || r.Duplicate || r.BaseOffset != 0 {
				t.Fatalf("producer state survived the partition's removal: %+v %v", r, err)
			}
		}},
	}
	for _, k := range []restartKind{cleanClose, powerLoss} {
		for _, tc := range cases {
			t.Run(k.String()+"/"+tc.name, func(t *testing.T) {
				e := newNodeEnv(t, smallSegments, func(c *NodeConfig) { c.Defaults.ProducerStateTTL = ttl })
				n := e.open(t)
				p := mustCreate(t, n, "r5", 0, TopicConfig{RetentionBytes: 3 << 10})
				tc.run(t, e, n, p, k)
				_ = n.Close()
			})
		}
	}
}

// syncGate blocks every fdatasync of segment files while closed, so a test
// can hold written batches below the durable end.
type syncGate struct {
	mu     sync.Mutex
	open   chan struct{}
	closed bool
}

func newSyncGate() *syncGate { return &syncGate{open: make(chan struct{})} }

func (g *syncGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.open = make(chan struct{})
		g.closed = true
	}
}

func (g *syncGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		close(g.open)
		g.closed = false
	}
}

func (g *syncGate) MaybeError(op errorfs.Op) error {
	if (op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSync) && strings.HasSuffix(op.Path, ".log") {
		g.mu.Lock()
		ch, closed := g.open, g.closed
		g.mu.Unlock()
		if closed {
			<-ch
		}
	}
	return nil
}

func (g *syncGate) String() string { return "syncGate" }

// TestFetchNeverAboveDurableEnd: a batch written but not yet covered by an
// fdatasync is invisible (the high watermark is the durable end); a fetch
// there is an empty answer, not out of range, and a long poll waiting on it
// is woken by the fdatasync.
func TestFetchNeverAboveDurableEnd(t *testing.T) {
	gate := newSyncGate()
	mem := vfs.NewCrashableMem()
	e := newNodeEnv(t, func(c *NodeConfig) { c.FS = errorfs.Wrap(mem, gate); c.StateFS = mem })
	e.fs = mem
	n := e.open(t)
	defer n.Close()
	defer gate.release()
	p := mustCreate(t, n, "hwm", 0, TopicConfig{})
	appendPayloads(t, p, "durable")
	gate.close()
	set, cnt := payloads(t, "hwm", "written-1", "written-2")
	pa, err := p.AppendAsync(context.Background(), &AppendRequest{Acks: AcksLeader, Records: set, RecordCount: cnt})
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := p.ListOffsets(); o != (Offsets{Earliest: 0, Latest: 1, LEO: 3, HWM: 1, LSO: 1}) {
		t.Fatalf("offsets with an unsynced batch: %+v", o)
	}
	cases := []struct {
		name     string
		offset   uint64
		wantOffs []uint64
		wantCode errcode.Code
	}{
		{"BelowHWMStopsAtHWM", 0, []uint64{0}, errcode.Code{}},
		{"AtHWMIsEmpty", 1, nil, errcode.Code{}},
		{"BetweenHWMAndLEOIsEmpty", 2, nil, errcode.Code{}},
		{"AtLEOIsEmpty", 3, nil, errcode.Code{}},
		{"AboveLEOOutOfRange", 4, nil, errcode.OffsetOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := p.Fetch(context.Background(), &FetchRequest{Offset: tc.offset})
			if tc.wantCode != (errcode.Code{}) {
				e := wantCode(t, err, tc.wantCode)
				if field(e, "requested") != utoa(tc.offset) || field(e, "latest") != "1" {
					t.Fatalf("%v", e)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, r.Records)
			if len(got) != len(tc.wantOffs) || r.HighWatermark != 1 || r.LogEndOffset != 3 {
				t.Fatalf("%+v %+v", got, r)
			}
			for i, d := range got {
				if d.offset != tc.wantOffs[i] {
					t.Fatalf("%+v", got)
				}
			}
			if len(got) == 0 && r.NextOffset != tc.offset {
				t.Fatalf("next %d on an empty answer at %d", r.NextOffset, tc.offset)
			}
		})
	}
	// A long poll at the high watermark waits although the batch is
	// written, and the fdatasync wakes it.
	done := make(chan FetchResult, 1)
	go func() {
		r, err := p.Fetch(context.Background(), &FetchRequest{Offset: 1, Wait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		t.Fatalf("long poll returned before the fdatasync: %+v", r)
	case <-time.After(30 * time.Millisecond):
	}
	gate.release()
	select {
	case r := <-done:
		got := decode(t, r.Records)
		if len(got) != 2 || got[0].payload != "written-1" || got[1].offset != 2 || r.HighWatermark != 3 {
			t.Fatalf("woken fetch: %+v %+v", got, r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fdatasync did not wake the long poll")
	}
	if err := pa.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestFetchEdgesAfterRetention: the retained range's edges once retention
// moved the log start, and once it removed every record.
func TestFetchEdgesAfterRetention(t *testing.T) {
	e := newNodeEnv(t, smallSegments)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "edge", 0, TopicConfig{RetentionHours: 1})
	all := mustCreate(t, n, "gone", 0, TopicConfig{RetentionHours: 1})
	for i := range 20 {
		appendBig(t, p, i)
	}
	appendPayloads(t, all, "a", "b", "c")
	e.clock.Advance(2 * time.Hour)
	for i := 20; i < 24; i++ {
		appendBig(t, p, i)
	}
	n.Maintain(context.Background())
	o, _ := p.ListOffsets()
	s := o.Earliest
	if s == 0 || s > 20 || o.LEO != 24 {
		t.Fatalf("retention: %+v", o)
	}
	if o2, _ := all.ListOffsets(); o2 != (Offsets{Earliest: 3, Latest: 3, LEO: 3, HWM: 3, LSO: 3}) {
		t.Fatalf("fully expired partition: %+v", o2)
	}
	type want struct {
		first uint64 // first offset returned
		count int
		oor   bool
	}
	cases := []struct {
		name   string
		p      *Partition
		offset uint64
		want   want
	}{
		{"ZeroBelowStart", p, 0, want{oor: true}},
		{"JustBelowStart", p, s - 1, want{oor: true}},
		{"AtStart", p, s, want{first: s, count: int(24 - s)}},
		{"AtEnd", p, 24, want{}},
		{"AboveEnd", p, 25, want{oor: true}},
		{"EmptiedJustBelowEnd", all, 2, want{oor: true}},
		{"EmptiedAtEnd", all, 3, want{}},
		{"EmptiedAboveEnd", all, 4, want{oor: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.p.Fetch(context.Background(), &FetchRequest{Offset: tc.offset})
			if tc.want.oor {
				ee := wantCode(t, err, errcode.OffsetOutOfRange)
				o, _ := tc.p.ListOffsets()
				if field(ee, "requested") != utoa(tc.offset) || field(ee, "earliest") != utoa(o.Earliest) || field(ee, "latest") != utoa(o.Latest) {
					t.Fatalf("%v", ee)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, r.Records)
			if len(got) != tc.want.count || len(got) > 0 && got[0].offset != tc.want.first {
				t.Fatalf("%d records from %v", len(got), got)
			}
		})
	}
	// A long poll on the emptied partition's end is woken by an append.
	done := make(chan FetchResult, 1)
	go func() {
		r, err := all.Fetch(context.Background(), &FetchRequest{Offset: 3, Wait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(10 * time.Millisecond)
	appendPayloads(t, all, "d")
	select {
	case r := <-done:
		if got := decode(t, r.Records); len(got) != 1 || got[0].offset != 3 || got[0].payload != "d" {
			t.Fatalf("%+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll on an emptied partition not woken")
	}
}

// TestRetentionTimesSurviveRestart: segment ages come from the stored
// append times, so a restart (clean or power loss) neither deletes young
// segments early nor forgets old ones.
func TestRetentionTimesSurviveRestart(t *testing.T) {
	for _, k := range []restartKind{cleanClose, powerLoss} {
		t.Run(k.String(), func(t *testing.T) {
			e := newNodeEnv(t, smallSegments)
			n := e.open(t)
			p := mustCreate(t, n, "age", 0, TopicConfig{RetentionHours: 1})
			for i := range 15 { // t0
				appendBig(t, p, i)
			}
			e.clock.Advance(40 * time.Minute)
			for i := 15; i < 30; i++ { // t0+40m
				appendBig(t, p, i)
			}
			e.clock.Advance(10 * time.Minute)
			e, n, p = restart(t, e, n, k, "age")
			// t0+50m: nothing is an hour old.
			if rep := n.Maintain(context.Background()); rep[0].DeletedSegments != 0 {
				t.Fatalf("deleted %d segments before any was an hour old", rep[0].DeletedSegments)
			}
			// t0+70m: only segments whose last append was at t0 go.
			e.clock.Advance(20 * time.Minute)
			n.Maintain(context.Background())
			o, _ := p.ListOffsets()
			if o.Earliest == 0 || o.Earliest > 15 {
				t.Fatalf("after the first hour: %+v", o)
			}
			for _, d := range fetchAll(t, p, o.Earliest) {
				if d.offset >= 15 && !strings.HasSuffix(d.payload, payloadN(int(d.offset))) {
					t.Fatalf("record %d damaged", d.offset)
				}
			}
			if got := len(fetchAll(t, p, o.Earliest)); got != int(30-o.Earliest) {
				t.Fatalf("%d records kept from %d", got, o.Earliest)
			}
			// t0+110m: the rest is more than an hour old; the idle active
			// segment is rolled so it goes too.
			e.clock.Advance(40 * time.Minute)
			n.Maintain(context.Background())
			if o, _ := p.ListOffsets(); o != (Offsets{Earliest: 30, Latest: 30, LEO: 30, HWM: 30, LSO: 30}) {
				t.Fatalf("after the second hour: %+v", o)
			}
		})
	}
}

// TestRetentionPolicies is a table over cleanup policy and the retention
// settings (topic value, 0 = broker default, negative = unlimited) for time
// and bytes, on the manual clock.
func TestRetentionPolicies(t *testing.T) {
	const records = 40
	cases := []struct {
		name      string
		defaults  func(*Defaults)
		cfg       TopicConfig
		advance   time.Duration
		wantTrim  bool // log start moved
		wantBytes int64
	}{
		{name: "TimeNotReached", cfg: TopicConfig{RetentionHours: 2}, advance: 119 * time.Minute},
		{name: "TimeReached", cfg: TopicConfig{RetentionHours: 2}, advance: 121 * time.Minute, wantTrim: true},
		{name: "TimeUnlimited", defaults: func(d *Defaults) { d.Retention = time.Hour }, cfg: TopicConfig{RetentionHours: -1}, advance: 1000 * time.Hour},
		{name: "TimeBrokerDefault", defaults: func(d *Defaults) { d.Retention = time.Hour }, advance: 61 * time.Minute, wantTrim: true},
		{name: "BytesTopic", cfg: TopicConfig{RetentionBytes: 4 << 10}, wantTrim: true, wantBytes: 4 << 10},
		{name: "BytesBrokerDefault", defaults: func(d *Defaults) { d.RetentionBytes = 2 << 10 }, wantTrim: true, wantBytes: 2 << 10},
		{name: "BytesUnlimitedOverridesDefault", defaults: func(d *Defaults) { d.RetentionBytes = 2 << 10 }, cfg: TopicConfig{RetentionBytes: -1}},
		{name: "BytesAboveLogSize", cfg: TopicConfig{RetentionBytes: 1 << 20}},
		{name: "DeleteCompactAppliesTime", cfg: TopicConfig{CleanupPolicy: PolicyDeleteCompact, RetentionHours: 1}, advance: 61 * time.Minute, wantTrim: true},
		{name: "DeleteCompactAppliesBytes", cfg: TopicConfig{CleanupPolicy: PolicyDeleteCompact, RetentionBytes: 4 << 10}, wantTrim: true, wantBytes: 4 << 10},
		{name: "CompactIgnoresTime", cfg: TopicConfig{CleanupPolicy: PolicyCompact, RetentionHours: 1}, advance: 100 * time.Hour},
		{name: "CompactIgnoresBytes", cfg: TopicConfig{CleanupPolicy: PolicyCompact, RetentionBytes: 1 << 10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newNodeEnv(t, smallSegments, func(c *NodeConfig) {
				if tc.defaults != nil {
					tc.defaults(&c.Defaults)
				}
			})
			n := e.open(t)
			defer n.Close()
			p := mustCreate(t, n, "ret", 0, tc.cfg)
			// Distinct keys so compaction (never eligible here: no
			// eligibility source) would not remove anything either way.
			for i := range records {
				if _, err := p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, RecordCount: 1,
					Records: recordSet(t, "ret", rec{key: payloadN(i), payload: []byte(strings.Repeat("r", 180) + payloadN(i))})}); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Advance(tc.advance)
			rep := n.Maintain(context.Background())
			if rep[0].Err != nil {
				t.Fatal(rep[0].Err)
			}
			o, _ := p.ListOffsets()
			if (o.Earliest > 0) != tc.wantTrim || o.LEO != records {
				t.Fatalf("offsets %+v, trim wanted %v (report %+v)", o, tc.wantTrim, rep[0])
			}
			var total int64
			segs := p.log.Segments()
			for _, s := range segs {
				total += s.Size
			}
			if tc.wantBytes > 0 && (total-segs[0].Size >= tc.wantBytes || total > tc.wantBytes+smallSegmentBytes) {
				t.Fatalf("retained %d bytes for a %d byte limit", total, tc.wantBytes)
			}
			// What is kept is intact and starts at the log start.
			got := fetchAll(t, p, o.Earliest)
			if len(got) != int(records-o.Earliest) || len(got) > 0 && got[0].offset != o.Earliest {
				t.Fatalf("%d records from %d", len(got), o.Earliest)
			}
		})
	}
}

const smallSegmentBytes = 1 << 10

// TestCompactionKeepsDedupWindowAcrossPowerLoss: compaction of a compacted
// topic written by an idempotent producer removes superseded batches of the
// dedup window; after a power loss every retry of the last batches still
// answers with its original offsets and the sequence continues.
func TestCompactionKeepsDedupWindowAcrossPowerLoss(t *testing.T) {
	var eligible atomic.Bool
	eligible.Store(true)
	e := compactEnv(t, &eligible)
	n := e.open(t)
	p := mustCreate(t, n, "cmp", 0, TopicConfig{CleanupPolicy: PolicyCompact})
	pad := strings.Repeat("v", 120)
	type sent struct {
		seq uint64
		key string
		res AppendResult
	}
	var batches []sent
	for i := range 30 {
		key := []string{"k0", "k1", "k2"}[i%3]
		set := recordSet(t, "cmp", rec{key: key, payload: []byte(payloadN(i) + pad)})
		res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksAll, Idempotent: true, ProducerID: "a", ProducerEpoch: 1,
			BaseSequence: uint64(i + 1), Records: set, RecordCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, sent{uint64(i + 1), key, res})
	}
	rep := n.Maintain(context.Background())
	if rep[0].Compaction != CompactionCompleted || rep[0].Compacted.RecordsRemoved == 0 {
		t.Fatalf("report %+v", rep[0])
	}
	_, _, p = restart(t, e, n, powerLoss, "cmp")
	leo := p.log.EndOffset()
	for _, b := range batches[len(batches)-5:] {
		set := recordSet(t, "cmp", rec{key: b.key, payload: []byte(payloadN(int(b.seq-1)) + pad)})
		r, err := p.Append(context.Background(), &AppendRequest{Acks: AcksAll, Idempotent: true, ProducerID: "a", ProducerEpoch: 1,
			BaseSequence: b.seq, Records: set, RecordCount: 1})
		if err != nil || !r.Duplicate || r.BaseOffset != b.res.BaseOffset {
			t.Fatalf("retry of seq %d: %+v %v, want offset %d", b.seq, r, err, b.res.BaseOffset)
		}
	}
	if p.log.EndOffset() != leo {
		t.Fatal("retries were appended")
	}
	set := recordSet(t, "cmp", rec{key: "k0", payload: []byte("next")})
	if r, err := p.Append(context.Background(), &AppendRequest{Acks: AcksAll, Idempotent: true, ProducerID: "a", ProducerEpoch: 1,
		BaseSequence: 31, Records: set, RecordCount: 1}); err != nil || r.BaseOffset != leo {
		t.Fatalf("next batch: %+v %v", r, err)
	}
}
