package wire

// ReplayProof is the proof document of AGGREGATE_REPLAY_PROOF and
// AGGREGATE_EVENT_RANGE_READ (field proof=, and the diagnostic proof= of an
// aggregate_proof_* failure): Status "proven" (ProofProven) or the
// failure's code, what was proven against which high watermark, and for a
// failure where it broke. The gateway writes it and the client reads it,
// so the shape lives here once.
type ReplayProof struct {
	Status                string  `json:"status"`
	Topic                 string  `json:"topic"`
	MatchID               string  `json:"match_id"`
	Partition             int32   `json:"partition"`
	FirstSequence         uint64  `json:"first_sequence"`
	LastSequence          uint64  `json:"last_sequence"`
	ExpectedLastSequence  *uint64 `json:"expected_last_sequence,omitempty"`
	FirstOffset           uint64  `json:"first_offset"`
	LastOffset            uint64  `json:"last_offset"`
	EventCount            uint64  `json:"event_count"`
	FirstEventID          string  `json:"first_event_id"`
	LastEventID           string  `json:"last_event_id"`
	ProofHWM              uint64  `json:"proof_hwm"`
	LogStartOffset        uint64  `json:"log_start_offset"`
	HeadSequence          uint64  `json:"head_sequence"`
	FirstRetainedSequence uint64  `json:"first_retained_sequence"`
	LifecycleEpoch        uint64  `json:"lifecycle_epoch"`
	Reason                string  `json:"reason,omitempty"`
	MissingFrom           uint64  `json:"missing_from,omitempty"`
	MissingTo             uint64  `json:"missing_to,omitempty"`
	ConflictSequence      uint64  `json:"conflict_sequence,omitempty"`
	ConflictOffset        *uint64 `json:"conflict_offset,omitempty"`
	ConflictEventID       string  `json:"conflict_event_id,omitempty"`
	ConflictWithSequence  uint64  `json:"conflict_with_sequence,omitempty"`
}

// ProofProven is the Status of a proof that holds.
const ProofProven = "proven"
