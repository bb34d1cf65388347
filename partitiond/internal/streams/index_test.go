package streams

import (
	"context"
	"encoding/binary"
	"testing"

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
	if h, _ := x.Head(context.Background(), "a"); h != 3 {
		t.Fatalf("head a = %d", h)
	}
	pos, err := x.Committed("b", 4) // offsets 0..3 committed: b has versions 1, 2
	if err != nil || pos.Head != 2 || pos.First != 1 || len(pos.Offsets) != 2 {
		t.Fatalf("committed b: %+v %v", pos, err)
	}
	x.Appended("a", 4, uint64(len(l.recs))) // recorded under the append lock
	l.add(t, "a", 4)
	if h, _ := x.Head(context.Background(), "a"); h != 4 {
		t.Fatalf("head after append = %d", h)
	}
	// A follower truncation rebuilds from the log.
	l.recs = l.recs[:2]
	l.rewinds++
	if h, _ := x.Head(context.Background(), "a"); h != 1 {
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
	if h, _ := x.Head(context.Background(), "a"); h != 3 {
		t.Fatalf("head of a removed stream = %d", h)
	}
	x.Appended("a", 4, uint64(len(l.recs)))
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
	if h, _ := y.Head(context.Background(), "gone"); h != 3 {
		t.Fatalf("head of gone after a restart = %d", h)
	}
	if pos, _ := y.Committed("kept", 7); pos.Head != 4 || pos.First != 2 {
		t.Fatalf("kept %+v", pos)
	}
	// gone continues; once its head is in the log again, the next Retain
	// drops it from the file, and a restart finds it in the log.
	y.Appended("gone", 4, uint64(len(l.recs)))
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
