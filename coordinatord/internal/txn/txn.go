// Package txn is the transaction coordinator's state machine for one
// transactional_id (SERVICE-SPEC 3.2, 4.7; docs/transactions.md): the
// producer session (stable producerId, epoch raised on every
// INIT_PRODUCER_ID) and its transaction (open → prepare_commit/prepare_abort
// → committed/aborted, participants, staged offsets, message count,
// deadline).
//
// The machine is pure: every method checks a command against the current
// state and, when accepted, returns the next state without changing the
// receiver. The caller makes the next state durable (Encode, a record of
// the replicated transaction log) before it answers or acts on it, and
// only then installs it: "every accepted transition is durable before the
// answer". Side effects the next state asks for (adding a partition to the
// transaction, writing markers) are the caller's; the prepare states stay
// until the caller reports the markers written (Complete).
package txn

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

// State is a transaction state. Empty is a session that never began a
// transaction in its current epoch's predecessor chain (fresh, or expired).
type State string

// States (spec 3.2). Prepare states are the durable decision: once in
// prepare_commit the transaction commits, whatever happens to this
// coordinator.
const (
	Empty         State = "empty"
	Open          State = "open"
	PrepareCommit State = "prepare_commit"
	PrepareAbort  State = "prepare_abort"
	Committed     State = "committed"
	Aborted       State = "aborted"
)

// Status is the state as TXN_STATUS reports it (WIRE-V2: open, committing,
// committed, aborted). prepare_abort reports aborted: its outcome is fixed.
func (s State) Status() string {
	switch s {
	case PrepareCommit:
		return "committing"
	case PrepareAbort:
		return "aborted"
	}
	return string(s)
}

// Active says whether the transaction holds participants open (open or
// preparing): what the oldest-active-transaction metric and `strata txn
// list` count.
func (s State) Active() bool { return s == Open || s == PrepareCommit || s == PrepareAbort }

// TP is a topic partition.
type TP struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TP) less(o TP) int {
	if tp.Topic != o.Topic {
		if tp.Topic < o.Topic {
			return -1
		}
		return 1
	}
	return int(tp.Partition) - int(o.Partition)
}

// Session is the consumer-group session staged offsets belong to
// (SEND_OFFSETS_TO_TXN: one session per transaction).
type Session struct {
	Group             string `json:"group"`
	Member            string `json:"member"`
	Generation        uint64 `json:"generation"`
	RegistrationEpoch uint64 `json:"registration_epoch"`
}

// StagedOffset is one staged committed offset.
type StagedOffset struct {
	TP
	Next uint64 `json:"next"`
}

// Txn is the state of one transactional_id.
type Txn struct {
	ID         string `json:"id"`
	ProducerID string `json:"producer_id"`
	// Epoch is the session's current producer epoch; older ones are fenced.
	Epoch int64 `json:"epoch"`
	// TxnEpoch is the epoch the current (or last) transaction runs under:
	// equal to Epoch once BEGIN_TXN used the epoch, lower while a re-init
	// aborts the previous epoch's open work. Markers carry TxnEpoch.
	TxnEpoch int64 `json:"txn_epoch"`
	State    State `json:"state"`
	// Participants are the partitions the transaction wrote or staged
	// offsets on (the offsets partition included), sorted.
	Participants []TP `json:"participants,omitempty"`
	// Offsets are the staged offsets, sorted by partition; Session is the
	// group session they belong to.
	Offsets  []StagedOffset `json:"offsets,omitempty"`
	Session  *Session       `json:"session,omitempty"`
	Messages uint64         `json:"messages"`
	// StartMs is when the transaction began, DeadlineMs when the timeout
	// aborts it (open only); UpdatedMs the last accepted transition.
	StartMs    int64 `json:"start_ms,omitempty"`
	DeadlineMs int64 `json:"deadline_ms,omitempty"`
	UpdatedMs  int64 `json:"updated_ms"`
	// Expired: completed long ago; participants and offsets were dropped
	// and only the identity and epoch remain (a tombstone).
	Expired bool `json:"expired,omitempty"`
}

func (t *Txn) clone() *Txn {
	c := *t
	c.Participants = slices.Clone(t.Participants)
	c.Offsets = slices.Clone(t.Offsets)
	if t.Session != nil {
		s := *t.Session
		c.Session = &s
	}
	return &c
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// epochMax bounds producer epochs to int32 (Java SDKs reject larger ones,
// WIRE-V2 7.2); past it a session gets a new producerId at epoch 1.
const epochMax = math.MaxInt32

// Init is INIT_PRODUCER_ID. For a new transactional_id (t == nil) it starts
// a session with producerId newID() at epoch 1. Otherwise the epoch is
// raised, fencing every older one; an open transaction of the previous
// epoch moves to prepare_abort (its markers carry the old epoch and are the
// caller's to write). It is refused while a commit is being prepared, and
// while an earlier abort is still writing its markers
// (concurrent_transactions, retryable).
func Init(t *Txn, id string, now time.Time, newID func() string) (*Txn, error) {
	ms := now.UnixMilli()
	if t == nil {
		return &Txn{ID: id, ProducerID: newID(), Epoch: 1, State: Empty, UpdatedMs: ms}, nil
	}
	switch t.State {
	case PrepareCommit:
		return nil, errcode.ConcurrentTransactions.New("a commit of this transactional_id is being completed; retry",
			"transactional_id", t.ID, "state", string(t.State))
	case PrepareAbort:
		return nil, errcode.ConcurrentTransactions.New("an abort of this transactional_id is being completed; retry",
			"transactional_id", t.ID, "state", string(t.State))
	}
	n := t.clone()
	n.UpdatedMs = ms
	n.Expired = false
	if t.State == Open {
		n.State = PrepareAbort
		n.DeadlineMs = 0
	}
	if t.Epoch >= epochMax {
		if t.State == Open {
			// The old epoch's abort must finish under the old producerId
			// first; the next Init rolls the id over.
			n.Epoch = t.Epoch
			return n, nil
		}
		n.ProducerID, n.Epoch, n.TxnEpoch = newID(), 1, 0
		n.State, n.Participants, n.Offsets, n.Session, n.Messages = Empty, nil, nil, nil, 0
		return n, nil
	}
	n.Epoch = t.Epoch + 1
	return n, nil
}

// checkSession refuses another producerId and an older or unknown epoch.
// A lower epoch is fenced (stale_producer_epoch for writes, producer_fenced
// for END_TXN per spec 4.7).
func (t *Txn) checkSession(producerID string, epoch int64, endTxn bool) error {
	if producerID != t.ProducerID {
		return errcode.ProducerFenced.New("producerId does not match the transactional_id's session",
			"transactional_id", t.ID, "producer", producerID, "current", t.ProducerID)
	}
	switch {
	case epoch < t.Epoch && endTxn:
		return errcode.ProducerFenced.New("a newer producer epoch fenced this one",
			"transactional_id", t.ID, "current", i64(t.Epoch), "got", i64(epoch))
	case epoch < t.Epoch:
		return errcode.StaleProducerEpoch.New("a newer producer epoch fenced this one",
			"producer", producerID, "current", i64(t.Epoch), "got", i64(epoch))
	case epoch > t.Epoch:
		return errcode.ProducerFenced.New("producer epoch was never issued by INIT_PRODUCER_ID",
			"transactional_id", t.ID, "current", i64(t.Epoch), "got", i64(epoch))
	}
	return nil
}

// used says whether the current epoch already ran a transaction.
func (t *Txn) used() bool { return t.TxnEpoch == t.Epoch && t.State != Empty }

// Begin is BEGIN_TXN: the initialized epoch opens its transaction, with a
// deadline timeout from now. A repeat while open is answered again
// (idempotent); an epoch that already completed (or is completing) a
// transaction needs a new INIT_PRODUCER_ID (producer_reinitialization_required).
func (t *Txn) Begin(producerID string, epoch int64, now time.Time, timeout time.Duration) (*Txn, error) {
	if err := t.checkSession(producerID, epoch, false); err != nil {
		return nil, err
	}
	if t.State == PrepareAbort && t.TxnEpoch < t.Epoch {
		return nil, errcode.ConcurrentTransactions.New("the previous epoch's transaction is still being aborted; retry",
			"transactional_id", t.ID)
	}
	if t.used() {
		if t.State == Open {
			return t, nil
		}
		return nil, errcode.ProducerReinitializationRequired.New("this producer epoch already completed a transaction; INIT_PRODUCER_ID first",
			"transactional_id", t.ID, "epoch", i64(epoch))
	}
	n := t.clone()
	ms := now.UnixMilli()
	n.TxnEpoch, n.State = t.Epoch, Open
	n.Participants, n.Offsets, n.Session, n.Messages = nil, nil, nil, 0
	n.StartMs, n.DeadlineMs, n.UpdatedMs = ms, ms+timeout.Milliseconds(), ms
	return n, nil
}

// notOpen explains why a write or END_TXN finds no open transaction.
func (t *Txn) notOpen() error {
	if !t.used() {
		return errcode.TransactionNotFound.New("no transaction is open in this producer epoch; BEGIN_TXN first", "transactional_id", t.ID)
	}
	switch t.State {
	case Committed, PrepareCommit:
		return errcode.TransactionAlreadyCommitted.New("the transaction is committed", "transactional_id", t.ID)
	}
	return errcode.TransactionAborted.New("the transaction was aborted", "transactional_id", t.ID, "state", string(t.State))
}

func (t *Txn) checkOpen(producerID string, epoch int64) error {
	if err := t.checkSession(producerID, epoch, false); err != nil {
		return err
	}
	if !t.used() || t.State != Open {
		return t.notOpen()
	}
	return nil
}

// HasParticipant says whether tp is already in the transaction.
func (t *Txn) HasParticipant(tp TP) bool {
	_, ok := slices.BinarySearchFunc(t.Participants, tp, TP.less)
	return ok
}

// CheckPublish checks a TXN_PUBLISH (seqNum > 0, an open transaction of the
// session's epoch). When tp is not yet a participant, AddParticipant gives
// the state to make durable before the first write to it.
func (t *Txn) CheckPublish(producerID string, epoch int64, seq uint64) error {
	if seq == 0 {
		return errcode.InvalidParameter.New("TXN_PUBLISH needs seqNum above 0", "param", "seqNum")
	}
	return t.checkOpen(producerID, epoch)
}

// AddParticipant returns the state with tp among the participants (t
// itself when it already is).
func (t *Txn) AddParticipant(producerID string, epoch int64, tp TP, now time.Time) (*Txn, error) {
	if err := t.checkOpen(producerID, epoch); err != nil {
		return nil, err
	}
	i, ok := slices.BinarySearchFunc(t.Participants, tp, TP.less)
	if ok {
		return t, nil
	}
	n := t.clone()
	n.Participants = slices.Insert(n.Participants, i, tp)
	n.UpdatedMs = now.UnixMilli()
	return n, nil
}

// Published counts appended messages (not durable on its own: the count
// is made durable with the next transition; after a coordinator change it
// may undercount messages appended since, which only TXN_STATUS reports).
func (t *Txn) Published(n uint64) { t.Messages += n }

// StageOffsets is SEND_OFFSETS_TO_TXN after the group coordinator checked
// member, generation, lifecycle epoch and ownership: the offsets must all
// belong to the transaction's one group session, and a partition staged
// again may keep or raise its value (offset_regression otherwise). The
// offsets are committed through the group's coordinator once the commit is
// decided (docs/transactions.md), so the offsets partition is not a marker
// participant.
func (t *Txn) StageOffsets(producerID string, epoch int64, s Session, offs []StagedOffset, now time.Time) (*Txn, error) {
	if err := t.checkOpen(producerID, epoch); err != nil {
		return nil, err
	}
	if len(offs) == 0 {
		return nil, errcode.MissingParameter.New("SEND_OFFSETS_TO_TXN without offsets", "param", "offsets")
	}
	if t.Session != nil && *t.Session != s {
		return nil, errcode.GenMismatch.New("staged offsets of one transaction must belong to one group session",
			"transactional_id", t.ID, "group", t.Session.Group, "member", t.Session.Member,
			"generation", strconv.FormatUint(t.Session.Generation, 10), "got_group", s.Group, "got_member", s.Member,
			"got_generation", strconv.FormatUint(s.Generation, 10))
	}
	n := t.clone()
	n.Session = &s
	for _, o := range offs {
		i, ok := slices.BinarySearchFunc(n.Offsets, o.TP, func(a StagedOffset, b TP) int { return a.TP.less(b) })
		if ok {
			if o.Next < n.Offsets[i].Next {
				return nil, errcode.OffsetRegression.New("a staged offset may only keep or raise its value",
					"topic", o.Topic, "partition", strconv.Itoa(int(o.Partition)),
					"staged", strconv.FormatUint(n.Offsets[i].Next, 10), "got", strconv.FormatUint(o.Next, 10))
			}
			n.Offsets[i].Next = o.Next
			continue
		}
		n.Offsets = slices.Insert(n.Offsets, i, o)
	}
	n.UpdatedMs = now.UnixMilli()
	return n, nil
}

// End is END_TXN. From open it moves to prepare_commit or prepare_abort
// (the durable decision; the caller then writes the markers and calls
// Complete). A repeat of the same result is idempotent (in prepare: the
// caller resumes the markers; completed: answered again); commit after
// abort and abort after commit are errors, and so is an abort during
// prepare_commit (transaction_not_abortable: the commit must be retried).
// A lower epoch is fenced (producer_fenced).
func (t *Txn) End(producerID string, epoch int64, commit bool, now time.Time) (*Txn, error) {
	if err := t.checkSession(producerID, epoch, true); err != nil {
		return nil, err
	}
	if !t.used() {
		return nil, t.notOpen()
	}
	switch t.State {
	case Open:
		n := t.clone()
		n.State, n.DeadlineMs, n.UpdatedMs = PrepareAbort, 0, now.UnixMilli()
		if commit {
			n.State = PrepareCommit
		}
		return n, nil
	case PrepareCommit, Committed:
		if commit {
			return t, nil
		}
		if t.State == PrepareCommit {
			return nil, errcode.TransactionNotAbortable.New("the commit is being completed and cannot be aborted; retry the commit",
				"transactional_id", t.ID)
		}
		return nil, errcode.TransactionAlreadyCommitted.New("the transaction is committed; it cannot be aborted", "transactional_id", t.ID)
	default: // PrepareAbort, Aborted
		if !commit {
			return t, nil
		}
		return nil, errcode.TransactionAborted.New("the transaction was aborted; it cannot be committed", "transactional_id", t.ID)
	}
}

// Complete moves a prepared transaction to its outcome once every
// participant holds its marker. Anything else is returned unchanged.
func (t *Txn) Complete(now time.Time) *Txn {
	if t.State != PrepareCommit && t.State != PrepareAbort {
		return t
	}
	n := t.clone()
	n.State = Committed
	if t.State == PrepareAbort {
		n.State = Aborted
	}
	n.UpdatedMs = now.UnixMilli()
	return n
}

// TimedOut returns the prepare_abort state of an open transaction past its
// deadline (transaction_timeout_ms), or nil.
func (t *Txn) TimedOut(now time.Time) *Txn {
	if t.State != Open || t.DeadlineMs == 0 || now.UnixMilli() < t.DeadlineMs {
		return nil
	}
	n := t.clone()
	n.State, n.DeadlineMs, n.UpdatedMs = PrepareAbort, 0, now.UnixMilli()
	return n
}

// ForceAbort returns the prepare_abort state of an open transaction
// whatever the session (nil when not open): an operator's `strata txn
// abort`, and a new coordinator aborting the open transactions it found
// (their publish bookkeeping died with the previous owner).
func (t *Txn) ForceAbort(now time.Time) *Txn {
	if t.State != Open {
		return nil
	}
	n := t.clone()
	n.State, n.DeadlineMs, n.UpdatedMs = PrepareAbort, 0, now.UnixMilli()
	return n
}

// Expire returns the tombstone of a completed (or never used) session idle
// for at least ttl (transactional_id_expiration_ms): identity and epoch
// kept, participants, offsets and counts dropped. nil when not due.
func (t *Txn) Expire(now time.Time, ttl time.Duration) *Txn {
	if t.Expired || t.State.Active() || now.UnixMilli()-t.UpdatedMs < ttl.Milliseconds() {
		return nil
	}
	return &Txn{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, TxnEpoch: t.TxnEpoch, State: t.State,
		UpdatedMs: now.UnixMilli(), Expired: true}
}

// MarkerEpoch is the producer epoch the markers of the current transaction
// carry.
func (t *Txn) MarkerEpoch() int64 { return t.TxnEpoch }

// OffsetsByTopic returns the staged offsets grouped by topic.
func (t *Txn) OffsetsByTopic() map[string][]StagedOffset {
	out := map[string][]StagedOffset{}
	for _, o := range t.Offsets {
		out[o.Topic] = append(out[o.Topic], o)
	}
	return out
}
