// Package streams is partitiond's event-sourcing layer (SERVICE-SPEC 2.5,
// 4.8): the stream-version index of a partition, derived from its log, and
// the per-partition snapshot store. The role package (partitiond/streams.go)
// serves them over gRPC and replicates snapshots.
//
// The log is the only truth about versions: an event is a record with a key
// and an aggregate version, and the index is rebuilt from the log whenever
// it cannot be trusted (a new process, a follower truncation), so it always
// agrees with what the log holds. docs/event-sourcing.md has the model.
package streams

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/record"
)

// Source is the partition as the index reads it (*partition.Partition).
type Source interface {
	ReadLog(from uint64, maxRecords, maxBytes int) (records []byte, count int, next uint64, err error)
	LogStartOffset() uint64
	LogEndOffset() uint64
	DurableEnd() uint64
	HighWatermark() uint64
	Rewinds() uint64
	WaitDurable(ctx context.Context, end uint64) error
	// Dir is the partition's directory, where the heads file lives (""
	// keeps none).
	Dir() string
}

// readChunk bounds one catch-up read.
const readChunk = 4 << 20

// Index maps each aggregate key of one partition to the log offsets of its
// versions. It is built from the log: Sync reads what the log holds beyond
// what the index has seen, and Appended records an append made under the
// partition's append lock. Its lock sits between the partition's append
// lock and the log's locks (partitiond/LOCKS.md).
type Index struct {
	src Source

	mu      sync.Mutex
	next    uint64 // log offset up to which every record was seen
	start   uint64 // log start offset the streams were last cut at
	rewinds uint64
	built   bool
	streams map[string]*stream
	// strays holds, per key, the first record that carried the key and an
	// aggregate version but did not continue its stream (a repeated or
	// skipped version): not an event, but what a replay proof reports.
	strays map[string]Stray
	// removed holds the heads of the streams retention removed entirely,
	// as the heads file has them (nil until loaded); seed says a rebuild
	// from the log must still add those the log knows nothing of.
	removed map[string]uint64
	seed    bool
	// pending names, per transactional producer id, the keys whose
	// streams end in undecided events of its transaction
	// (TXN_APPEND_STREAM); its marker decides them.
	pending map[string][]string
	// headsID and headsSeq name the current set of removed heads (a random
	// id per index, a change count): a follower's catch-up fetches the set
	// only when they changed (RemovedHeads, MergeHeads).
	headsID, headsSeq uint64
}

// Stray is a record of a key whose aggregate version does not continue the
// key's stream.
type Stray struct {
	Version, Offset uint64
}

// stream is one aggregate's versions: offsets[i] holds version first+i.
// When retention removed all of them, offsets is empty and first is the
// head + 1: the versions are gone, the head is not.
//
// A stream may end in the events of one transaction (TXN_APPEND_STREAM):
// txn is its producer id and versions txnFirst..head are its events. They
// count for the next append of that transaction and block every other
// writer (so an abort can take them back without leaving a gap); the
// commit marker (at commitAt - 1) makes them ordinary events once the high
// watermark passed it; the abort marker removes them.
type stream struct {
	first   uint64
	offsets []uint64

	txn      string
	txnFirst uint64
	commitAt uint64
}

func (s *stream) head() uint64 { return s.first + uint64(len(s.offsets)) - 1 }

// NewIndex returns an empty index over src; the first use builds it.
func NewIndex(src Source) *Index {
	return &Index{src: src, streams: map[string]*stream{}, strays: map[string]Stray{}, pending: map[string][]string{},
		headsID: rand.Uint64() | 1}
}

// syncLocked brings the index up to the log's durable end, rebuilding it
// from the log start when the log was cut or skipped since it last looked.
func (x *Index) syncLocked() error {
	if rw := x.src.Rewinds(); !x.built || rw != x.rewinds || x.next > x.src.LogEndOffset() {
		x.streams = map[string]*stream{}
		x.strays = map[string]Stray{}
		x.pending = map[string][]string{}
		x.next = x.src.LogStartOffset()
		x.start = x.next
		x.rewinds = rw
		x.built = true
		x.seed = true
		if x.removed == nil {
			heads, err := loadHeads(x.src.Dir())
			if err != nil {
				x.built = false
				return err
			}
			x.removed = heads
		}
	}
	if ls := x.src.LogStartOffset(); ls > x.start {
		x.cut(ls)
	}
	x.next = max(x.next, x.src.LogStartOffset())
	for x.next < x.src.DurableEnd() {
		recs, _, next, err := x.src.ReadLog(x.next, 0, readChunk)
		if err != nil {
			if errcode.CodeOf(err) == errcode.OffsetOutOfRange.Name() {
				x.next = x.src.LogStartOffset()
				continue
			}
			return err
		}
		if next <= x.next {
			break
		}
		if err := x.applySet(recs); err != nil {
			return err
		}
		x.next = next
	}
	if x.seed {
		// After the rebuild's read of the log: a stream the log still
		// holds events of is the log's (a crash between writing the heads
		// file and deleting the segments leaves both).
		for k, h := range x.removed {
			if x.streams[k] == nil && h > 0 {
				x.streams[k] = &stream{first: h + 1}
			}
		}
		x.seed = false
	}
	return nil
}

// Retain is called before retention moves the log start to ls: it writes
// the heads file with the head of every stream that keeps no event at or
// above ls, so a restart after the deletion still knows those heads. An
// error keeps the segments (retention tries again on its next pass).
func (x *Index) Retain(ls uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.syncLocked(); err != nil {
		return err
	}
	if x.next < ls {
		return errcode.StorageUnavailable.New("the stream index has not read the log up to the new log start yet",
			"next", strconv.FormatUint(x.next, 10), "log_start", strconv.FormatUint(ls, 10))
	}
	heads := make(map[string]uint64, len(x.removed))
	for k, h := range x.removed {
		heads[k] = h
	}
	changed := false
	for k, s := range x.streams {
		n := len(s.offsets)
		if n > 0 && s.offsets[n-1] >= ls {
			// Its head stays in the log.
			if _, ok := heads[k]; ok {
				delete(heads, k)
				changed = true
			}
			continue
		}
		if h := s.head(); h > 0 && heads[k] != h {
			heads[k] = h
			changed = true
		}
	}
	if !changed || x.src.Dir() == "" {
		x.removed = heads
		return nil
	}
	if err := writeHeads(x.src.Dir(), heads); err != nil {
		return err
	}
	x.removed = heads
	x.headsSeq++
	return nil
}

// RemovedHeads returns the heads of the streams retention removed entirely
// (the heads file's set) with the id and sequence naming the set.
func (x *Index) RemovedHeads() (id, seq uint64, heads map[string]uint64, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.syncLocked(); err != nil {
		return 0, 0, nil, err
	}
	heads = make(map[string]uint64, len(x.removed))
	for k, h := range x.removed {
		heads[k] = h
	}
	return x.headsID, x.headsSeq, heads, nil
}

// MergeHeads adds a leader's removed heads (RemovedHeads) to this
// replica's: a follower whose log was skipped past the leader's log start
// never ran the retention that removed those streams, so without them it
// would restart their versions at 1 once it leads. A stream whose events
// the log holds keeps the log's head; the others take the higher head. The
// merged set is written to the heads file before it is used, so a restart
// keeps it.
func (x *Index) MergeHeads(heads map[string]uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.syncLocked(); err != nil {
		return err
	}
	merged := make(map[string]uint64, len(x.removed)+len(heads))
	for k, h := range x.removed {
		merged[k] = h
	}
	var added []string
	for k, h := range heads {
		if s := x.streams[k]; h == 0 || (s != nil && (len(s.offsets) > 0 || s.head() >= h)) || merged[k] >= h {
			continue
		}
		merged[k] = h
		added = append(added, k)
	}
	if len(added) == 0 {
		return nil
	}
	if x.src.Dir() != "" {
		if err := writeHeads(x.src.Dir(), merged); err != nil {
			return err
		}
	}
	x.removed = merged
	x.headsSeq++
	for _, k := range added {
		x.streams[k] = &stream{first: merged[k] + 1}
	}
	return nil
}

// cut forgets the offsets below the log start ls (retention removed those
// records): each stream then starts at its first retained version, and a
// stream with none left keeps its head.
func (x *Index) cut(ls uint64) {
	for _, s := range x.streams {
		i := sort.Search(len(s.offsets), func(i int) bool { return s.offsets[i] >= ls })
		if i > 0 {
			s.first += uint64(i)
			s.offsets = slices.Clone(s.offsets[i:])
		}
		if s.txn != "" && s.txnFirst < s.first {
			// Retention removed events of a transaction (only an
			// LSO-unaware retention could): an abort can take back only
			// what is left.
			s.txnFirst = s.first
		}
	}
	for k, st := range x.strays {
		if st.Offset < ls {
			delete(x.strays, k)
		}
	}
	x.start = ls
}

// applySet indexes every event of a record set read from the log.
func (x *Index) applySet(set []byte) error {
	for len(set) > 0 {
		rec, rest, ok, bad := record.Next(set)
		if bad {
			return errcode.StorageCorrupt.New("stored record set does not split into records")
		}
		if !ok {
			break
		}
		set = rest
		v, err := wire.ParseRecord(rec)
		if err != nil {
			return err
		}
		if m, ok := v.TransactionMarker(); ok {
			if id, _, _, ok := v.Producer(); ok {
				x.decide(string(id), string(m) == wire.TxnMarkerCommit, v.Offset())
			}
			continue
		}
		ver, hasVer := v.AggregateVersion()
		key, hasKey := v.Key()
		if hasVer && hasKey {
			x.apply(string(key), ver, v.Offset(), txnProducer(&v))
		}
	}
	return nil
}

// txnProducer returns the producer id of a record of an open transaction
// ("" for any other record). Only TxnAppend (through the transaction
// coordinator) stores such records: the gateway refuses them elsewhere.
func txnProducer(v *wire.RecordView) string {
	if st, ok := v.TransactionState(); !ok || string(st) != wire.TxnStateOpen {
		return ""
	}
	id, _, _, _ := v.Producer()
	return string(id)
}

// decide applies producer's transaction marker at offset off to the
// streams its transaction wrote: a commit makes the events ordinary once
// the high watermark passes the marker, an abort removes them, so the
// stream's head goes back and the next append reuses their versions.
func (x *Index) decide(producer string, commit bool, off uint64) {
	for _, key := range x.pending[producer] {
		s := x.streams[key]
		if s == nil || s.txn != producer || s.commitAt != 0 {
			continue
		}
		if commit {
			s.commitAt = off + 1
			continue
		}
		keep := int(s.txnFirst - s.first)
		if keep < 0 {
			keep = 0
		}
		if keep < len(s.offsets) {
			s.offsets = s.offsets[:keep:keep]
		}
		s.txn, s.txnFirst = "", 0
		if len(s.offsets) == 0 && s.first <= 1 {
			// The transaction created the stream: it is unknown again.
			delete(x.streams, key)
		}
	}
	delete(x.pending, producer)
}

// apply records version ver of key at offset off. Versions are dense by
// construction (every append is checked against the index under the append
// lock); a record that does not continue its stream — only a raw PUBLISH
// could write one — is not an event of it (the first such record is kept
// as the key's stray). The first version seen of a stream starts it: below
// it, retention removed the events.
//
// producer is the transactional producer id of an event of an open
// transaction, else "".
func (x *Index) apply(key string, ver, off uint64, producer string) {
	s := x.streams[key]
	switch {
	case ver == 0:
		return
	case s == nil:
		s = &stream{first: ver, offsets: []uint64{off}}
		x.streams[key] = s
	case ver == s.head()+1:
		s.offsets = append(s.offsets, off)
	default:
		if _, ok := x.strays[key]; !ok {
			x.strays[key] = Stray{Version: ver, Offset: off}
		}
		return
	}
	if s.txn != "" && (s.commitAt != 0 || s.txn != producer) {
		// A committed transaction's marker precedes this event in the
		// log, so its events are ordinary for every reader that sees
		// this one. (An undecided transaction of another producer is
		// never followed by an event: the append check refuses it.)
		s.txn, s.txnFirst, s.commitAt = "", 0, 0
	}
	if producer != "" && s.txn == "" {
		s.txn, s.txnFirst = producer, ver
		x.pending[producer] = append(x.pending[producer], key)
	}
}

// Sync brings the index up to the log's durable end.
func (x *Index) Sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.syncLocked()
}

// Head returns key's version counting every event the log holds, committed
// or not, after waiting for the log to be durable to its end. It is the
// APPEND_STREAM check and must run under the partition's append lock, so
// the log end cannot move meanwhile. producer is the transactional producer
// id of a TXN_APPEND_STREAM ("" for APPEND_STREAM): while another
// producer's transaction holds undecided events of the stream the answer is
// the retryable concurrent_transactions (reason aggregate_in_transaction),
// so an abort can never leave a gap under a later version.
func (x *Index) Head(ctx context.Context, key, producer string) (uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.syncLocked(); err != nil {
		return 0, err
	}
	if end := x.src.LogEndOffset(); x.next < end {
		// Records written but not synced yet (a replicated tail, a raw
		// publish): the index reads only durable data.
		if err := x.src.WaitDurable(ctx, end); err != nil {
			return 0, err
		}
		if err := x.syncLocked(); err != nil {
			return 0, err
		}
	}
	s := x.streams[key]
	if s == nil {
		return 0, nil
	}
	if s.txn != "" && s.commitAt == 0 && s.txn != producer {
		return 0, errcode.ConcurrentTransactions.New("an open transaction holds uncommitted versions of this aggregate; retry once it ends",
			"reason", "aggregate_in_transaction", "key", key, "current", strconv.FormatUint(s.txnFirst-1, 10))
	}
	return s.head(), nil
}

// Appended records an append made under the partition's append lock: key's
// version ver at offset off (producer: as for Head), when the index has
// seen the log up to it (it has, after Head; otherwise a later Sync reads
// it from the log).
func (x *Index) Appended(key string, ver, off uint64, producer string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.built && off == x.next && x.rewinds == x.src.Rewinds() {
		x.apply(key, ver, off, producer)
		x.next = off + 1
	}
}

// Position is where a stream stands in the log.
type Position struct {
	// Head is the version of the last committed event (below the high
	// watermark); 0 for an unknown stream.
	Head uint64
	// First is the first version the log still holds (retention removed
	// the ones below); Head + 1 when it holds none; 0 for an unknown
	// stream.
	First uint64
	// Offsets of versions First..Head.
	Offsets []uint64
	// Stray is the first record of the key below the high watermark that
	// does not continue the stream, if any.
	Stray *Stray
}

// Committed returns key's committed position: events below hwm.
func (x *Index) Committed(key string, hwm uint64) (Position, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.syncLocked(); err != nil {
		return Position{}, err
	}
	var pos Position
	if st, ok := x.strays[key]; ok && st.Offset < hwm {
		pos.Stray = &st
	}
	s := x.streams[key]
	if s == nil {
		return pos, nil
	}
	n := len(s.offsets)
	for n > 0 && s.offsets[n-1] >= hwm {
		n--
	}
	if s.txn != "" && (s.commitAt == 0 || s.commitAt > hwm) {
		// A transaction's events are committed once its commit marker is.
		n = min(n, max(int(s.txnFirst)-int(s.first), 0))
	}
	if s.first+uint64(n) <= 1 {
		// Only uncommitted events.
		return pos, nil
	}
	pos.Head, pos.First, pos.Offsets = s.first+uint64(n)-1, s.first, s.offsets[:n:n]
	return pos, nil
}

// OffsetOf returns the offset of version ver of key, committed or not.
func (x *Index) OffsetOf(key string, ver uint64) (uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.streams[key]
	if s == nil || ver < s.first || ver > s.head() {
		return 0, false
	}
	return s.offsets[ver-s.first], true
}

// Keys returns how many aggregates the index knows.
func (x *Index) Keys() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.streams)
}
