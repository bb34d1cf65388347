package eventsourcing

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"
)

// AGGREGATE_REPLAY_PROOF and AGGREGATE_EVENT_RANGE_READ (SERVICE-SPEC 4.8):
// partitiond's AggregateProof on the match's partition leader proves the
// range; here the answer becomes the proof JSON, and a failed proof the
// typed aggregate_proof_* error carrying the same JSON in field proof.

const (
	// rangeReadPage and rangeReadMaxPage are AGGREGATE_EVENT_RANGE_READ's
	// max_records default and cap (READ_STREAM_HISTORY's figures).
	rangeReadPage    = historyPage
	rangeReadMaxPage = historyMaxPage
)

var (
	matchIDParam      = param.Name{Key: "match_id", Missing: errcode.MissingParameter}
	fromSequenceParam = param.Name{Key: "from_sequence", Missing: errcode.MissingParameter}
	toSequenceParam   = param.Name{Key: "to_sequence", Missing: errcode.MissingParameter}
)

func newProofJSON(s *stream, pr *streamv1.AggregateProof, expected *uint64) wire.ReplayProof {
	j := wire.ReplayProof{Status: wire.ProofProven, Topic: s.name, MatchID: s.key, Partition: s.part,
		FirstSequence: pr.GetFirstSequence(), LastSequence: pr.GetLastSequence(), ExpectedLastSequence: expected,
		FirstOffset: pr.GetFirstOffset(), LastOffset: pr.GetLastOffset(), EventCount: pr.GetEventCount(),
		FirstEventID: pr.GetFirstEventId(), LastEventID: pr.GetLastEventId(), ProofHWM: pr.GetProofHwm(),
		LogStartOffset: pr.GetLogStartOffset(), HeadSequence: pr.GetHeadSequence(),
		FirstRetainedSequence: pr.GetFirstRetainedSequence(), LifecycleEpoch: pr.GetLifecycleEpoch(),
		Reason: pr.GetReason(), MissingFrom: pr.GetMissingFrom(), MissingTo: pr.GetMissingTo(),
		ConflictSequence: pr.GetConflictSequence(), ConflictEventID: pr.GetConflictEventId(),
		ConflictWithSequence: pr.GetConflictWithSequence()}
	if f := pr.GetFailure(); f != "" {
		j.Status = f
		if pr.GetConflictSequence() != 0 {
			off := pr.GetConflictOffset()
			j.ConflictOffset = &off
		}
	}
	return j
}

// proofFailure is one of the four failures partitiond's proof names, with
// what it means.
type proofFailure struct {
	code errcode.Code
	msg  string
}

// proofFailures maps the failure names of AggregateProof to the catalogue.
var proofFailures = map[string]proofFailure{
	errcode.AggregateProofRetentionGap.Name():     {errcode.AggregateProofRetentionGap, "retention removed sequences the proof needs"},
	errcode.AggregateProofSequenceGap.Name():      {errcode.AggregateProofSequenceGap, "the committed log does not hold exactly the sequences asked for"},
	errcode.AggregateProofIdentityConflict.Name(): {errcode.AggregateProofIdentityConflict, "an event's identity does not hold (event id, payload digest or a repeated sequence)"},
	errcode.AggregateProofUnavailable.Name():      {errcode.AggregateProofUnavailable, "no proof can be made for this match"},
}

// proofResult runs AggregateProof and returns the proof JSON, or the typed
// failure carrying it.
func (h *Handlers) proofResult(ctx context.Context, s *stream, req func(*metav1.Topic) *streamv1.AggregateProofRequest,
	expected *uint64) (*streamv1.AggregateProofResponse, []byte, error) {
	resp, err := toLeader(ctx, h.r, s, streamv1.StreamServiceClient.AggregateProof, req)
	if err != nil {
		return nil, nil, err
	}
	pr := resp.GetProof()
	b, err := json.Marshal(newProofJSON(s, pr, expected))
	if err != nil {
		return nil, nil, err
	}
	if f := pr.GetFailure(); f != "" {
		pf, ok := proofFailures[f]
		if !ok {
			return nil, nil, errcode.Internal.New("partitiond answered an unknown proof failure", "failure", param.Clip(f), "proof", string(b))
		}
		return nil, nil, pf.code.New(pf.msg, "topic", s.name, "match_id", s.key, "reason", pr.GetReason(), "proof", string(b))
	}
	return resp, b, nil
}

// resolveMatch places a match of an aggregate replay topic; a partition the
// client names must be the match's.
func (h *Handlers) resolveMatch(ctx context.Context, topic, matchID string, part int32, partGiven bool) (*stream, error) {
	s, err := h.resolve(ctx, topic, matchID)
	if err != nil {
		return nil, err
	}
	if !s.topic.GetConfig().GetAggregateReplay() {
		return nil, errcode.InvalidTopicPolicy.New("replay proofs need an aggregate replay topic (event_sourcing, aggregate_replay and idempotent)",
			"topic", topic, "reason", "aggregate_replay_required")
	}
	if partGiven && part != s.part {
		return nil, errcode.InvalidParameter.New("the match lives on another partition (FNV-1a of match_id)", "param", "partition",
			"value", strconv.Itoa(int(part)), "expected", strconv.Itoa(int(s.part)))
	}
	return s, nil
}

// aggregateReplayProof is AGGREGATE_REPLAY_PROOF: topic, match_id;
// partition and expected_last_sequence optional. `OK proof=<json>` when
// the committed retained log holds exactly sequences 1..last.
func (h *Handlers) aggregateReplayProof(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	topic, matchID := p.Required(param.Topic), p.Required(matchIDParam)
	part, partGiven := p.OptPartition()
	exp, expGiven := p.OptUint("expected_last_sequence", 0)
	if err := p.Err(); err != nil {
		return nil, err
	}
	if expGiven && exp == 0 {
		return nil, param.Invalid("expected_last_sequence", "0", "must be at least 1")
	}
	s, err := h.resolveMatch(ctx, topic, matchID, part, partGiven)
	if err != nil {
		return nil, err
	}
	var expected *uint64
	if expGiven {
		expected = &exp
	}
	_, b, err := h.proofResult(ctx, s, func(t *metav1.Topic) *streamv1.AggregateProofRequest {
		return &streamv1.AggregateProofRequest{Stream: s.ref(t), FromSequence: 1, ExpectedLastSequence: exp}
	}, expected)
	if err != nil {
		return nil, err
	}
	out := append(wire.AppendOK(c.Out), " proof="...)
	return append(out, b...), nil
}

// rangeEnvelope is AGGREGATE_EVENT_RANGE_READ's first frame; the proof
// covers the events of the batch frame.
type rangeEnvelope struct {
	Status       string          `json:"status"`
	Topic        string          `json:"topic"`
	MatchID      string          `json:"match_id"`
	Partition    int32           `json:"partition"`
	Count        uint32          `json:"count"`
	NextSequence uint64          `json:"next_sequence"`
	HasMore      bool            `json:"has_more"`
	Proof        json.RawMessage `json:"proof"`
}

// aggregateEventRangeRead is AGGREGATE_EVENT_RANGE_READ: topic, match_id,
// from_sequence, to_sequence; max_records (default 256, at most 1,024)
// and partition optional. Two frames: the envelope with the proof of the
// returned events, then the batch of the raw events in sequence order. A
// failure (a proof failure included) is one JSON ERROR frame. No group
// offset is read or written: this is partitiond's log alone.
func (h *Handlers) aggregateEventRangeRead(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	topic, matchID := p.Required(param.Topic), p.Required(matchIDParam)
	from, to := p.RequiredUint(fromSequenceParam), p.RequiredUint(toSequenceParam)
	limit := p.OptInt("max_records", rangeReadPage, 1, rangeReadMaxPage)
	part, partGiven := p.OptPartition()
	if err := p.Err(); err != nil {
		return command.JSONError(c.Out, err)
	}
	switch {
	case from == 0:
		return command.JSONError(c.Out, param.Invalid("from_sequence", "0", "must be at least 1"))
	case to < from:
		return command.JSONError(c.Out, param.Invalid("to_sequence", strconv.FormatUint(to, 10), "must not be below from_sequence"))
	}
	s, err := h.resolveMatch(ctx, topic, matchID, part, partGiven)
	if err != nil {
		return command.JSONError(c.Out, err)
	}
	resp, b, err := h.proofResult(ctx, s, func(t *metav1.Topic) *streamv1.AggregateProofRequest {
		return &streamv1.AggregateProofRequest{Stream: s.ref(t), FromSequence: from, ToSequence: to, WithEvents: true, MaxRecords: uint32(limit)}
	}, nil)
	if err != nil {
		return command.JSONError(c.Out, err)
	}
	env := rangeEnvelope{Status: "OK", Topic: topic, MatchID: matchID, Partition: s.part, Count: resp.GetCount(),
		NextSequence: resp.GetNextSequence(), HasMore: resp.GetHasMore(), Proof: b}
	return command.TwoFrames(c, env, s.name, s.part, resp.GetRecords())
}
