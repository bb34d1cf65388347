package txn

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const timeout = time.Minute

func ids() func() string {
	n := 0
	return func() string { n++; return "pid-" + string(rune('0'+n)) }
}

// at builds a state directly.
func at(state State, epoch, txnEpoch int64) *Txn {
	return &Txn{ID: "tx", ProducerID: "pid-1", Epoch: epoch, TxnEpoch: txnEpoch, State: state,
		Participants: []TP{{"out", 0}}, Messages: 3, StartMs: t0.UnixMilli(), DeadlineMs: t0.Add(timeout).UnixMilli()}
}

type want struct {
	err      *errcode.Code
	state    State
	epoch    int64
	txnEpoch int64
	same     bool // the receiver is answered unchanged (idempotent)
}

func code(c errcode.Code) *errcode.Code { return &c }

func check(t *testing.T, name string, from, got *Txn, err error, w want) {
	t.Helper()
	if w.err != nil {
		if !errors.Is(err, *w.err) {
			t.Fatalf("%s: got %v, want %s", name, err, w.err.Name())
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if w.same && got != from {
		t.Fatalf("%s: want the state unchanged, got a new one %+v", name, got)
	}
	if got.State != w.state || got.Epoch != w.epoch || got.TxnEpoch != w.txnEpoch {
		t.Fatalf("%s: got state %s epoch %d txn_epoch %d, want %s %d %d", name, got.State, got.Epoch, got.TxnEpoch, w.state, w.epoch, w.txnEpoch)
	}
}

// TestSpecTransitions is spec 3.2's table, row by row, plus the refusals
// each command has.
func TestSpecTransitions(t *testing.T) {
	later := t0.Add(time.Second)
	cases := []struct {
		name string
		from *Txn
		do   func(*Txn) (*Txn, error)
		want want
	}{
		// (none) | INIT_PRODUCER_ID | any | initialized, epoch raised on repeat
		{"init new id", nil, func(*Txn) (*Txn, error) { return Init(nil, "tx", t0, ids()) }, want{state: Empty, epoch: 1}},
		{"init after commit", at(Committed, 1, 1), func(x *Txn) (*Txn, error) { return Init(x, "tx", t0, ids()) }, want{state: Committed, epoch: 2, txnEpoch: 1}},
		{"init after abort", at(Aborted, 4, 4), func(x *Txn) (*Txn, error) { return Init(x, "tx", t0, ids()) }, want{state: Aborted, epoch: 5, txnEpoch: 4}},
		{"init repeat before begin", at(Empty, 1, 0), func(x *Txn) (*Txn, error) { return Init(x, "tx", t0, ids()) }, want{state: Empty, epoch: 2}},
		// older epoch fenced; open work aborted
		{"init aborts open work", at(Open, 3, 3), func(x *Txn) (*Txn, error) { return Init(x, "tx", t0, ids()) }, want{state: PrepareAbort, epoch: 4, txnEpoch: 3}},
		// rejected if already committing
		{"init while committing", at(PrepareCommit, 3, 3), func(x *Txn) (*Txn, error) { return Init(x, "tx", t0, ids()) }, want{err: code(errcode.ConcurrentTransactions)}},
		{"init while aborting", at(PrepareAbort, 3, 3), func(x *Txn) (*Txn, error) { return Init(x, "tx", t0, ids()) }, want{err: code(errcode.ConcurrentTransactions)}},

		// initialized epoch | BEGIN_TXN | epoch not yet used | open
		{"begin", at(Committed, 2, 1), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 2, t0, timeout) }, want{state: Open, epoch: 2, txnEpoch: 2}},
		{"begin first", at(Empty, 1, 0), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 1, t0, timeout) }, want{state: Open, epoch: 1, txnEpoch: 1}},
		{"begin repeat while open", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 2, t0, timeout) }, want{state: Open, epoch: 2, txnEpoch: 2, same: true}},
		// committed or aborted | BEGIN_TXN same epoch | producer_reinitialization_required
		{"begin after commit same epoch", at(Committed, 2, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 2, t0, timeout) }, want{err: code(errcode.ProducerReinitializationRequired)}},
		{"begin after abort same epoch", at(Aborted, 2, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 2, t0, timeout) }, want{err: code(errcode.ProducerReinitializationRequired)}},
		{"begin while committing same epoch", at(PrepareCommit, 2, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 2, t0, timeout) }, want{err: code(errcode.ProducerReinitializationRequired)}},
		{"begin while old epoch aborts", at(PrepareAbort, 3, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 3, t0, timeout) }, want{err: code(errcode.ConcurrentTransactions)}},
		{"begin stale epoch", at(Committed, 3, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 2, t0, timeout) }, want{err: code(errcode.StaleProducerEpoch)}},
		{"begin unknown epoch", at(Committed, 3, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-1", 4, t0, timeout) }, want{err: code(errcode.ProducerFenced)}},
		{"begin other producer", at(Committed, 3, 2), func(x *Txn) (*Txn, error) { return x.Begin("pid-9", 3, t0, timeout) }, want{err: code(errcode.ProducerFenced)}},

		// open | TXN_PUBLISH | seqNum > 0 | open
		{"publish adds a participant", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x.AddParticipant("pid-1", 2, TP{"out", 1}, later) }, want{state: Open, epoch: 2, txnEpoch: 2}},
		{"publish to a known participant", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x.AddParticipant("pid-1", 2, TP{"out", 0}, later) }, want{state: Open, epoch: 2, txnEpoch: 2, same: true}},
		{"publish seq 0", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x, x.CheckPublish("pid-1", 2, 0) }, want{err: code(errcode.InvalidParameter)}},
		{"publish without begin", at(Committed, 3, 2), func(x *Txn) (*Txn, error) { return x, x.CheckPublish("pid-1", 3, 1) }, want{err: code(errcode.TransactionNotFound)}},
		{"publish after commit", at(Committed, 2, 2), func(x *Txn) (*Txn, error) { return x, x.CheckPublish("pid-1", 2, 1) }, want{err: code(errcode.TransactionAlreadyCommitted)}},
		{"publish while committing", at(PrepareCommit, 2, 2), func(x *Txn) (*Txn, error) { return x, x.CheckPublish("pid-1", 2, 1) }, want{err: code(errcode.TransactionAlreadyCommitted)}},
		{"publish after abort", at(Aborted, 2, 2), func(x *Txn) (*Txn, error) { return x, x.CheckPublish("pid-1", 2, 1) }, want{err: code(errcode.TransactionAborted)}},
		{"publish stale epoch", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x, x.CheckPublish("pid-1", 1, 1) }, want{err: code(errcode.StaleProducerEpoch)}},

		// open | SEND_OFFSETS_TO_TXN | group session valid | open, offsets staged
		{"stage offsets", at(Open, 2, 2), func(x *Txn) (*Txn, error) {
			return x.StageOffsets("pid-1", 2, Session{Group: "g", Member: "m", Generation: 1}, []StagedOffset{{TP{"in", 0}, 5}}, later)
		}, want{state: Open, epoch: 2, txnEpoch: 2}},
		{"stage offsets after abort", at(Aborted, 2, 2), func(x *Txn) (*Txn, error) {
			return x.StageOffsets("pid-1", 2, Session{Group: "g"}, []StagedOffset{{TP{"in", 0}, 5}}, later)
		}, want{err: code(errcode.TransactionAborted)}},
		{"stage no offsets", at(Open, 2, 2), func(x *Txn) (*Txn, error) {
			return x.StageOffsets("pid-1", 2, Session{Group: "g"}, nil, later)
		}, want{err: code(errcode.MissingParameter)}},

		// open | END_TXN commit | matching producerId and epoch | prepare_commit, then committed
		{"commit prepares", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, true, later) }, want{state: PrepareCommit, epoch: 2, txnEpoch: 2}},
		{"commit completes", at(PrepareCommit, 2, 2), func(x *Txn) (*Txn, error) { return x.Complete(later), nil }, want{state: Committed, epoch: 2, txnEpoch: 2}},
		// open | END_TXN abort, or timeout | aborted (after durable preparation)
		{"abort prepares", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, false, later) }, want{state: PrepareAbort, epoch: 2, txnEpoch: 2}},
		{"abort completes", at(PrepareAbort, 2, 2), func(x *Txn) (*Txn, error) { return x.Complete(later), nil }, want{state: Aborted, epoch: 2, txnEpoch: 2}},
		{"timeout prepares abort", at(Open, 2, 2), func(x *Txn) (*Txn, error) { return x.TimedOut(t0.Add(timeout)), nil }, want{state: PrepareAbort, epoch: 2, txnEpoch: 2}},
		// prepare_commit | END_TXN abort | rejected
		{"abort while committing", at(PrepareCommit, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, false, later) }, want{err: code(errcode.TransactionNotAbortable)}},
		{"commit repeat while committing", at(PrepareCommit, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, true, later) }, want{state: PrepareCommit, epoch: 2, txnEpoch: 2, same: true}},
		{"abort repeat while aborting", at(PrepareAbort, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, false, later) }, want{state: PrepareAbort, epoch: 2, txnEpoch: 2, same: true}},
		{"commit while aborting", at(PrepareAbort, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, true, later) }, want{err: code(errcode.TransactionAborted)}},
		// committed or aborted | END_TXN same result | idempotent
		{"commit repeat", at(Committed, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, true, later) }, want{state: Committed, epoch: 2, txnEpoch: 2, same: true}},
		{"abort repeat", at(Aborted, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, false, later) }, want{state: Aborted, epoch: 2, txnEpoch: 2, same: true}},
		// committed | END_TXN abort | error; aborted | END_TXN commit | error
		{"abort after commit", at(Committed, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, false, later) }, want{err: code(errcode.TransactionAlreadyCommitted)}},
		{"commit after abort", at(Aborted, 2, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, true, later) }, want{err: code(errcode.TransactionAborted)}},
		// A lower epoch on END_TXN is fenced.
		{"end with a lower epoch", at(Open, 3, 3), func(x *Txn) (*Txn, error) { return x.End("pid-1", 2, true, later) }, want{err: code(errcode.ProducerFenced)}},
		{"end of the re-initialised epoch's abort", at(PrepareAbort, 4, 3), func(x *Txn) (*Txn, error) { return x.End("pid-1", 3, true, later) }, want{err: code(errcode.ProducerFenced)}},
		{"end without begin", at(Aborted, 3, 2), func(x *Txn) (*Txn, error) { return x.End("pid-1", 3, true, later) }, want{err: code(errcode.TransactionNotFound)}},
		{"end other producer", at(Open, 3, 3), func(x *Txn) (*Txn, error) { return x.End("pid-2", 3, true, later) }, want{err: code(errcode.ProducerFenced)}},
	}
	for _, c := range cases {
		got, err := c.do(c.from)
		check(t, c.name, c.from, got, err, c.want)
	}
}

func TestStagedOffsetsRules(t *testing.T) {
	x := at(Open, 2, 2)
	s := Session{Group: "g", Member: "m", Generation: 3, RegistrationEpoch: 1}
	x, err := x.StageOffsets("pid-1", 2, s, []StagedOffset{{TP{"in", 1}, 10}, {TP{"in", 0}, 5}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Several topics, one session; a partition keeps or raises its value.
	x, err = x.StageOffsets("pid-1", 2, s, []StagedOffset{{TP{"in", 0}, 5}, {TP{"in2", 0}, 1}, {TP{"in", 1}, 12}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []StagedOffset{{TP{"in", 0}, 5}, {TP{"in", 1}, 12}, {TP{"in2", 0}, 1}}
	if !reflect.DeepEqual(x.Offsets, want) {
		t.Fatalf("staged %+v", x.Offsets)
	}
	if !x.HasParticipant(TP{"out", 0}) || len(x.Participants) != 1 {
		t.Fatalf("participants %+v", x.Participants)
	}
	_, err = x.StageOffsets("pid-1", 2, s, []StagedOffset{{TP{"in", 1}, 11}}, t0)
	if !errors.Is(err, errcode.OffsetRegression) {
		t.Fatalf("lower staged offset: %v", err)
	}
	other := s
	other.Generation = 4
	_, err = x.StageOffsets("pid-1", 2, other, []StagedOffset{{TP{"in", 0}, 6}}, t0)
	if !errors.Is(err, errcode.GenMismatch) {
		t.Fatalf("another session: %v", err)
	}
	// The machine never changes its receiver.
	if len(x.Offsets) != 3 || x.Offsets[1].Next != 12 {
		t.Fatalf("receiver changed: %+v", x.Offsets)
	}
}

// TestLifecycle runs the whole path: init, begin, publish, offsets, commit,
// re-init, a timeout, expiration, and the epoch roll-over past int32.
func TestLifecycle(t *testing.T) {
	newID := ids()
	x, err := Init(nil, "tx", t0, newID)
	if err != nil || x.ProducerID != "pid-1" || x.Epoch != 1 {
		t.Fatalf("init %+v %v", x, err)
	}
	x, _ = x.Begin("pid-1", 1, t0, timeout)
	x, _ = x.AddParticipant("pid-1", 1, TP{"out", 2}, t0)
	x.Published(2)
	x, _ = x.End("pid-1", 1, true, t0)
	x = x.Complete(t0)
	if x.State != Committed || x.Messages != 2 || x.State.Status() != "committed" {
		t.Fatalf("after commit %+v", x)
	}
	x, _ = Init(x, "tx", t0, newID)
	if x.ProducerID != "pid-1" || x.Epoch != 2 {
		t.Fatalf("re-init keeps the producer id: %+v", x)
	}
	x, _ = x.Begin("pid-1", 2, t0, timeout)
	if x.Messages != 0 || len(x.Participants) != 0 {
		t.Fatalf("a new transaction starts empty: %+v", x)
	}
	if x.TimedOut(t0.Add(timeout-time.Millisecond)) != nil {
		t.Fatal("timed out before the deadline")
	}
	x = x.TimedOut(t0.Add(timeout)).Complete(t0.Add(timeout))
	if x.State != Aborted {
		t.Fatalf("timeout: %+v", x)
	}
	if _, err := x.End("pid-1", 2, true, t0); !errors.Is(err, errcode.TransactionAborted) {
		t.Fatalf("commit after timeout: %v", err)
	}
	if x.Expire(t0.Add(timeout+time.Hour-time.Millisecond), time.Hour) != nil {
		t.Fatal("expired early")
	}
	tomb := x.Expire(t0.Add(2*time.Hour), time.Hour)
	if tomb == nil || !tomb.Expired || tomb.Epoch != 2 || tomb.ProducerID != "pid-1" || tomb.Participants != nil {
		t.Fatalf("tombstone %+v", tomb)
	}
	x, _ = Init(tomb, "tx", t0, newID)
	if x.Epoch != 3 || x.ProducerID != "pid-1" || x.Expired {
		t.Fatalf("init after expiry %+v", x)
	}
	// Epoch roll-over.
	x.Epoch, x.State = epochMax, Committed
	x, _ = Init(x, "tx", t0, newID)
	if x.ProducerID != "pid-2" || x.Epoch != 1 || x.State != Empty {
		t.Fatalf("roll-over %+v", x)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	x := at(Open, 2, 2)
	x.Session = &Session{Group: "g", Member: "m", Generation: 1}
	x.Offsets = []StagedOffset{{TP{"a", 0}, 1}, {TP{"a", 1}, 2}}
	x.Participants = []TP{{"__consumer_offsets", 3}, {"out", 0}}
	k, v, err := Encode(x)
	if err != nil {
		t.Fatal(err)
	}
	if k != `txn/"tx"` {
		t.Fatalf("key %s", k)
	}
	got, err := Decode([]byte(k), v)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, x) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, x)
	}
}

func TestRecordRejects(t *testing.T) {
	good := at(Open, 2, 2)
	_, v, _ := Encode(good)
	cases := map[string][2]string{
		"unknown key":      {`grp/"tx"`, string(v)},
		"unquoted key":     {`txn/tx`, string(v)},
		"other id":         {`txn/"ty"`, string(v)},
		"trailing":         {`txn/"tx"`, string(v) + "{}"},
		"version":          {`txn/"tx"`, `{"v":2,"type":"txn","id":"tx","producer_id":"p","epoch":1,"txn_epoch":1,"state":"open","messages":0,"updated_ms":0}`},
		"unknown field":    {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"p","epoch":1,"txn_epoch":1,"state":"open","messages":0,"updated_ms":0,"x":1}`},
		"unknown state":    {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"p","epoch":1,"txn_epoch":1,"state":"done","messages":0,"updated_ms":0}`},
		"epoch 0":          {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"p","epoch":0,"txn_epoch":0,"state":"empty","messages":0,"updated_ms":0}`},
		"txn epoch above":  {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"p","epoch":1,"txn_epoch":2,"state":"open","messages":0,"updated_ms":0}`},
		"no producer":      {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"","epoch":1,"txn_epoch":1,"state":"open","messages":0,"updated_ms":0}`},
		"unsorted":         {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"p","epoch":1,"txn_epoch":1,"state":"open","participants":[{"topic":"b","partition":0},{"topic":"a","partition":0}],"messages":0,"updated_ms":0}`},
		"repeated":         {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"p","epoch":1,"txn_epoch":1,"state":"open","participants":[{"topic":"a","partition":0},{"topic":"a","partition":0}],"messages":0,"updated_ms":0}`},
		"offsets, no sess": {`txn/"tx"`, `{"v":1,"type":"txn","id":"tx","producer_id":"p","epoch":1,"txn_epoch":1,"state":"open","offsets":[{"topic":"a","partition":0,"next":1}],"messages":0,"updated_ms":0}`},
		"not json":         {`txn/"tx"`, `{`},
	}
	for name, c := range cases {
		if _, err := Decode([]byte(c[0]), []byte(c[1])); !errors.Is(err, errcode.MalformedInput) {
			t.Errorf("%s: got %v, want malformed_input", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	x := at(Open, 2, 2)
	x.Session = &Session{Group: "g"}
	x.Offsets = []StagedOffset{{TP{"a", 0}, 1}}
	k, v, _ := Encode(x)
	f.Add([]byte(k), v)
	f.Add([]byte(`txn/"a"`), []byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, key, val []byte) {
		got, err := Decode(key, val)
		if err != nil {
			if !errors.Is(err, errcode.MalformedInput) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		k2, v2, err := Encode(got)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode([]byte(k2), v2)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-decode %+v %v", again, err)
		}
	})
}
