package partitiond

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"iter"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/streams"
)

// Aggregate replay proofs (SERVICE-SPEC 4.8, AGGREGATE_REPLAY_PROOF and
// AGGREGATE_EVENT_RANGE_READ): the leader proves that the committed
// retained log holds exactly the sequences (aggregate versions) of a match
// in a range, each event with its own event id and a payload matching its
// stored SHA-256 digest. A failure is an answer, not an error: the proof
// message then says which of the four aggregate_proof_* failures it is and
// where, and the gateway turns it into the typed error carrying the
// diagnostic JSON (docs/event-sourcing.md).

const (
	// proofChunkRecords bounds the events one read of a proof verifies.
	proofChunkRecords = 4096
	// proofMaxRecords caps the events one AGGREGATE_EVENT_RANGE_READ
	// returns (the gateway's max_records cap).
	proofMaxRecords = 1024
)

// Proof failure reasons (the proof JSON's reason).
const (
	reasonUnknownMatch     = "unknown_match"
	reasonRetentionRemoved = "retention_removed"
	reasonMissingBefore    = "missing_before_first_retained"
	reasonMissingAfterHead = "missing_after_head"
	reasonBeyondExpected   = "events_after_expected"
	reasonStrayEvent       = "out_of_sequence_event"
	reasonDuplicateVersion = "duplicate_sequence"
	reasonMissingEventID   = "missing_event_id"
	reasonMissingDigest    = "missing_payload_digest"
	reasonDigestMismatch   = "payload_digest_mismatch"
	reasonDuplicateEventID = "duplicate_event_id"
	reasonReadFailed       = "read_failed"
)

// AggregateProof proves a range of a match's sequences, and returns the
// events of the range when asked.
func (s *streamService) AggregateProof(ctx context.Context, req *streamv1.AggregateProofRequest) (*streamv1.AggregateProofResponse, error) {
	ref := req.GetStream()
	rt, sp, err := s.r.streamLead(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !rt.topic.GetConfig().GetAggregateReplay() {
		return nil, errcode.InvalidTopicPolicy.New("replay proofs need an aggregate replay topic (event_sourcing, aggregate_replay and idempotent)",
			"topic", ref.GetTopic(), "reason", "aggregate_replay_required")
	}
	from, to := req.GetFromSequence(), req.GetToSequence()
	if from == 0 {
		return nil, errcode.InvalidParameter.New("from_sequence must be at least 1", "param", "from_sequence", "value", "0")
	}
	if to != 0 && to < from {
		return nil, errcode.InvalidParameter.New("to_sequence must not be below from_sequence", "param", "to_sequence", "value", utoa(to))
	}
	// The high watermark is read once: the proof is about the records
	// below it (proof_hwm), whatever is appended meanwhile.
	hwm := rt.part.HighWatermark()
	pos, err := sp.idx.Committed(ref.GetKey(), hwm)
	if err != nil {
		return nil, err
	}
	pr := &streamv1.AggregateProof{ProofHwm: hwm, LogStartOffset: rt.part.LogStartOffset(), HeadSequence: pos.Head,
		LifecycleEpoch: rt.part.LifecycleEpoch()}
	if len(pos.Offsets) > 0 {
		pr.FirstRetainedSequence = pos.First
	}
	resp := &streamv1.AggregateProofResponse{Proof: pr}
	defer func() {
		result := pr.GetFailure()
		if result == "" {
			result = "proven"
		}
		s.r.m.streamProofs.WithLabelValues(result).Inc()
	}()
	if to == 0 {
		to = pos.Head
	}
	pr.FirstSequence, pr.LastSequence = from, to
	if bad := checkBounds(pr, pos, from, to, req.GetExpectedLastSequence(), req.GetWithEvents()); bad {
		return resp, nil
	}
	last := to
	maxRecords := 0
	if req.GetWithEvents() {
		maxRecords = int(req.GetMaxRecords())
		if maxRecords <= 0 || maxRecords > proofMaxRecords {
			maxRecords = proofMaxRecords
		}
		last = min(to, from+uint64(maxRecords)-1)
	}
	recs, next, err := verifyEvents(rt.part, ref.GetKey(), pos, pr, from, last, req.GetWithEvents())
	if err != nil {
		return nil, err
	}
	if pr.GetFailure() != "" {
		return resp, nil
	}
	pr.LastSequence = next - 1
	pr.EventCount = pr.LastSequence - from + 1
	pr.FirstOffset, pr.LastOffset = pos.Offsets[from-pos.First], pos.Offsets[pr.LastSequence-pos.First]
	if req.GetWithEvents() {
		resp.Records, resp.Count = recs, uint32(pr.EventCount)
		resp.NextSequence, resp.HasMore = next, next <= to
	}
	return resp, nil
}

// fail marks pr as the failure code for reason.
func fail(pr *streamv1.AggregateProof, code errcode.Code, reason string) {
	pr.Failure, pr.Reason = code.Name(), reason
}

// checkBounds checks, from the index alone, that sequences from..to are
// all retained, that the match has no stray record in the way, and (a full
// replay proof) that its head is the expected last sequence. It marks pr
// failed and reports true when they are not.
func checkBounds(pr *streamv1.AggregateProof, pos streams.Position, from, to, expected uint64, rangeRead bool) bool {
	gap := func(code errcode.Code, reason string, lo, hi uint64) bool {
		fail(pr, code, reason)
		pr.MissingFrom, pr.MissingTo = lo, hi
		return true
	}
	if pos.Head == 0 {
		fail(pr, errcode.AggregateProofUnavailable, reasonUnknownMatch)
		return true
	}
	if !rangeRead && expected != 0 && expected != pos.Head {
		if expected > pos.Head {
			return gap(errcode.AggregateProofSequenceGap, reasonMissingAfterHead, pos.Head+1, expected)
		}
		fail(pr, errcode.AggregateProofSequenceGap, reasonBeyondExpected)
		return true
	}
	if to > pos.Head {
		return gap(errcode.AggregateProofSequenceGap, reasonMissingAfterHead, pos.Head+1, to)
	}
	if first := pos.First; from < first || len(pos.Offsets) == 0 {
		// Below the first retained event: removed by retention when the
		// log start moved; otherwise the sequences never were in the log.
		if pr.GetLogStartOffset() > 0 {
			return gap(errcode.AggregateProofRetentionGap, reasonRetentionRemoved, from, min(first-1, to))
		}
		return gap(errcode.AggregateProofSequenceGap, reasonMissingBefore, from, min(first-1, to))
	}
	if st := pos.Stray; st != nil && (!rangeRead || (st.Version >= from && st.Version <= to)) {
		pr.ConflictSequence, pr.ConflictOffset = st.Version, st.Offset
		if st.Version > pos.Head {
			return gap(errcode.AggregateProofSequenceGap, reasonStrayEvent, pos.Head+1, st.Version-1)
		}
		fail(pr, errcode.AggregateProofIdentityConflict, reasonDuplicateVersion)
		return true
	}
	return false
}

// verifyEvents reads the events from..last and checks each one's identity:
// an event id, a payload digest equal to the payload's SHA-256, and an
// event id no other event of the range carries. With keep it returns them
// as a record set. It returns the sequence after the last one verified
// (fewer than asked only when keep met the byte bound); a failure marks pr.
//
// Event ids must be unique in the whole retained match, not only among the
// events verified: a range read's page proves its events against every
// other retained event of the match (spec 4.8: the proof is about the
// committed retained log of the match), so the events before from and
// after the last one verified are read for their ids too. A repeat is
// reported at the later sequence, with the earlier one as
// conflict_with_sequence. (A range read therefore reads the whole match.)
func verifyEvents(p *partition.Partition, key string, pos streams.Position, pr *streamv1.AggregateProof, from, last uint64, keep bool) ([]byte, uint64, error) {
	ids := map[string]uint64{}
	// The events before the range: their ids, first sequence of each.
	ok, err := eachEvent(p, key, pos, pr, pos.First, from-1, func(seq uint64, v *wire.RecordView) bool {
		if id := eventID(v); id != "" {
			if _, seen := ids[id]; !seen {
				ids[id] = seq
			}
		}
		return true
	})
	if !ok || err != nil {
		return nil, from, err
	}
	out, next, err := verifyRange(p, key, pos, pr, from, last, keep, ids)
	if err != nil || pr.GetFailure() != "" {
		return nil, next, err
	}
	// The events after the ones verified must not repeat their ids.
	ok, err = eachEvent(p, key, pos, pr, next, pos.Head, func(seq uint64, v *wire.RecordView) bool {
		if other, dup := ids[eventID(v)]; dup && other >= from && other < next {
			fail(pr, errcode.AggregateProofIdentityConflict, reasonDuplicateEventID)
			pr.ConflictSequence, pr.ConflictOffset, pr.ConflictEventId = seq, v.Offset(), eventID(v)
			pr.ConflictWithSequence = other
			return false
		}
		return true
	})
	if !ok || err != nil {
		return nil, next, err
	}
	return out, next, nil
}

// eachEvent calls fn with the events lo..hi of key in sequence order until
// it returns false (then eachEvent reports false). An event the index
// names that cannot be read marks pr read_failed and reports false.
func eachEvent(p *partition.Partition, key string, pos streams.Position, pr *streamv1.AggregateProof, lo, hi uint64, fn func(seq uint64, v *wire.RecordView) bool) (bool, error) {
	if lo > hi || hi > pos.Head {
		return true, nil
	}
	upTo := streams.Position{Head: hi, First: pos.First, Offsets: pos.Offsets[:hi-pos.First+1]}
	want := lo
	for want <= hi {
		recs, n, _, err := readEvents(p, key, upTo, want, proofChunkRecords, readStreamMaxBytes)
		if err != nil || n == 0 {
			fail(pr, errcode.AggregateProofUnavailable, reasonReadFailed)
			pr.MissingFrom = want
			return false, nil
		}
		for v, err := range parsedRecords(recs) {
			if err != nil {
				return false, err
			}
			if !fn(want, v) {
				return false, nil
			}
			want++
		}
	}
	return true, nil
}

// verifyRange verifies the events from..last (ids holds the event ids of
// the events before from).
func verifyRange(p *partition.Partition, key string, pos streams.Position, pr *streamv1.AggregateProof, from, last uint64, keep bool, ids map[string]uint64) ([]byte, uint64, error) {
	// The position cut at last, so reads stop there.
	upTo := streams.Position{Head: last, First: pos.First, Offsets: pos.Offsets[:last-pos.First+1]}
	var out []byte
	want := from
	for want <= last {
		maxBytes := readStreamMaxBytes
		if keep {
			maxBytes -= len(out)
		}
		if keep && len(out) > 0 && maxBytes <= 0 {
			break
		}
		recs, n, next, err := readEvents(p, key, upTo, want, proofChunkRecords, max(maxBytes, 1))
		if err != nil || n == 0 {
			// The index points at records the log no longer serves:
			// retention moved the log start meanwhile, or the storage
			// failed. No proof either way.
			fail(pr, errcode.AggregateProofUnavailable, reasonReadFailed)
			pr.MissingFrom = want
			return nil, want, nil
		}
		for v, err := range parsedRecords(recs) {
			if err != nil {
				return nil, want, err
			}
			if !checkIdentity(pr, v, want, ids) {
				return nil, want, nil
			}
			if want == from {
				pr.FirstEventId = eventID(v)
			}
			pr.LastEventId = eventID(v)
			want++
		}
		if keep {
			out = append(out, recs...)
		}
		if next != want {
			return nil, want, errcode.Internal.New("replay proof read out of step", "sequence", utoa(want))
		}
	}
	return out, want, nil
}

// checkIdentity checks the event of sequence seq; ids maps the event ids
// seen so far to their sequences.
func checkIdentity(pr *streamv1.AggregateProof, v *wire.RecordView, seq uint64, ids map[string]uint64) bool {
	conflict := func(reason string) bool {
		fail(pr, errcode.AggregateProofIdentityConflict, reason)
		pr.ConflictSequence, pr.ConflictOffset = seq, v.Offset()
		pr.ConflictEventId = eventID(v)
		return false
	}
	id := eventID(v)
	if id == "" {
		return conflict(reasonMissingEventID)
	}
	digest, ok := v.PayloadDigest()
	if !ok || len(digest) == 0 {
		return conflict(reasonMissingDigest)
	}
	sum := sha256.Sum256(v.Payload())
	if hex.EncodeToString(sum[:]) != string(digest) {
		return conflict(reasonDigestMismatch)
	}
	if other, dup := ids[id]; dup {
		pr.ConflictWithSequence = other
		return conflict(reasonDuplicateEventID)
	}
	ids[id] = seq
	return true
}

func eventID(v *wire.RecordView) string {
	id, _ := v.EventID()
	return string(id)
}

// parsedRecords yields the records of a record set read from this node's
// log, parsed; it stops at the set's end or where it does not split, and a
// record that does not parse comes with its error.
func parsedRecords(set []byte) iter.Seq2[*wire.RecordView, error] {
	return func(yield func(*wire.RecordView, error) bool) {
		for len(set) > 0 {
			rec, rest, ok, _ := record.Next(set)
			if !ok {
				return
			}
			set = rest
			v, err := wire.ParseRecord(rec)
			if !yield(&v, err) {
				return
			}
		}
	}
}
