package offsetlog

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/fake/partitionfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const topic = "__consumer_offsets"

// grpcClient adapts the generated client to Client.
type grpcClient struct {
	c partitionv1.PartitionServiceClient
}

func (g grpcClient) Append(ctx context.Context, r *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	return g.c.Append(ctx, r)
}
func (g grpcClient) Fetch(ctx context.Context, r *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error) {
	return g.c.Fetch(ctx, r)
}
func (g grpcClient) ListOffsets(ctx context.Context, r *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error) {
	return g.c.ListOffsets(ctx, r)
}

// startFake serves a fake PartitionService over mTLS on loopback and returns
// a coordinatord-identity client to it.
func startFake(t *testing.T) (*partitionfake.Server, Client) {
	t.Helper()
	fake := partitionfake.Start(t, pkitest.New(t), partitionfake.Options{Callers: []pki.Role{pki.RoleCoordinatord}})
	return fake, grpcClient{partitionv1.NewPartitionServiceClient(fake.Dial(t, pki.RoleCoordinatord))}
}

// loseAnswers makes every append take effect but answer a timeout, as when
// the answers are lost, until the returned func is called.
func loseAnswers(fake *partitionfake.Server) (stop func()) {
	return fake.On("Append", 0, fakerpc.LoseAnswer(errcode.RequestTimeout.New("injected lost answer")))
}

// failAppends makes the next n appends fail (retryable) storing nothing.
func failAppends(fake *partitionfake.Server, n int) {
	fake.On("Append", n, fakerpc.Fail(errcode.ReplicationUnavailable.New("injected failure")))
}

func ctxT(t *testing.T) context.Context { return looptest.Context(t, 10*time.Second) }

func opts(epoch int64) Options {
	return Options{Topic: topic, Partition: 3, Epoch: epoch, Node: "c1"}
}

func mustTakeover(t *testing.T, c Client, epoch int64) (*Log, *Replayed) {
	t.Helper()
	l, rep, err := Takeover(ctxT(t), c, opts(epoch))
	if err != nil {
		t.Fatal(err)
	}
	return l, rep
}

func TestReplayRestoresGroupsAndOffsetsAfterRestart(t *testing.T) {
	fake, c := startFake(t)
	l1, rep := mustTakeover(t, c, 10)
	if len(rep.Groups) != 0 || rep.Records != 1 {
		t.Fatalf("empty partition replay: %+v", rep)
	}
	ctx := ctxT(t)
	g := group.New("orders-g", group.Selector{Topic: "orders"}, []group.TP{tp("orders", 0), tp("orders", 1)}, 7)
	g.Lifecycle["orders"] = 2
	multi := group.New("multi", group.Selector{Pattern: "o*"}, []group.TP{tp("orders", 0)}, 8)
	must(t, l1.Append(ctx, []Value{Registration(g), Registration(multi)}))
	must(t, l1.Append(ctx, []Value{Offset("orders-g", 7, tp("orders", 0), 5), Offset("orders-g", 7, tp("orders", 1), 9)}))
	must(t, l1.Append(ctx, []Value{Offset("orders-g", 7, tp("orders", 0), 6)}))
	must(t, l1.Append(ctx, []Value{Offset("multi", 8, tp("orders", 0), 3)}))

	// A "restart": a new owner (higher epoch) replays.
	l2, rep := mustTakeover(t, c, 11)
	check := func(rep *Replayed) {
		t.Helper()
		if len(rep.Groups) != 2 || rep.Offsets != 3 {
			t.Fatalf("restored %d groups %d offsets, want 2 and 3", len(rep.Groups), rep.Offsets)
		}
		rg := rep.Groups["orders-g"]
		if rg.Incarnation != 7 || rg.Selector.Topic != "orders" || len(rg.Partitions) != 2 || rg.Lifecycle["orders"] != 2 {
			t.Fatalf("group %+v", rg)
		}
		if o, _ := rg.Committed(tp("orders", 0)); o != 6 {
			t.Fatalf("offset P0 = %d, want the latest 6", o)
		}
		if o, _ := rg.Committed(tp("orders", 1)); o != 9 {
			t.Fatalf("offset P1 = %d", o)
		}
		if rep.Groups["multi"].Selector.Pattern != "o*" {
			t.Fatal("pattern selector lost")
		}
	}
	check(rep)

	// The old owner is fenced by the new epoch, and learns it.
	err := l1.Append(ctx, []Value{Offset("orders-g", 7, tp("orders", 0), 100)})
	if e := errcode.From(err); e.Code != errcode.CoordinatorNotAvailable.Name() || e.Field("reason") != "fenced" || l1.Fenced() == nil {
		t.Fatalf("stale owner write: %v", err)
	}
	must(t, l2.Append(ctx, []Value{Offset("orders-g", 7, tp("orders", 1), 10)}))

	// Compaction does not change what replay rebuilds (apart from the P1 commit).
	fake.Compact(topic, 3)
	_, rep = mustTakeover(t, c, 12)
	if o, _ := rep.Groups["orders-g"].Committed(tp("orders", 1)); o != 10 {
		t.Fatalf("after compaction P1 = %d", o)
	}
	rep.Groups["orders-g"].SetOffset(tp("orders", 1), 9)
	check(rep)
}

func TestDeleteAndRecreateOrphansOldOffsets(t *testing.T) {
	_, c := startFake(t)
	l, _ := mustTakeover(t, c, 1)
	ctx := ctxT(t)
	g := group.New("g", group.Selector{Topic: "t"}, []group.TP{tp("t", 0)}, 1)
	must(t, l.Append(ctx, []Value{Registration(g), Offset("g", 1, tp("t", 0), 4)}))
	must(t, l.Append(ctx, []Value{
		{V: FormatVersion, Type: TypeOffsetTombstone, Group: "g", Incarnation: 1, Topic: "t", Partition: 0},
		{V: FormatVersion, Type: TypeGroupTombstone, Group: "g", Incarnation: 1},
	}))
	_, rep := mustTakeover(t, c, 2)
	if len(rep.Groups) != 0 || rep.Offsets != 0 {
		t.Fatalf("deleted group came back: %+v", rep)
	}
	// Re-created under a new incarnation; a late offset of the old one is an orphan.
	g2 := group.New("g", group.Selector{Topic: "t"}, []group.TP{tp("t", 0)}, 2)
	l3, _ := mustTakeover(t, c, 3)
	must(t, l3.Append(ctx, []Value{Registration(g2)}))
	must(t, l3.Append(ctx, []Value{Offset("g", 1, tp("t", 0), 99)}))
	_, rep = mustTakeover(t, c, 4)
	if _, ok := rep.Groups["g"].Committed(tp("t", 0)); ok || rep.Orphans == 0 {
		t.Fatalf("old-incarnation offset must be an orphan: %+v", rep)
	}
}

func TestRetriedAppendIsStoredOnce(t *testing.T) {
	fake, c := startFake(t)
	l, _ := mustTakeover(t, c, 1)
	failAppends(fake, 2)
	before := fake.Len(topic, 3)
	must(t, l.Append(ctxT(t), []Value{Offset("g", 1, tp("t", 0), 1)}))
	if got := fake.Len(topic, 3) - before; got != 1 {
		t.Fatalf("stored %d records", got)
	}
}

func TestCorruptRecordsStopReplay(t *testing.T) {
	for _, tc := range []struct {
		name, key, payload, reason string
	}{
		{"unversioned", GroupKey("g"), `{"type":"group","group":"g"}`, "unversioned_record"},
		{"not json", GroupKey("g"), `not json`, "malformed_value"},
		{"future version", GroupKey("g"), `{"v":2,"type":"group","group":"g"}`, "unsupported_version"},
		{"key mismatch", GroupKey("other"), `{"v":1,"type":"group","group":"g","incarnation":1,"selector":{"topic":"t"}}`, "key_mismatch"},
		{"unknown type", "x", `{"v":1,"type":"mystery","group":"g"}`, "unknown_record_type"},
		{"bad selector", GroupKey("g"), `{"v":1,"type":"group","group":"g","incarnation":1,"selector":{}}`, "inconsistent_record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, c := startFake(t)
			l, _ := mustTakeover(t, c, 1)
			g := group.New("ok", group.Selector{Topic: "t"}, nil, 1)
			must(t, l.Append(ctxT(t), []Value{Registration(g)}))
			fake.Inject(topic, 3, tc.key, []byte(tc.payload))
			_, rep, err := Takeover(ctxT(t), c, opts(2))
			e := errcode.From(err)
			if err == nil || e.Code != errcode.StorageCorrupt.Name() || e.Field("reason") != tc.reason {
				t.Fatalf("want storage_corrupt %s, got %v (rep %+v)", tc.reason, err, rep)
			}
			if rep != nil {
				t.Fatal("no partial state may be returned")
			}
			if e.Field("offset") != "2" {
				t.Fatalf("corrupt offset field %q", e.Field("offset"))
			}
		})
	}
}

func TestKeysAreUnambiguous(t *testing.T) {
	a := OffsetKey("a/b", tp("c", 1))
	b := OffsetKey("a", tp("b/c", 1))
	if a == b {
		t.Fatal("keys collide")
	}
	if GroupKey(`we"ird`) == GroupKey("we") {
		t.Fatal("quoted keys collide")
	}
}

// mustAllSucceed runs call(0..n-1) at once, each in its own goroutine, and
// fails t unless every call succeeded.
func mustAllSucceed(t *testing.T, n int, call func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = call(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func tp(topic string, p int32) group.TP { return group.TP{Topic: topic, Partition: p} }

func TestLostMarkerAnswerStillTakesOver(t *testing.T) {
	fake, c := startFake(t)
	l, _ := mustTakeover(t, c, 5)
	g := group.New("g", group.Selector{Topic: "t"}, []group.TP{tp("t", 0)}, 1)
	must(t, l.Append(ctxT(t), []Value{Registration(g), Offset("g", 1, tp("t", 0), 3)}))
	// A takeover attempt whose marker is stored but whose answer is lost.
	answer := loseAnswers(fake)
	short, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
	_, _, err := Takeover(short, c, opts(6))
	cancel()
	if err == nil {
		t.Fatal("the lost answer must fail the attempt")
	}
	answer()
	// The retry with the same epoch sees its own marker as a duplicate and
	// still replays everything.
	l2, rep, err := Takeover(ctxT(t), c, opts(6))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := rep.Groups["g"].Committed(tp("t", 0)); !ok || o != 3 {
		t.Fatalf("replay after a duplicate marker: %d %v", o, ok)
	}
	// And it fenced the epoch-5 owner.
	if err := l.Append(ctxT(t), []Value{Offset("g", 1, tp("t", 0), 9)}); errcode.From(err).Field("reason") != "fenced" {
		t.Fatalf("old owner: %v", err)
	}
	must(t, l2.Append(ctxT(t), []Value{Offset("g", 1, tp("t", 0), 4)}))
	_, _, err = Takeover(ctxT(t), c, opts(4))
	if e := errcode.From(err); e.Field("reason") != "fenced" {
		t.Fatalf("lower epoch: %v", err)
	}
}

func TestUnknownOutcomeKeepsItsSequenceNumbers(t *testing.T) {
	fake, c := startFake(t)
	l, _ := mustTakeover(t, c, 1)
	ctx := ctxT(t)
	g := group.New("g", group.Selector{Topic: "t"}, []group.TP{tp("t", 0), tp("t", 1)}, 1)
	must(t, l.Append(ctx, []Value{Registration(g)}))
	// A is stored but every answer is lost until the caller gives up.
	answer := loseAnswers(fake)
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	err := l.Append(short, []Value{Offset("g", 1, tp("t", 0), 5)})
	cancel()
	if e := errcode.From(err); err == nil || e.Field("reason") != "append_unknown" || !e.Retryable {
		t.Fatalf("want a retryable unknown outcome, got %v", err)
	}
	answer()
	// B must not reuse A's sequence numbers (it would be taken for a
	// duplicate of A and dropped).
	must(t, l.Append(ctx, []Value{Offset("g", 1, tp("t", 1), 7)}))
	_, rep := mustTakeover(t, c, 2)
	rg := rep.Groups["g"]
	if o, ok := rg.Committed(tp("t", 1)); !ok || o != 7 {
		t.Fatalf("B lost: %d %v", o, ok)
	}
	if o, ok := rg.Committed(tp("t", 0)); !ok || o != 5 {
		t.Fatalf("A (stored, answer lost) should be there once: %d %v", o, ok)
	}
}

func TestConcurrentAppendsAreCoalesced(t *testing.T) {
	fake, c := startFake(t)
	l, _ := mustTakeover(t, c, 1)
	ctx := ctxT(t)
	const n = 64
	var regs []Value
	for i := range n {
		regs = append(regs, Registration(group.New(fmt.Sprintf("g%d", i), group.Selector{Topic: "t"}, []group.TP{tp("t", 0)}, 1)))
	}
	must(t, l.Append(ctx, regs))
	before := fake.Appends()
	// Stall the first flush so the others queue up behind it.
	failAppends(fake, 3)
	mustAllSucceed(t, n, func(i int) error {
		return l.Append(ctx, []Value{Offset(fmt.Sprintf("g%d", i), 1, tp("t", 0), uint64(i+1))})
	})
	if got := fake.Appends() - before; got >= n/2 {
		t.Fatalf("%d appends for %d concurrent commits: not coalesced", got, n)
	}
	_, rep := mustTakeover(t, c, 2)
	for i := range n {
		if o, ok := rep.Groups[fmt.Sprintf("g%d", i)].Committed(tp("t", 0)); !ok || o != uint64(i+1) {
			t.Fatalf("g%d offset %d %v", i, o, ok)
		}
	}
}

// TestReplayRestoresTxnMarks: the latest mark record per (group,
// transactional_id) wins; a clear ends it; a mark of another incarnation of
// the group (written before a delete) is an orphan.
func TestReplayRestoresTxnMarks(t *testing.T) {
	_, c := startFake(t)
	l1, _ := mustTakeover(t, c, 10)
	ctx := ctxT(t)
	g := group.New("g", group.Selector{Topic: "t"}, []group.TP{tp("t", 0), tp("t", 1)}, 7)
	at := time.UnixMilli(1_764_000_000_000)
	m1 := group.TxnMark{ProducerID: "p", Epoch: 3, Partitions: []group.TP{tp("t", 0)}, Marked: at}
	m2 := group.TxnMark{ProducerID: "p", Epoch: 3, Partitions: []group.TP{tp("t", 0), tp("t", 1)}, Marked: at}
	must(t, l1.Append(ctx, []Value{
		Registration(g),
		TxnMark("g", 7, "widened", m1), TxnMark("g", 7, "widened", m2),
		TxnMark("g", 7, "cleared", m1), TxnMarkClear("g", 7, "cleared"),
		TxnMark("g", 6, "orphan", m1),
	}))
	_, rep := mustTakeover(t, c, 11)
	got := rep.Groups["g"].TxnMarks
	if len(got) != 1 || rep.TxnMarks != 1 {
		t.Fatalf("marks %+v (%d)", got, rep.TxnMarks)
	}
	w := got["widened"]
	if !w.Same(m2) || len(w.Partitions) != 2 || !w.Covers(tp("t", 1)) || !w.Marked.Equal(at) {
		t.Fatalf("widened mark %+v", w)
	}
	if id, ok := rep.Groups["g"].PendingTxn(tp("t", 1)); !ok || id != "widened" {
		t.Fatalf("PendingTxn = %q %v", id, ok)
	}
}

func TestDecodeRefusesIncompleteTxnMarks(t *testing.T) {
	ok := TxnMark("g", 7, "tx", group.TxnMark{ProducerID: "p", Epoch: 1, Partitions: []group.TP{tp("t", 0)}, Marked: time.UnixMilli(1)})
	for name, v := range map[string]Value{
		"no producer":               func() Value { v := ok; v.ProducerID = ""; return v }(),
		"no epoch":                  func() Value { v := ok; v.Epoch = 0; return v }(),
		"no partitions":             func() Value { v := ok; v.Partitions = nil; return v }(),
		"no txn id":                 func() Value { v := ok; v.TransactionalID = ""; return v }(),
		"clear without incarnation": TxnMarkClear("g", 0, "tx"),
	} {
		b, _ := json.Marshal(v)
		if _, err := Decode([]byte(v.Key()), b, 9); errcode.From(err).Code != errcode.StorageCorrupt.Name() {
			t.Errorf("%s: %v, want storage_corrupt", name, err)
		}
	}
	b, _ := json.Marshal(ok)
	if back, err := Decode([]byte(TxnMarkKey("g", "tx")), b, 9); err != nil || back.ProducerID != "p" {
		t.Fatalf("a complete mark: %+v %v", back, err)
	}
}
