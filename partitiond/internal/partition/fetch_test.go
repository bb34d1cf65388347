package partition

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

func TestFetchEdges(t *testing.T) {
	n, empty := openPartition(t, "empty", 0, TopicConfig{})
	p := mustCreate(t, n, "full", 0, TopicConfig{})
	for i := 0; i < 10; i += 2 {
		appendPayloads(t, p, payloadN(i), payloadN(i+1))
	}
	cases := []struct {
		name       string
		p          *Partition
		req        FetchRequest
		wantCode   errcode.Code
		wantOffs   []uint64
		wantNext   uint64
		wantFields map[string]string
	}{
		{name: "EmptyPartitionAtZero", p: empty, req: FetchRequest{Offset: 0}, wantNext: 0},
		{name: "EmptyPartitionAboveEnd", p: empty, req: FetchRequest{Offset: 1}, wantCode: errcode.OffsetOutOfRange,
			wantFields: map[string]string{"requested": "1", "earliest": "0", "latest": "0"}},
		{name: "FromStart", p: p, req: FetchRequest{Offset: 0, MaxRecords: 3}, wantOffs: []uint64{0, 1, 2}, wantNext: 3},
		{name: "InsideABatch", p: p, req: FetchRequest{Offset: 5, MaxRecords: 2}, wantOffs: []uint64{5, 6}, wantNext: 7},
		{name: "ToTheEnd", p: p, req: FetchRequest{Offset: 7}, wantOffs: []uint64{7, 8, 9}, wantNext: 10},
		{name: "ExactEndIsEmpty", p: p, req: FetchRequest{Offset: 10}, wantNext: 10},
		{name: "AboveEndOutOfRange", p: p, req: FetchRequest{Offset: 11}, wantCode: errcode.OffsetOutOfRange,
			wantFields: map[string]string{"requested": "11", "earliest": "0", "latest": "10"}},
		{name: "MaxBytesCutsAtARecord", p: p, req: FetchRequest{Offset: 0, MaxBytes: 130}, wantOffs: []uint64{0, 1}, wantNext: 2},
		{name: "FirstRecordAlwaysReturned", p: p, req: FetchRequest{Offset: 3, MaxBytes: 1}, wantOffs: []uint64{3}, wantNext: 4},
		{name: "MatchingLifecycleEpoch", p: p, req: FetchRequest{Offset: 0, LifecycleEpoch: 0}, wantOffs: []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, wantNext: 10},
		{name: "NewerLifecycleEpochPending", p: p, req: FetchRequest{Offset: 0, LifecycleEpoch: 1}, wantCode: errcode.LifecycleEpochPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.p.Fetch(context.Background(), &tc.req)
			if tc.wantCode != (errcode.Code{}) {
				e := wantCode(t, err, tc.wantCode)
				for k, v := range tc.wantFields {
					if field(e, k) != v {
						t.Fatalf("field %s = %q, want %q (%v)", k, field(e, k), v, e)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, r.Records)
			if len(got) != len(tc.wantOffs) || r.RecordCount != len(got) {
				t.Fatalf("got %d records (%d counted), want %v", len(got), r.RecordCount, tc.wantOffs)
			}
			for i, d := range got {
				if d.offset != tc.wantOffs[i] || d.payload != payloadN(int(d.offset)) {
					t.Fatalf("record %d: %+v", i, d)
				}
			}
			if r.NextOffset != tc.wantNext {
				t.Fatalf("next %d, want %d", r.NextOffset, tc.wantNext)
			}
			if tc.p == p && (r.HighWatermark != 10 || r.LogEndOffset != 10 || r.LogStartOffset != 0) {
				t.Fatalf("offsets %+v", r)
			}
		})
	}
}

func TestFetchBelowRetainedLogIsOutOfRange(t *testing.T) {
	e := newNodeEnv(t, func(c *NodeConfig) { c.Defaults.SegmentBytes = 1 << 10 })
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "ret", 0, TopicConfig{RetentionHours: 1})
	for i := range 20 {
		appendPayloads(t, p, strings.Repeat("x", 200)+payloadN(i))
	}
	e.clock.Advance(2 * time.Hour)
	appendPayloads(t, p, "new")
	n.Maintain(context.Background())
	off, _ := p.ListOffsets()
	if off.Earliest == 0 {
		t.Fatalf("retention deleted nothing: %+v", off)
	}
	_, err := p.Fetch(context.Background(), &FetchRequest{Offset: 0})
	ee := wantCode(t, err, errcode.OffsetOutOfRange)
	if field(ee, "requested") != "0" || field(ee, "earliest") != utoa(off.Earliest) || field(ee, "latest") != "21" {
		t.Fatalf("%v", ee)
	}
	if ee.Class != errcode.ClassConflict {
		t.Fatalf("class %v", ee.Class)
	}
}

func TestFetchLongPollWakesOnAppend(t *testing.T) {
	_, p := openPartition(t, "poll", 0, TopicConfig{})
	appendPayloads(t, p, "first")
	type answer struct {
		r   FetchResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := p.Fetch(context.Background(), &FetchRequest{Offset: 1, Wait: time.Minute})
		done <- answer{r, err}
	}()
	select {
	case a := <-done:
		t.Fatalf("fetch at the end returned before any append: %+v %v", a.r, a.err)
	case <-time.After(20 * time.Millisecond):
	}
	appendPayloads(t, p, "second")
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatal(a.err)
		}
		got := decode(t, a.r.Records)
		if len(got) != 1 || got[0].offset != 1 || got[0].payload != "second" || a.r.NextOffset != 2 {
			t.Fatalf("%+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll was not woken by the append")
	}
}

func TestFetchLongPollTimesOut(t *testing.T) {
	_, p := openPartition(t, "poll", 0, TopicConfig{})
	appendPayloads(t, p, "only")
	start := time.Now()
	r, err := p.Fetch(context.Background(), &FetchRequest{Offset: 1, Wait: 30 * time.Millisecond})
	if err != nil || r.RecordCount != 0 || r.NextOffset != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("returned after %v, before the wait ended", el)
	}
}

func TestFetchLongPollEndsWithContext(t *testing.T) {
	_, p := openPartition(t, "poll", 0, TopicConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err := p.Fetch(ctx, &FetchRequest{Offset: 0, Wait: time.Minute})
	wantCode(t, err, errcode.RequestCancelled)
}

func TestFetchLongPollEndsWhenPartitionDeleted(t *testing.T) {
	n, p := openPartition(t, "poll", 0, TopicConfig{})
	done := make(chan error, 1)
	go func() {
		_, err := p.Fetch(context.Background(), &FetchRequest{Offset: 0, Wait: time.Minute})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if ok, err := n.DeletePartition(context.Background(), "poll", 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	select {
	case err := <-done:
		wantCode(t, err, errcode.PartitionNotFound)
	case <-time.After(10 * time.Second):
		t.Fatal("long poll outlived its partition")
	}
}

func TestListOffsets(t *testing.T) {
	_, p := openPartition(t, "lo", 0, TopicConfig{})
	if o, _ := p.ListOffsets(); o != (Offsets{}) {
		t.Fatalf("%+v", o)
	}
	appendPayloads(t, p, "a", "b", "c")
	if o, _ := p.ListOffsets(); o != (Offsets{Earliest: 0, Latest: 3, LEO: 3, HWM: 3, LSO: 3}) {
		t.Fatalf("%+v", o)
	}
}

func TestOffsetForTimeUsesTimeIndex(t *testing.T) {
	n := newNodeEnv(t, func(c *NodeConfig) { c.Defaults.IndexInterval = 64; c.Defaults.SegmentBytes = 2048 }).open(t)
	defer n.Close()
	p := mustCreate(t, n, "ts", 0, TopicConfig{})
	for i := range 40 {
		set := recordSet(t, "ts", rec{payload: []byte(payloadN(i)), ts: int64(1000 + 10*i)})
		if _, err := p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, Records: set, RecordCount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ts   int64
		want uint64
		ok   bool
	}{{0, 0, true}, {1000, 0, true}, {1005, 1, true}, {1200, 20, true}, {1390, 39, true}, {1391, 0, false}} {
		got, ok, err := p.OffsetForTime(tc.ts)
		if err != nil || ok != tc.ok || ok && got != tc.want {
			t.Fatalf("ts %d: %d %v %v, want %d %v", tc.ts, got, ok, err, tc.want, tc.ok)
		}
	}
}
