package streams

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// memLog is a Source over records held in memory.
type memLog struct {
	recs    [][]byte
	start   uint64
	rewinds uint64
	dir     string
}

func (m *memLog) add(t *testing.T, key string, ver uint64) {
	r := wire.Record{Topic: "t", Key: key, AggregateVersion: ver, Offset: uint64(len(m.recs)), Payload: []byte("p")}
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.recs = append(m.recs, b)
}

func (m *memLog) ReadLog(from uint64, maxRecords, _ int) ([]byte, int, uint64, error) {
	var out []byte
	n := 0
	for o := from; o < uint64(len(m.recs)) && (maxRecords <= 0 || n < maxRecords); o++ {
		out = binary.BigEndian.AppendUint32(out, uint32(len(m.recs[o])))
		out = append(out, m.recs[o]...)
		n++
	}
	return out, n, from + uint64(n), nil
}
func (m *memLog) LogStartOffset() uint64                    { return m.start }
func (m *memLog) LogEndOffset() uint64                      { return uint64(len(m.recs)) }
func (m *memLog) DurableEnd() uint64                        { return uint64(len(m.recs)) }
func (m *memLog) HighWatermark() uint64                     { return uint64(len(m.recs)) }
func (m *memLog) Rewinds() uint64                           { return m.rewinds }
func (m *memLog) WaitDurable(context.Context, uint64) error { return nil }
func (m *memLog) Dir() string                               { return m.dir }

func TestIndexFollowsTheLog(t *testing.T) {
	l := &memLog{}
	for v := uint64(1); v <= 3; v++ {
		l.add(t, "a", v)
		l.add(t, "b", v)
	}
	l.add(t, "a", 9) // not a continuation: not an event of a
	x := NewIndex(l)
	if h, _ := x.Head(context.Background(), "a", ""); h != 3 {
		t.Fatalf("head a = %d", h)
	}
	pos, err := x.Committed("b", 4) // offsets 0..3 committed: b has versions 1, 2
	if err != nil || pos.Head != 2 || pos.First != 1 || len(pos.Offsets) != 2 {
		t.Fatalf("committed b: %+v %v", pos, err)
	}
	x.Appended("a", 4, uint64(len(l.recs)), "") // recorded under the append lock
	l.add(t, "a", 4)
	if h, _ := x.Head(context.Background(), "a", ""); h != 4 {
		t.Fatalf("head after append = %d", h)
	}
	// A follower truncation rebuilds from the log.
	l.recs = l.recs[:2]
	l.rewinds++
	if h, _ := x.Head(context.Background(), "a", ""); h != 1 {
		t.Fatalf("head after truncation = %d", h)
	}
	// Retention removed the head of the stream: the first retained version
	// starts it.
	l2 := &memLog{}
	for v := uint64(1); v <= 5; v++ {
		l2.add(t, "a", v)
	}
	l2.start = 2
	pos, _ = NewIndex(l2).Committed("a", 5)
	if pos.First != 3 || pos.Head != 5 {
		t.Fatalf("after retention %+v", pos)
	}
}

// TestIndexCutByRetention: retention moving the log start under a built
// index cuts the streams at their first retained version, and a stream
// with no event left keeps its head.
func TestIndexCutByRetention(t *testing.T) {
	l := &memLog{}
	for v := uint64(1); v <= 3; v++ {
		l.add(t, "a", v)
	}
	l.add(t, "a", 7) // a stray, removed with its segment
	for v := uint64(1); v <= 4; v++ {
		l.add(t, "b", v)
	}
	x := NewIndex(l)
	if pos, _ := x.Committed("a", 8); pos.Head != 3 || pos.Stray == nil {
		t.Fatalf("before retention %+v", pos)
	}
	l.start = 5 // a's events, the stray and b's version 1 are gone
	pos, err := x.Committed("a", 8)
	if err != nil || pos.Head != 3 || pos.First != 4 || len(pos.Offsets) != 0 || pos.Stray != nil {
		t.Fatalf("a after retention %+v %v", pos, err)
	}
	if pos, _ := x.Committed("b", 8); pos.Head != 4 || pos.First != 2 || len(pos.Offsets) != 3 || pos.Offsets[0] != 5 {
		t.Fatalf("b after retention %+v", pos)
	}
	if h, _ := x.Head(context.Background(), "a", ""); h != 3 {
		t.Fatalf("head of a removed stream = %d", h)
	}
	x.Appended("a", 4, uint64(len(l.recs)), "")
	l.add(t, "a", 4)
	if pos, _ := x.Committed("a", 9); pos.Head != 4 || pos.First != 4 || len(pos.Offsets) != 1 {
		t.Fatalf("a continued after retention %+v", pos)
	}
}

// TestIndexHeadsSurviveRetention: Retain saves the heads of the streams
// retention is about to remove entirely, and a new index (a restart) over
// the cut log still knows them; a crash before the deletion leaves the log
// in charge.
func TestIndexHeadsSurviveRetention(t *testing.T) {
	l := &memLog{dir: t.TempDir()}
	for v := uint64(1); v <= 3; v++ {
		l.add(t, "gone", v)
	}
	for v := uint64(1); v <= 4; v++ {
		l.add(t, "kept", v)
	}
	x := NewIndex(l)
	if err := x.Retain(4); err != nil {
		t.Fatal(err)
	}
	// Crash before the segments went: the log still holds gone's events.
	if pos, err := NewIndex(l).Committed("gone", 7); err != nil || pos.Head != 3 || pos.First != 1 || len(pos.Offsets) != 3 || pos.Stray != nil {
		t.Fatalf("gone before the deletion %+v %v", pos, err)
	}
	l.start = 4
	y := NewIndex(l)
	if pos, err := y.Committed("gone", 7); err != nil || pos.Head != 3 || pos.First != 4 || len(pos.Offsets) != 0 {
		t.Fatalf("gone after a restart %+v %v", pos, err)
	}
	if h, _ := y.Head(context.Background(), "gone", ""); h != 3 {
		t.Fatalf("head of gone after a restart = %d", h)
	}
	if pos, _ := y.Committed("kept", 7); pos.Head != 4 || pos.First != 2 {
		t.Fatalf("kept %+v", pos)
	}
	// gone continues; once its head is in the log again, the next Retain
	// drops it from the file, and a restart finds it in the log.
	y.Appended("gone", 4, uint64(len(l.recs)), "")
	l.add(t, "gone", 4)
	if err := y.Retain(5); err != nil {
		t.Fatal(err)
	}
	l.start = 5
	z := NewIndex(l)
	if pos, _ := z.Committed("gone", 8); pos.Head != 4 || pos.First != 4 || len(pos.Offsets) != 1 {
		t.Fatalf("gone continued, after a restart %+v", pos)
	}
	if pos, _ := z.Committed("kept", 8); pos.Head != 4 || pos.First != 3 {
		t.Fatalf("kept after the second cut %+v", pos)
	}
}

func (m *memLog) addTxn(t *testing.T, producer, key string, ver uint64) {
	r := wire.Record{Topic: "t", Key: key, AggregateVersion: ver, Offset: uint64(len(m.recs)), Payload: []byte("p"),
		ProducerID: producer, SeqNum: 1, Epoch: 1, TransactionalID: "tx-" + producer, TransactionState: wire.TxnStateOpen}
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.recs = append(m.recs, b)
}

func (m *memLog) addMarker(t *testing.T, producer string, commit bool) {
	r := wire.TxnMarkerRecord("t", 0, producer, 1, "tx-"+producer, wire.TxnMarker{Commit: commit}, 1)
	r.Offset = uint64(len(m.recs))
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.recs = append(m.recs, b)
}

// TestIndexTransactionalEvents: a transaction's events count for its own
// next append, block every other writer, stay out of the committed view
// until the commit marker is below the high watermark, and an abort gives
// their versions back, on a running index and on one rebuilt from the log.
func TestIndexTransactionalEvents(t *testing.T) {
	ctx := context.Background()
	l := &memLog{}
	l.add(t, "a", 1)
	l.add(t, "a", 2)
	l.addTxn(t, "p1", "a", 3) // offset 2
	l.addTxn(t, "p1", "a", 4) // offset 3
	l.addTxn(t, "p1", "n", 1) // offset 4: a new aggregate
	for _, x := range []*Index{NewIndex(l)} {
		if h, err := x.Head(ctx, "a", "p1"); err != nil || h != 4 {
			t.Fatalf("own head = %d %v", h, err)
		}
		for _, other := range []string{"", "p2"} {
			_, err := x.Head(ctx, "a", other)
			if errcode.CodeOf(err) != errcode.ConcurrentTransactions.Name() || !errcode.IsRetryable(err) {
				t.Fatalf("writer %q on a held aggregate: %v", other, err)
			}
		}
		if pos, _ := x.Committed("a", 100); pos.Head != 2 || len(pos.Offsets) != 2 {
			t.Fatalf("committed a while open: %+v", pos)
		}
		if pos, _ := x.Committed("n", 100); pos.Head != 0 {
			t.Fatalf("committed n while open: %+v", pos)
		}
	}

	// Abort: versions 3, 4 of a and the whole of n go back.
	aborted := &memLog{recs: append([][]byte(nil), l.recs...)}
	aborted.addMarker(t, "p1", false)
	x := NewIndex(aborted)
	if h, err := x.Head(ctx, "a", ""); err != nil || h != 2 {
		t.Fatalf("head after abort = %d %v", h, err)
	}
	if h, err := x.Head(ctx, "n", "p2"); err != nil || h != 0 {
		t.Fatalf("n after abort = %d %v", h, err)
	}
	aborted.add(t, "a", 3) // the version is reused
	if h, _ := x.Head(ctx, "a", ""); h != 3 {
		t.Fatalf("head after reuse = %d", h)
	}
	if pos, _ := x.Committed("a", 100); pos.Head != 3 || pos.Offsets[2] != 6 || pos.Stray != nil {
		t.Fatalf("committed after reuse: %+v", pos)
	}

	// Commit: visible once the marker (offset 5) is below the HWM.
	committed := &memLog{recs: append([][]byte(nil), l.recs...)}
	committed.addMarker(t, "p1", true)
	y := NewIndex(committed)
	if pos, _ := y.Committed("a", 5); pos.Head != 2 {
		t.Fatalf("committed before the marker is: %+v", pos)
	}
	if pos, _ := y.Committed("a", 6); pos.Head != 4 {
		t.Fatalf("committed after the marker is: %+v", pos)
	}
	if h, err := y.Head(ctx, "a", "p2"); err != nil || h != 4 {
		t.Fatalf("another writer after the commit: %d %v", h, err)
	}
	committed.add(t, "a", 5)
	if h, _ := y.Head(ctx, "a", ""); h != 5 {
		t.Fatalf("head = %d", h)
	}

	// A running index decides as the markers arrive.
	z := NewIndex(l)
	if _, err := z.Head(ctx, "a", "p1"); err != nil {
		t.Fatal(err)
	}
	l.addMarker(t, "p1", false)
	if h, err := z.Head(ctx, "a", "p2"); err != nil || h != 2 {
		t.Fatalf("running index after abort: %d %v", h, err)
	}
}

// TestIndexMergeHeads: a leader's removed heads fill in the streams this
// log knows nothing of (or only an older removed head of), never one whose
// events the log holds, and survive a rebuild through the heads file.
func TestIndexMergeHeads(t *testing.T) {
	ctx := context.Background()
	l := &memLog{dir: t.TempDir()}
	l.add(t, "live", 1)
	x := NewIndex(l)
	id, seq, heads, err := x.RemovedHeads()
	if err != nil || id == 0 || seq != 0 || len(heads) != 0 {
		t.Fatalf("empty heads %d %d %v %v", id, seq, heads, err)
	}
	if err := x.MergeHeads(map[string]uint64{"live": 9, "gone": 4}); err != nil {
		t.Fatal(err)
	}
	if err := x.MergeHeads(map[string]uint64{"gone": 2}); err != nil { // an older head changes nothing
		t.Fatal(err)
	}
	for key, want := range map[string]uint64{"live": 1, "gone": 4} {
		if h, _ := x.Head(ctx, key, ""); h != want {
			t.Fatalf("head %s = %d, want %d", key, h, want)
		}
	}
	if _, seq, heads, _ := x.RemovedHeads(); seq != 1 || len(heads) != 1 || heads["gone"] != 4 {
		t.Fatalf("heads after merge: seq %d %v", seq, heads)
	}
	l.rewinds++ // a rebuild of a fresh index from the log and the heads file
	y := NewIndex(l)
	if h, _ := y.Head(ctx, "gone", ""); h != 4 {
		t.Fatalf("head after rebuild = %d", h)
	}
	l.add(t, "gone", 5)
	if h, _ := y.Head(ctx, "gone", ""); h != 5 {
		t.Fatalf("head after the next append = %d", h)
	}
}
