package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

// idem is one idempotent append in a table test.
type idem struct {
	pid        string
	epoch      int64
	base, last uint64
	n          int
	// want: "" ok, "dup" duplicate (with offsets of step dupOf), or a code.
	want  string
	code  errcode.Code
	dupOf int
}

func idemAppend(t *testing.T, p *Partition, s idem, acks int32) (AppendResult, error) {
	t.Helper()
	ps := make([]string, s.n)
	for i := range ps {
		ps[i] = s.pid + "-" + payloadN(int(s.base)+i)
	}
	set, cnt := payloads(t, p.Topic(), ps...)
	return p.Append(context.Background(), &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: acks, Records: set, RecordCount: cnt,
		ProducerID: s.pid, ProducerEpoch: s.epoch, BaseSequence: s.base, LastSequence: s.last, Idempotent: true})
}

func TestIdempotenceRules(t *testing.T) {
	cases := []struct {
		name  string
		steps []idem
	}{
		{"FirstSequenceIsOne", []idem{{pid: "a", epoch: 0, base: 1, last: 2, n: 2}}},
		{"FirstSequenceAboveOneIsAGap", []idem{{pid: "a", base: 2, last: 2, n: 1, want: "err", code: errcode.OutOfOrderSequence}}},
		{"ConsecutiveBatchesAppend", []idem{
			{pid: "a", base: 1, last: 3, n: 3}, {pid: "a", base: 4, last: 4, n: 1}, {pid: "a", base: 5, last: 6, n: 2}}},
		{"GapRejected", []idem{
			{pid: "a", base: 1, last: 1, n: 1}, {pid: "a", base: 3, last: 3, n: 1, want: "err", code: errcode.OutOfOrderSequence}}},
		{"OverlapRejected", []idem{
			{pid: "a", base: 1, last: 3, n: 3}, {pid: "a", base: 3, last: 5, n: 3, want: "err", code: errcode.OutOfOrderSequence}}},
		{"RetryReturnsOriginalOffsets", []idem{
			{pid: "a", base: 1, last: 2, n: 2}, {pid: "b", base: 1, last: 1, n: 1}, {pid: "a", base: 1, last: 2, n: 2, want: "dup", dupOf: 0}}},
		{"RetryOfEachOfLastFiveBatchesRecognised", []idem{
			{pid: "a", base: 1, last: 1, n: 1}, {pid: "a", base: 2, last: 2, n: 1}, {pid: "a", base: 3, last: 3, n: 1},
			{pid: "a", base: 4, last: 4, n: 1}, {pid: "a", base: 5, last: 5, n: 1}, {pid: "a", base: 6, last: 6, n: 1},
			{pid: "a", base: 2, last: 2, n: 1, want: "dup", dupOf: 1}, {pid: "a", base: 6, last: 6, n: 1, want: "dup", dupOf: 5},
			{pid: "a", base: 4, last: 4, n: 1, want: "dup", dupOf: 3}}},
		{"RetryOlderThanWindowIsDuplicateSequence", []idem{
			{pid: "a", base: 1, last: 1, n: 1}, {pid: "a", base: 2, last: 2, n: 1}, {pid: "a", base: 3, last: 3, n: 1},
			{pid: "a", base: 4, last: 4, n: 1}, {pid: "a", base: 5, last: 5, n: 1}, {pid: "a", base: 6, last: 6, n: 1},
			{pid: "a", base: 1, last: 1, n: 1, want: "err", code: errcode.DuplicateSequence}}},
		{"HigherEpochFencesAndRestartsAtOne", []idem{
			{pid: "a", epoch: 1, base: 1, last: 5, n: 5}, {pid: "a", epoch: 2, base: 1, last: 1, n: 1},
			{pid: "a", epoch: 1, base: 6, last: 6, n: 1, want: "err", code: errcode.StaleProducerEpoch}}},
		{"HigherEpochMayContinueTheSequence", []idem{
			{pid: "a", epoch: 1, base: 1, last: 2, n: 2}, {pid: "a", epoch: 2, base: 3, last: 3, n: 1}}},
		{"HigherEpochWithGapRejected", []idem{
			{pid: "a", epoch: 1, base: 1, last: 2, n: 2}, {pid: "a", epoch: 2, base: 7, last: 7, n: 1, want: "err", code: errcode.OutOfOrderSequence}}},
		{"NewEpochForgetsOldWindow", []idem{
			{pid: "a", epoch: 1, base: 1, last: 1, n: 1}, {pid: "a", epoch: 2, base: 1, last: 1, n: 1},
			{pid: "a", epoch: 2, base: 1, last: 1, n: 1, want: "dup", dupOf: 1}}},
		{"LowerEpochIsStale", []idem{
			{pid: "a", epoch: 5, base: 1, last: 1, n: 1}, {pid: "a", epoch: 4, base: 2, last: 2, n: 1, want: "err", code: errcode.StaleProducerEpoch}}},
		{"ProducersAreIndependent", []idem{
			{pid: "a", base: 1, last: 1, n: 1}, {pid: "b", base: 1, last: 1, n: 1}, {pid: "a", base: 2, last: 2, n: 1}}},
		{"SequenceRangeMustMatchRecordCount", []idem{
			{pid: "a", base: 1, last: 3, n: 2, want: "err", code: errcode.InvalidParameter}}},
		{"LastSequenceZeroMeansBasePlusCount", []idem{
			{pid: "a", base: 1, last: 0, n: 3}, {pid: "a", base: 4, last: 4, n: 1}}},
		// Rule 1: the identity is the whole (producer, epoch, sequence
		// range); a retry covering only part of a stored batch is not that
		// batch and must not be stored again.
		{"PartialRetryIsDuplicateSequence", []idem{
			{pid: "a", base: 1, last: 2, n: 2}, {pid: "a", base: 3, last: 4, n: 2},
			{pid: "a", base: 3, last: 3, n: 1, want: "err", code: errcode.DuplicateSequence}}},
		{"RetrySpanningStoredAndNewIsRejected", []idem{
			{pid: "a", base: 1, last: 2, n: 2}, {pid: "a", base: 2, last: 3, n: 2, want: "err", code: errcode.OutOfOrderSequence}}},
		{"SameSequenceOtherProducerIsNew", []idem{
			{pid: "a", epoch: 1, base: 1, last: 1, n: 1}, {pid: "b", epoch: 1, base: 1, last: 1, n: 1},
			{pid: "b", epoch: 1, base: 1, last: 1, n: 1, want: "dup", dupOf: 1}}},
		// Rule 4: sequence 0 bypasses dedup without touching the session.
		{"SeqZeroInsideASessionLeavesItAlone", []idem{
			{pid: "a", epoch: 1, base: 1, last: 2, n: 2}, {pid: "a", epoch: 1, base: 0, n: 1}, {pid: "a", epoch: 1, base: 0, n: 1},
			{pid: "a", epoch: 1, base: 1, last: 2, n: 2, want: "dup", dupOf: 0}, {pid: "a", epoch: 1, base: 3, last: 3, n: 1}}},
		{"SeqZeroUnderAStaleEpochIsNotChecked", []idem{
			{pid: "a", epoch: 5, base: 1, last: 1, n: 1}, {pid: "a", epoch: 1, base: 0, n: 1}}},
		{"MissingProducerID", []idem{{pid: "", base: 1, last: 1, n: 1, want: "err", code: errcode.MissingParameter}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, p := openPartition(t, "idem", 0, TopicConfig{})
			var results []AppendResult
			for i, s := range tc.steps {
				leo := p.log.EndOffset()
				res, err := idemAppend(t, p, s, AcksAll)
				results = append(results, res)
				switch s.want {
				case "":
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if res.Duplicate || res.BaseOffset != leo || res.LastOffset != leo+uint64(s.n)-1 {
						t.Fatalf("step %d: result %+v, log end was %d", i, res, leo)
					}
				case "dup":
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					orig := results[s.dupOf]
					if !res.Duplicate || res.BaseOffset != orig.BaseOffset || res.LastOffset != orig.LastOffset {
						t.Fatalf("step %d: %+v, want duplicate of %+v", i, res, orig)
					}
					if p.log.EndOffset() != leo {
						t.Fatalf("step %d: duplicate was appended", i)
					}
				default:
					wantCode(t, err, s.code)
					if p.log.EndOffset() != leo {
						t.Fatalf("step %d: rejected batch changed the log end", i)
					}
				}
			}
		})
	}
}

func TestStaleProducerEpochCarriesFields(t *testing.T) {
	_, p := openPartition(t, "idem", 0, TopicConfig{})
	if _, err := idemAppend(t, p, idem{pid: "prod-7", epoch: 3, base: 1, n: 1}, AcksAll); err != nil {
		t.Fatal(err)
	}
	_, err := idemAppend(t, p, idem{pid: "prod-7", epoch: 2, base: 2, n: 1}, AcksAll)
	e := wantCode(t, err, errcode.StaleProducerEpoch)
	if field(e, "producer") != "prod-7" || field(e, "current") != "3" || field(e, "got") != "2" {
		t.Fatalf("fields %v", e.Fields)
	}
	if e.Class != errcode.ClassFencing {
		t.Fatalf("class %v", e.Class)
	}
}

func TestSeqZeroDisablesDedup(t *testing.T) {
	_, p := openPartition(t, "idem", 0, TopicConfig{})
	for i := range 3 {
		res, err := idemAppend(t, p, idem{pid: "a", base: 0, n: 1}, AcksAll)
		if err != nil || res.Duplicate || res.BaseOffset != uint64(i) {
			t.Fatalf("append %d: %+v %v", i, res, err)
		}
	}
	// Seq 0 batches leave no producer state: a later session starts at 1.
	if _, err := idemAppend(t, p, idem{pid: "a", base: 1, n: 1}, AcksAll); err != nil {
		t.Fatal(err)
	}
}

func TestIdempotenceRequiresAcksAllBeforeAnySequenceChange(t *testing.T) {
	_, p := openPartition(t, "idem", 0, TopicConfig{})
	for _, acks := range []int32{AcksNone, AcksLeader} {
		_, err := idemAppend(t, p, idem{pid: "a", base: 1, n: 1}, acks)
		e := wantCode(t, err, errcode.IdempotenceRequiresAcksAll)
		if e.Class != errcode.ClassValidation {
			t.Fatalf("class %v", e.Class)
		}
	}
	if p.log.EndOffset() != 0 {
		t.Fatal("rejected append reached the log")
	}
	// The sequence did not move: 1 is still the first sequence.
	if _, err := idemAppend(t, p, idem{pid: "a", base: 1, n: 1}, AcksAll); err != nil {
		t.Fatal(err)
	}
}

func TestProducerStateExpiresAfterTTL(t *testing.T) {
	e := newNodeEnv(t, func(c *NodeConfig) { c.Defaults.ProducerStateTTL = time.Minute })
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "idem", 0, TopicConfig{})
	if _, err := idemAppend(t, p, idem{pid: "a", epoch: 5, base: 1, last: 3, n: 3}, AcksAll); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(30 * time.Second)
	if _, err := idemAppend(t, p, idem{pid: "a", epoch: 4, base: 4, n: 1}, AcksAll); !errorsIs(err, errcode.StaleProducerEpoch) {
		t.Fatalf("within the TTL the old epoch is stale, got %v", err)
	}
	e.clock.Advance(2 * time.Minute)
	rep := n.Maintain(context.Background())
	if len(rep) != 1 || rep[0].ExpiredProducer != 1 {
		t.Fatalf("maintenance report %+v", rep)
	}
	// An expired producer is unknown: it starts again at 1, under any epoch.
	if _, err := idemAppend(t, p, idem{pid: "a", epoch: 1, base: 4, n: 1}, AcksAll); !errorsIs(err, errcode.OutOfOrderSequence) {
		t.Fatalf("expired producer continuing its sequence: %v", err)
	}
	if _, err := idemAppend(t, p, idem{pid: "a", epoch: 1, base: 1, n: 1}, AcksAll); err != nil {
		t.Fatal(err)
	}
}

func TestDedupWindowSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checkpoint bool
	}{{"RebuiltFromLog", false}, {"FromCheckpointAndLog", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newNodeEnv(t)
			n := e.open(t)
			defer n.Close()
			p := mustCreate(t, n, "idem", 0, TopicConfig{})
			var results []AppendResult
			for i := range 7 {
				if tc.checkpoint && i == 3 {
					if _, err := p.checkpointProducers(true); err != nil {
						t.Fatal(err)
					}
				}
				res, err := idemAppend(t, p, idem{pid: "a", epoch: 2, base: uint64(i*2 + 1), last: uint64(i*2 + 2), n: 2}, AcksAll)
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, res)
			}
			// A crash: only what was synced survives.
			c := e.crashClone(0)
			n2 := c.open(t)
			defer n2.Close()
			p2, err := n2.Partition("idem", 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, ok, _ := n2.state.ProducerCheckpoint("idem", 0); ok != tc.checkpoint {
				t.Fatalf("checkpoint present = %v", ok)
			}
			// The last five batches are recognised with their offsets.
			for i := 2; i < 7; i++ {
				res, err := idemAppend(t, p2, idem{pid: "a", epoch: 2, base: uint64(i*2 + 1), last: uint64(i*2 + 2), n: 2}, AcksAll)
				if err != nil || !res.Duplicate || res.BaseOffset != results[i].BaseOffset {
					t.Fatalf("retry of batch %d after restart: %+v %v, want offsets of %+v", i, res, err, results[i])
				}
			}
			_, err = idemAppend(t, p2, idem{pid: "a", epoch: 1, base: 15, n: 1}, AcksAll)
			wantCode(t, err, errcode.StaleProducerEpoch)
			res, err := idemAppend(t, p2, idem{pid: "a", epoch: 2, base: 15, n: 1}, AcksAll)
			if err != nil || res.BaseOffset != 14 {
				t.Fatalf("next batch: %+v %v", res, err)
			}
		})
	}
}

func TestAcksValidation(t *testing.T) {
	_, p := openPartition(t, "acks", 0, TopicConfig{})
	set, cnt := payloads(t, "acks", "x")
	cases := []struct {
		name    string
		acks    int32
		isr     int
		minISR  int
		wantErr errcode.Code
		ok      bool
	}{
		{"AcksOneStandalone", AcksLeader, 0, 0, errcode.Code{}, true},
		{"AcksAllMinISROne", AcksAll, 1, 1, errcode.Code{}, true},
		{"AcksAllMinISRAboveISRRejected", AcksAll, 1, 2, errcode.InsufficientInSyncReplicas, false},
		{"AcksOneIgnoresISR", AcksLeader, 1, 3, errcode.Code{}, true},
		{"AcksTwoInvalid", 2, 1, 1, errcode.InvalidParameter, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leo := p.log.EndOffset()
			buf := append([]byte(nil), set...)
			_, err := p.Append(context.Background(), &AppendRequest{LifecycleEpoch: 0, Acks: tc.acks, Records: buf, RecordCount: cnt,
				ISRSize: tc.isr, MinISR: tc.minISR})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			e := wantCode(t, err, tc.wantErr)
			if p.log.EndOffset() != leo {
				t.Fatal("rejected before append, but the log moved")
			}
			if tc.wantErr == errcode.InsufficientInSyncReplicas && (!e.Retryable || e.Class != errcode.ClassAvailability) {
				t.Fatalf("%v", e)
			}
		})
	}
}

func TestAcksZeroAppendsDurably(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "acks", 0, TopicConfig{})
	set, cnt := payloads(t, "acks", "a", "b")
	res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksNone, Records: set, RecordCount: cnt})
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if err := p.log.WaitDurable(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = e.open(t)
	defer n.Close()
	p, _ = n.Partition("acks", 0)
	if got := fetchAll(t, p, 0); len(got) != 2 || got[1].payload != "b" {
		t.Fatalf("%+v", got)
	}
}

func TestAppendValidation(t *testing.T) {
	n, p := openPartition(t, "val", 0, TopicConfig{})
	c := mustCreate(t, n, "cmp", 0, TopicConfig{CleanupPolicy: PolicyCompact})
	good, _ := payloads(t, "val", "x")
	cases := []struct {
		name  string
		p     *Partition
		set   []byte
		count uint32
		code  errcode.Code
	}{
		{"EmptySet", p, nil, 0, errcode.InvalidParameter},
		{"CountMismatch", p, good, 2, errcode.InvalidParameter},
		{"TruncatedPrefix", p, good[:len(good)-1], 1, errcode.MalformedInput},
		{"OtherTopic", p, recordSet(t, "other", rec{payload: []byte("x")}), 1, errcode.InvalidParameter},
		{"GarbageRecord", p, append([]byte{0, 0, 0, 30}, make([]byte, 30)...), 1, errcode.DecodeFailed},
		{"CompactedTopicNeedsKey", c, recordSet(t, "cmp", rec{payload: []byte("x")}), 1, errcode.InvalidParameter},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, Records: tc.set, RecordCount: tc.count})
			wantCode(t, err, tc.code)
		})
	}
	if p.log.EndOffset() != 0 || c.log.EndOffset() != 0 {
		t.Fatal("invalid input reached the log")
	}
}

func TestAppendSetsPartitionAndOffsets(t *testing.T) {
	_, p := openPartition(t, "part", 3, TopicConfig{})
	appendPayloads(t, p, "a", "b")
	appendPayloads(t, p, "c")
	got := fetchAll(t, p, 0)
	for i, d := range got {
		if d.offset != uint64(i) || d.partition != 3 {
			t.Fatalf("record %d: %+v", i, d)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d records", len(got))
	}
}

func errorsIs(err error, c errcode.Code) bool { return err != nil && errors.Is(err, c) }
