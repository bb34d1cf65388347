package partition

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/recordtest"
)

// txnSet encodes transactional records (transactional_id and state open, as
// the coordinator writes them).
func txnSet(t testing.TB, topic string, ps ...string) ([]byte, uint32) {
	t.Helper()
	ws := make([]wire.Record, len(ps))
	for i, p := range ps {
		ws[i] = wire.Record{Topic: topic, Payload: []byte(p), TransactionalID: "tx", TransactionState: wire.TxnStateOpen}
	}
	return recordtest.Set(t, ws...), uint32(len(ps))
}

func txnAppend(t testing.TB, p *Partition, pid string, epoch int64, seq uint64, ps ...string) (AppendResult, error) {
	t.Helper()
	set, n := txnSet(t, p.Topic(), ps...)
	return p.Append(context.Background(), &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksAll, Records: set, RecordCount: n,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: true})
}

func mustTxnAppend(t testing.TB, p *Partition, pid string, epoch int64, seq uint64, ps ...string) AppendResult {
	t.Helper()
	res, err := txnAppend(t, p, pid, epoch, seq, ps...)
	if err != nil {
		t.Fatalf("txn append: %v", err)
	}
	return res
}

func mustAdd(t testing.TB, p *Partition, pid string, epoch int64) {
	t.Helper()
	if err := p.AddTxn(p.LifecycleEpoch(), pid, epoch, 0); err != nil {
		t.Fatalf("add %s/%d: %v", pid, epoch, err)
	}
}

func marker(t testing.TB, p *Partition, pid string, epoch int64, commit bool) MarkerResult {
	t.Helper()
	res, err := p.WriteMarker(context.Background(), &MarkerRequest{LifecycleEpoch: p.LifecycleEpoch(), ProducerID: pid,
		ProducerEpoch: epoch, TransactionalID: "tx", Commit: commit})
	if err != nil {
		t.Fatalf("marker %s/%d: %v", pid, epoch, err)
	}
	return res
}

func fetchIso(t testing.TB, p *Partition, iso Isolation) []string {
	t.Helper()
	var out []string
	from := p.LogStartOffset()
	for {
		r, err := p.Fetch(context.Background(), &FetchRequest{LifecycleEpoch: p.LifecycleEpoch(), Offset: from, Isolation: iso, MaxRecords: 2})
		if err != nil {
			t.Fatalf("fetch %d: %v", from, err)
		}
		for _, v := range recordtest.Records(t, r.Records) {
			s := string(v.Payload())
			if v.IsControl() {
				ck, _ := v.ControlKey()
				cv, _ := v.ControlValue()
				m, err := wire.ParseTxnMarker(ck, cv)
				if err != nil {
					t.Fatalf("marker at %d: %v", v.Offset(), err)
				}
				s = "ABORT"
				if m.Commit {
					s = "COMMIT"
				}
				if ver, _ := v.ControlVersion(); ver != wire.TxnControlBatchVersion {
					t.Fatalf("control version %d", ver)
				}
			}
			out = append(out, s)
		}
		if r.NextOffset == from {
			return out
		}
		from = r.NextOffset
	}
}

func wantRead(t *testing.T, p *Partition, iso Isolation, want ...string) {
	t.Helper()
	if got := fetchIso(t, p, iso); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Fatalf("isolation %d read %q, want %q", iso, got, want)
	}
}

func wantLSO(t *testing.T, p *Partition, lso uint64) {
	t.Helper()
	o, err := p.ListOffsets()
	if err != nil {
		t.Fatal(err)
	}
	if o.LSO != lso {
		t.Fatalf("LSO %d, want %d (hwm %d)", o.LSO, lso, o.HWM)
	}
}

// TestTxnVisibility: read_committed stops at the LSO and skips aborted
// records and markers; read_uncommitted returns the raw log with markers;
// the index is rebuilt from the log after a restart.
func TestTxnVisibility(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})

	appendPayloads(t, p, "a") // 0
	mustAdd(t, p, "p1", 1)
	mustTxnAppend(t, p, "p1", 1, 1, "t1", "t2") // 1, 2
	appendPayloads(t, p, "b")                   // 3
	wantLSO(t, p, 1)
	wantRead(t, p, ReadCommitted, "a")
	wantRead(t, p, ReadUncommitted, "a", "t1", "t2", "b")

	mustAdd(t, p, "p2", 1)
	mustTxnAppend(t, p, "p2", 1, 1, "x") // 4
	if m := marker(t, p, "p1", 1, true); m.Offset != 5 || m.Duplicate {
		t.Fatalf("commit marker %+v", m)
	}
	wantLSO(t, p, 4)
	wantRead(t, p, ReadCommitted, "a", "t1", "t2", "b")
	marker(t, p, "p2", 1, false) // 6
	appendPayloads(t, p, "c")    // 7
	wantLSO(t, p, 8)
	wantRead(t, p, ReadCommitted, "a", "t1", "t2", "b", "c")
	wantRead(t, p, ReadUncommitted, "a", "t1", "t2", "b", "x", "COMMIT", "ABORT", "c")

	// A read_committed fetch from inside the aborted range moves past it.
	r, err := p.Fetch(context.Background(), &FetchRequest{LifecycleEpoch: p.LifecycleEpoch(), Offset: 4, Isolation: ReadCommitted, MaxRecords: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, r.Records); len(got) != 1 || got[0].payload != "c" || r.NextOffset != 8 || r.LastStableOffset != 8 {
		t.Fatalf("fetch from 4: %+v next %d lso %d", got, r.NextOffset, r.LastStableOffset)
	}

	// An open transaction survives a restart, so does the aborted index.
	mustAdd(t, p, "p3", 1)
	mustTxnAppend(t, p, "p3", 1, 1, "y") // 8
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = e.open(t)
	t.Cleanup(func() { n.Close() })
	p, err = n.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantLSO(t, p, 8)
	wantRead(t, p, ReadCommitted, "a", "t1", "t2", "b", "c")
	if o := p.OpenTxns(); len(o) != 1 || o[0].ProducerID != "p3" || o[0].First != 8 {
		t.Fatalf("open after restart: %+v", o)
	}
	// The open epoch may go on writing without a new add (the registration
	// itself is not durable; its records are).
	mustTxnAppend(t, p, "p3", 1, 2, "z")
	marker(t, p, "p3", 1, false)
	wantLSO(t, p, 11)
	wantRead(t, p, ReadCommitted, "a", "t1", "t2", "b", "c")
	// The aborted p2 and p3 stay hidden after another restart.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = e.open(t)
	p, _ = n.Partition("t", 0)
	wantRead(t, p, ReadCommitted, "a", "t1", "t2", "b", "c")
	wantRead(t, p, ReadUncommitted, "a", "t1", "t2", "b", "x", "COMMIT", "ABORT", "c", "y", "z", "ABORT")
}

// TestTxnWriteRules: the KIP-890 and fencing rules on the write side, and
// the refusal of transaction metadata outside transactional writes.
func TestTxnWriteRules(t *testing.T) {
	_, p := openPartition(t, "t", 0, TopicConfig{})
	ctx := context.Background()

	// Not added: refused.
	_, err := txnAppend(t, p, "p", 1, 1, "x")
	wantCode(t, err, errcode.TransactionPartitionNotAdded)
	// Sequence 0, acks 1, no producer: refused before anything else.
	set, cnt := txnSet(t, "t", "x")
	_, err = p.Append(ctx, &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksAll, Records: set, RecordCount: cnt, ProducerID: "p", ProducerEpoch: 1, Transactional: true})
	wantCode(t, err, errcode.InvalidParameter)
	_, err = p.Append(ctx, &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksLeader, Records: set, RecordCount: cnt, ProducerID: "p", ProducerEpoch: 1, BaseSequence: 1, Transactional: true})
	wantCode(t, err, errcode.InvalidParameter)
	_, err = p.Append(ctx, &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksAll, Records: set, RecordCount: cnt, BaseSequence: 1, Transactional: true})
	wantCode(t, err, errcode.MissingProducerID)
	// Transaction metadata or a control record on a plain append.
	_, err = p.Append(ctx, &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksLeader, Records: set, RecordCount: cnt})
	wantCode(t, err, errcode.TransactionMetadataForbidden)
	mk := wire.TxnMarkerRecord("t", 0, "p", 1, "tx", wire.TxnMarker{Commit: true}, 1)
	ctl := recordtest.Set(t, mk)
	_, err = p.Append(ctx, &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksLeader, Records: ctl, RecordCount: 1})
	wantCode(t, err, errcode.TransactionMetadataForbidden)
	_, err = p.Append(ctx, &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksAll, Records: ctl, RecordCount: 1, ProducerID: "p", ProducerEpoch: 1, BaseSequence: 1, Transactional: true})
	wantCode(t, err, errcode.TransactionMetadataForbidden)

	// Added: a write and its retry (same sequence: the original offsets).
	mustAdd(t, p, "p", 1)
	first := mustTxnAppend(t, p, "p", 1, 1, "x")
	again := mustTxnAppend(t, p, "p", 1, 1, "x")
	if !again.Duplicate || again.BaseOffset != first.BaseOffset {
		t.Fatalf("retry %+v, first %+v", again, first)
	}
	// A newer epoch cannot be added while epoch 1 is open here.
	wantCode(t, p.AddTxn(p.LifecycleEpoch(), "p", 2, 0), errcode.TransactionStillOpen)
	marker(t, p, "p", 1, true)
	// The retry delayed past the marker: fenced, not answered as duplicate.
	_, err = txnAppend(t, p, "p", 1, 1, "x")
	wantCode(t, err, errcode.StaleProducerEpoch)
	wantCode(t, p.AddTxn(p.LifecycleEpoch(), "p", 1, 0), errcode.StaleProducerEpoch)
	// The marker repeat is a duplicate and writes nothing.
	end := p.LogEndOffset()
	if m := marker(t, p, "p", 1, true); !m.Duplicate || p.LogEndOffset() != end {
		t.Fatalf("repeat %+v, end %d -> %d", m, end, p.LogEndOffset())
	}
	// An older epoch's marker is stale; a zombie coordinator is fenced.
	_, err = p.WriteMarker(ctx, &MarkerRequest{LifecycleEpoch: p.LifecycleEpoch(), ProducerID: "p", ProducerEpoch: 0})
	wantCode(t, err, errcode.StaleProducerEpoch)
	if err := p.AddTxn(p.LifecycleEpoch(), "p", 2, 5); err != nil {
		t.Fatal(err)
	}
	_, err = p.WriteMarker(ctx, &MarkerRequest{LifecycleEpoch: p.LifecycleEpoch(), ProducerID: "p", ProducerEpoch: 2, CoordinatorEpoch: 4})
	wantCode(t, err, errcode.ProducerFenced)
	// Bad requests.
	wantCode(t, p.AddTxn(p.LifecycleEpoch(), "", 1, 0), errcode.MissingProducerID)
	_, err = p.WriteMarker(ctx, &MarkerRequest{LifecycleEpoch: p.LifecycleEpoch(), ProducerID: "p", ProducerEpoch: 2, CoordinatorEpoch: 1 << 40})
	wantCode(t, err, errcode.InvalidParameter)
	wantCode(t, p.AddTxn(p.LifecycleEpoch()+1, "q", 1, 0), errcode.LifecycleEpochPending)
}

// TestTxnReadCommittedLongPoll: a read_committed fetch waiting at the LSO
// wakes when the marker decides the transaction.
func TestTxnReadCommittedLongPoll(t *testing.T) {
	_, p := openPartition(t, "t", 0, TopicConfig{})
	mustAdd(t, p, "p", 1)
	mustTxnAppend(t, p, "p", 1, 1, "x")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan FetchResult, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := p.Fetch(ctx, &FetchRequest{LifecycleEpoch: p.LifecycleEpoch(), Offset: 0, Isolation: ReadCommitted, Wait: time.Minute})
		if err != nil {
			errs <- err
			return
		}
		got <- r
	}()
	marker(t, p, "p", 1, true)
	select {
	case r := <-got:
		if d := decode(t, r.Records); len(d) != 1 || d[0].payload != "x" {
			t.Fatalf("long poll got %+v", d)
		}
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("long poll did not wake")
	}
}

// TestTxnFollowerIndex: a follower builds the same index from replicated
// batches, and keeps it across a cut of its log.
func TestTxnFollowerIndex(t *testing.T) {
	x := newPair(t)
	l := x.leader
	appendPayloads(t, l, "a")
	mustAdd(t, l, "p", 1)
	mustTxnAppend(t, l, "p", 1, 1, "x")
	marker(t, l, "p", 1, false)
	mustAdd(t, l, "q", 1)
	mustTxnAppend(t, l, "q", 1, 1, "y") // 3, open
	x.sync(t)
	f := x.follower
	if got, want := f.txns.AbortedRanges("p"), l.txns.AbortedRanges("p"); !reflect.DeepEqual(got, want) || len(got) != 1 {
		t.Fatalf("follower aborted %+v, leader %+v", got, want)
	}
	if o := f.OpenTxns(); len(o) != 1 || o[0].ProducerID != "q" || o[0].First != 3 {
		t.Fatalf("follower open %+v", o)
	}
	// Cut the follower below q's write: q is no longer open there.
	if _, err := f.TruncateTo(1, 3); err != nil {
		t.Fatal(err)
	}
	if o := f.OpenTxns(); len(o) != 0 {
		t.Fatalf("open after cut %+v", o)
	}
	if len(f.txns.AbortedRanges("p")) != 1 {
		t.Fatal("aborted range lost in the cut")
	}
	// Promoted, the follower serves read_committed with the same filter
	// and accepts q's epoch only after an add.
	f.SetFollower(false)
	wantRead(t, f, ReadCommitted, "a")
	_, err := txnAppend(t, f, "q", 1, 1, "y")
	wantCode(t, err, errcode.TransactionPartitionNotAdded)
}

// TestTxnIndexCheckpointAfterCrash: the transaction index is checkpointed
// with the producer state; after a crash (only synced data survives) the
// partition rebuilds it from the checkpoint and the log after it — the
// scan starts at the checkpoint, not at the log start — and answers as a
// full scan would: aborted ranges from before the checkpoint stay hidden,
// an open transaction from before it still bounds the LSO, ended epochs
// stay stale. A checkpoint that does not decode keeps the partition shut.
func TestTxnIndexCheckpointAfterCrash(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	t.Cleanup(func() { n.Close() })
	p := mustCreate(t, n, "t", 0, TopicConfig{})

	appendPayloads(t, p, "a") // 0
	mustAdd(t, p, "p1", 1)
	mustTxnAppend(t, p, "p1", 1, 1, "x1", "x2") // 1, 2
	marker(t, p, "p1", 1, false)                // 3
	mustAdd(t, p, "p2", 1)
	mustTxnAppend(t, p, "p2", 1, 1, "o1") // 4: stays open
	covered, err := p.checkpointProducers(true)
	if err != nil || covered != 5 {
		t.Fatalf("checkpoint covers %d (%v), want 5", covered, err)
	}
	mustAdd(t, p, "p1", 2)
	mustTxnAppend(t, p, "p1", 2, 1, "c1") // 5
	marker(t, p, "p1", 2, true)           // 6
	mustTxnAppend(t, p, "p2", 1, 2, "o2") // 7
	wantLSO(t, p, 4)

	c := e.crashClone(0)
	n2 := c.open(t)
	t.Cleanup(func() { n2.Close() })
	p2, err := n2.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p2.txnScanFrom != covered {
		t.Fatalf("rebuild scanned from %d, want the checkpoint's %d", p2.txnScanFrom, covered)
	}
	wantLSO(t, p2, 4)
	wantRead(t, p2, ReadCommitted, "a")
	wantRead(t, p2, ReadUncommitted, "a", "x1", "x2", "ABORT", "o1", "c1", "COMMIT", "o2")
	if o := p2.OpenTxns(); len(o) != 1 || o[0].ProducerID != "p2" || o[0].First != 4 {
		t.Fatalf("open after recovery: %+v", o)
	}
	if _, err := txnAppend(t, p2, "p1", 1, 9, "late"); errcode.CodeOf(err) != errcode.StaleProducerEpoch.Name() {
		t.Fatalf("write of an epoch ended before the checkpoint: %v, want stale_producer_epoch", err)
	}
	marker(t, p2, "p2", 1, true) // 8
	wantLSO(t, p2, 9)
	wantRead(t, p2, ReadCommitted, "a", "o1", "c1", "o2")

	// A checkpoint that does not decode is corruption, not a reason to
	// guess: the partition does not open.
	if err := n2.state.PutTxnCheckpoint("t", 0, 2, []byte(`{"v":9}`), true); err != nil {
		t.Fatal(err)
	}
	c2 := c.crashClone(100)
	n3, err := Open(context.Background(), c2.cfg)
	if err == nil {
		defer n3.Close()
		_, err = n3.Partition("t", 0)
	}
	if errcode.CodeOf(err) != errcode.StorageCorrupt.Name() {
		t.Fatalf("open with a bad checkpoint: %v, want storage_corrupt", err)
	}
}

// TestTxnCompactionDropsAborted: below the LSO compaction drops an aborted
// transaction's records and its abort marker, so the aborted value of a
// key never wins over the committed one (before, the aborted v2 was the
// key's latest value: compaction removed v1 and read_committed then hid
// v2, losing the key). Commit markers and committed values stay.
func TestTxnCompactionDropsAborted(t *testing.T) {
	var eligible atomic.Bool
	eligible.Store(true)
	n := compactEnv(t, &eligible).open(t)
	defer n.Close()
	p := mustCreate(t, n, "ct", 0, TopicConfig{CleanupPolicy: PolicyCompact})
	keyedTxn := func(pid string, epoch int64, key, val string) {
		t.Helper()
		set := recordtest.Set(t, wire.Record{Topic: "ct", Key: key, Payload: []byte(val), TransactionalID: "tx",
			TransactionState: wire.TxnStateOpen})
		if _, err := p.Append(context.Background(), &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksAll,
			Records: set, RecordCount: 1, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 1, Transactional: true}); err != nil {
			t.Fatal(err)
		}
	}
	appendKeyed(t, p, "k", "v1") // 0
	mustAdd(t, p, "p1", 1)
	keyedTxn("p1", 1, "k", "v2") // 1: aborted
	marker(t, p, "p1", 1, false) // 2
	mustAdd(t, p, "p2", 1)
	keyedTxn("p2", 1, "j", "w1") // 3: committed
	marker(t, p, "p2", 1, true)  // 4
	pad := strings.Repeat("f", 200)
	for i := range 12 { // close the segments above
		appendKeyed(t, p, fmt.Sprintf("f%d", i), pad)
	}
	rep := n.Maintain(context.Background())
	if rep[0].Compaction != CompactionCompleted || rep[0].Compacted.RecordsRemoved < 2 {
		t.Fatalf("report %+v", rep[0])
	}
	got := fetchIso(t, p, ReadUncommitted)
	if len(got) < 4 || got[0] != "v1" || got[1] != "w1" || got[2] != "COMMIT" {
		t.Fatalf("after compaction the raw log starts %q, want v1, w1, COMMIT (v2 and its ABORT dropped)", got[:min(4, len(got))])
	}
	if got := fetchIso(t, p, ReadCommitted); len(got) < 2 || got[0] != "v1" || got[1] != "w1" {
		t.Fatalf("read_committed starts %q, want v1, w1", got[:min(3, len(got))])
	}
}
