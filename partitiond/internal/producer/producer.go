package producer

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

// WindowSize is the number of recent batches kept per producer.
const WindowSize = 5

// DefaultTTL is producer_state_ttl_ms's default (spec 8).
const DefaultTTL = 30 * time.Minute

// BatchRef is a stored batch: its sequence range and offsets.
type BatchRef struct {
	BaseSeq, LastSeq       uint64
	BaseOffset, LastOffset uint64
}

// State is one producer's state.
type State struct {
	Epoch   int64
	LastSeq uint64
	// LastUpdate is the Unix ms time of the producer's last batch.
	LastUpdate int64
	// Window holds the last batches, oldest first.
	Window []BatchRef
}

// Batch identifies an idempotent batch.
type Batch struct {
	ProducerID string
	Epoch      int64
	BaseSeq    uint64
	LastSeq    uint64
}

// Verdict is the outcome of Check for a batch that is not rejected.
type Verdict struct {
	// Duplicate: the batch is already stored at Ref's offsets.
	Duplicate bool
	Ref       BatchRef
}

// Table is a partition's producer states. It is not safe for concurrent
// use; the partition serialises access with its append lock.
type Table struct {
	ttl time.Duration
	m   map[string]*State
}

// NewTable returns an empty table expiring state after ttl of inactivity
// (<= 0 picks DefaultTTL).
func NewTable(ttl time.Duration) *Table {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Table{ttl: ttl, m: make(map[string]*State)}
}

// Len returns the number of producers held.
func (t *Table) Len() int { return len(t.m) }

// Get returns a copy of a producer's state.
func (t *Table) Get(id string) (State, bool) {
	s, ok := t.m[id]
	if !ok {
		return State{}, false
	}
	c := *s
	c.Window = append([]BatchRef(nil), s.Window...)
	return c, true
}

func (t *Table) live(id string, now time.Time) *State {
	s := t.m[id]
	if s != nil && now.UnixMilli()-s.LastUpdate > t.ttl.Milliseconds() {
		delete(t.m, id)
		return nil
	}
	return s
}

func itoa(v int64) string  { return strconv.FormatInt(v, 10) }
func utoa(v uint64) string { return strconv.FormatUint(v, 10) }

// Check applies the idempotence rules to b without changing the table.
func (t *Table) Check(b Batch, now time.Time) (Verdict, error) {
	s := t.live(b.ProducerID, now)
	if s == nil {
		if b.BaseSeq != 1 {
			return Verdict{}, errcode.OutOfOrderSequence.New("the first sequence of a producer session is 1",
				"producer", b.ProducerID, "epoch", itoa(b.Epoch), "expected", "1", "got", utoa(b.BaseSeq))
		}
		return Verdict{}, nil
	}
	switch {
	case b.Epoch < s.Epoch:
		return Verdict{}, errcode.StaleProducerEpoch.New("producer epoch is older than the current session",
			"producer", b.ProducerID, "current", itoa(s.Epoch), "got", itoa(b.Epoch))
	case b.Epoch > s.Epoch:
		if b.BaseSeq == 1 || b.BaseSeq == s.LastSeq+1 {
			return Verdict{}, nil
		}
		return Verdict{}, errcode.OutOfOrderSequence.New("a new producer epoch starts at sequence 1",
			"producer", b.ProducerID, "epoch", itoa(b.Epoch), "expected", "1", "got", utoa(b.BaseSeq))
	}
	for _, w := range s.Window {
		if w.BaseSeq == b.BaseSeq && w.LastSeq == b.LastSeq {
			return Verdict{Duplicate: true, Ref: w}, nil
		}
	}
	if b.BaseSeq == s.LastSeq+1 {
		return Verdict{}, nil
	}
	if b.LastSeq <= s.LastSeq {
		return Verdict{}, errcode.DuplicateSequence.New("sequence already stored but older than the dedup window",
			"producer", b.ProducerID, "epoch", itoa(b.Epoch), "seq", utoa(b.BaseSeq), "last", utoa(s.LastSeq))
	}
	return Verdict{}, errcode.OutOfOrderSequence.New("sequence does not follow the last stored one",
		"producer", b.ProducerID, "epoch", itoa(b.Epoch), "expected", utoa(s.LastSeq+1), "got", utoa(b.BaseSeq))
}

// Record notes that b was stored at baseOff..lastOff at time now (Unix ms).
// Batches under a lower epoch than the state's are ignored (they cannot be
// stored after Check; a log replay may meet them after an expiry).
func (t *Table) Record(b Batch, baseOff, lastOff uint64, nowMs int64) {
	s := t.m[b.ProducerID]
	if s == nil {
		s = &State{Epoch: b.Epoch}
		t.m[b.ProducerID] = s
	}
	if b.Epoch < s.Epoch {
		return
	}
	if b.Epoch > s.Epoch {
		s.Epoch = b.Epoch
		s.Window = s.Window[:0]
	}
	s.LastSeq = b.LastSeq
	s.LastUpdate = max(s.LastUpdate, nowMs)
	if len(s.Window) == WindowSize {
		copy(s.Window, s.Window[1:])
		s.Window = s.Window[:WindowSize-1]
	}
	s.Window = append(s.Window, BatchRef{BaseSeq: b.BaseSeq, LastSeq: b.LastSeq, BaseOffset: baseOff, LastOffset: lastOff})
}

// Expire removes producers inactive for longer than the TTL and returns how
// many it removed.
func (t *Table) Expire(now time.Time) int {
	n := 0
	for id, s := range t.m {
		if now.UnixMilli()-s.LastUpdate > t.ttl.Milliseconds() {
			delete(t.m, id)
			n++
		}
	}
	return n
}

// Entry is one producer's state, for checkpoints.
type Entry struct {
	ID    string
	State State
}

// Snapshot returns a deep copy of every state, sorted by id.
func (t *Table) Snapshot() []Entry {
	out := make([]Entry, 0, len(t.m))
	for id := range t.m {
		s, _ := t.Get(id)
		out = append(out, Entry{ID: id, State: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Restore replaces the table's contents.
func (t *Table) Restore(entries []Entry) {
	t.m = make(map[string]*State, len(entries))
	for _, e := range entries {
		s := e.State
		s.Window = append([]BatchRef(nil), e.State.Window...)
		t.m[e.ID] = &s
	}
}

const stateVersion = 1

// Encode serialises a state for the checkpoint store.
func Encode(s *State) []byte {
	b := make([]byte, 0, 26+32*len(s.Window))
	b = append(b, stateVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Epoch))
	b = binary.BigEndian.AppendUint64(b, s.LastSeq)
	b = binary.BigEndian.AppendUint64(b, uint64(s.LastUpdate))
	b = append(b, byte(len(s.Window)))
	for _, w := range s.Window {
		b = binary.BigEndian.AppendUint64(b, w.BaseSeq)
		b = binary.BigEndian.AppendUint64(b, w.LastSeq)
		b = binary.BigEndian.AppendUint64(b, w.BaseOffset)
		b = binary.BigEndian.AppendUint64(b, w.LastOffset)
	}
	return b
}

// Decode parses Encode's output.
func Decode(b []byte) (State, error) {
	var s State
	if len(b) < 26 || b[0] != stateVersion {
		return s, fmt.Errorf("producer: state encoding not recognised")
	}
	be := binary.BigEndian
	s.Epoch = int64(be.Uint64(b[1:]))
	s.LastSeq = be.Uint64(b[9:])
	s.LastUpdate = int64(be.Uint64(b[17:]))
	n := int(b[25])
	if n > WindowSize || len(b) != 26+32*n {
		return s, fmt.Errorf("producer: state window length mismatch")
	}
	s.Window = make([]BatchRef, n)
	for i := range s.Window {
		p := 26 + 32*i
		s.Window[i] = BatchRef{BaseSeq: be.Uint64(b[p:]), LastSeq: be.Uint64(b[p+8:]),
			BaseOffset: be.Uint64(b[p+16:]), LastOffset: be.Uint64(b[p+24:])}
	}
	return s, nil
}
