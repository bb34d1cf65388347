package partitiond

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"

	"github.com/strataio/strata/partitiond/internal/recordtest"
)

// replayEvent is an aggregate replay event record; digest "" means the
// payload's real SHA-256.
func replayEvent(t testing.TB, topic, key string, ver uint64, id, payload, digest string) []byte {
	t.Helper()
	if digest == "" {
		sum := sha256.Sum256([]byte(payload))
		digest = hex.EncodeToString(sum[:])
	}
	r := wire.Record{Topic: topic, Key: key, AggregateVersion: ver, SchemaVersion: 1, EventID: id, PayloadDigest: digest, Payload: []byte(payload)}
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendReplay(t testing.TB, sc streamv1.StreamServiceClient, topic, key string, ver uint64, id, payload, digest string) {
	t.Helper()
	_, err := sc.AppendStream(ctx(t), &streamv1.AppendStreamRequest{Stream: &streamv1.StreamRef{Topic: topic, Key: key},
		Version: ver, Record: replayEvent(t, topic, key, ver, id, payload, digest), AggregateReplay: true})
	if err != nil {
		t.Fatalf("append %s/%d: %v", key, ver, err)
	}
}

func prove(t testing.TB, sc streamv1.StreamServiceClient, req *streamv1.AggregateProofRequest) *streamv1.AggregateProofResponse {
	t.Helper()
	resp, err := sc.AggregateProof(ctx(t), req)
	if err != nil {
		t.Fatalf("proof %v: %v", req, err)
	}
	return resp
}

func proofReq(topic, key string, from, to, expected uint64) *streamv1.AggregateProofRequest {
	return &streamv1.AggregateProofRequest{Stream: &streamv1.StreamRef{Topic: topic, Key: key}, FromSequence: from,
		ToSequence: to, ExpectedLastSequence: expected}
}

// TestAggregateProof covers the proof and the range read on one leader:
// a proven match, each failure with its diagnostics, and range pages.
func TestAggregateProof(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	defer c.stop()
	tp := esTopic("matches")
	tp.Config.AggregateReplay = true
	c.metad.PutTopic(tp)
	c.metad.PutTopic(esTopic("plain-es"))
	c.waitServing(t, "matches", 0)
	c.waitServing(t, "plain-es", 0)
	sc := c.streams(t)

	for v := uint64(1); v <= 5; v++ {
		appendReplay(t, sc, "matches", "m1", v, fmt.Sprintf("ev-%d", v), fmt.Sprintf("move %d", v), "")
		// Another match interleaved.
		appendReplay(t, sc, "matches", "m2", v, fmt.Sprintf("other-%d", v), "x", "")
	}
	pr := prove(t, sc, proofReq("matches", "m1", 1, 0, 0)).GetProof()
	if pr.GetFailure() != "" || pr.GetFirstSequence() != 1 || pr.GetLastSequence() != 5 || pr.GetEventCount() != 5 ||
		pr.GetFirstEventId() != "ev-1" || pr.GetLastEventId() != "ev-5" || pr.GetFirstOffset() != 0 || pr.GetLastOffset() != 8 ||
		pr.GetProofHwm() != 10 || pr.GetHeadSequence() != 5 || pr.GetFirstRetainedSequence() != 1 {
		t.Fatalf("proof %v", pr)
	}
	if pr := prove(t, sc, proofReq("matches", "m1", 1, 0, 5)).GetProof(); pr.GetFailure() != "" {
		t.Fatalf("proof with the right expected last: %v", pr)
	}

	failure := func(name string, req *streamv1.AggregateProofRequest, code errcode.Code, reason string) *streamv1.AggregateProof {
		t.Helper()
		pr := prove(t, sc, req).GetProof()
		if pr.GetFailure() != code.Name() || pr.GetReason() != reason {
			t.Fatalf("%s: %v (want %s %s)", name, pr, code.Name(), reason)
		}
		return pr
	}
	if pr := failure("expected above the head", proofReq("matches", "m1", 1, 0, 7), errcode.AggregateProofSequenceGap, reasonMissingAfterHead); pr.GetMissingFrom() != 6 || pr.GetMissingTo() != 7 {
		t.Fatalf("missing range %v", pr)
	}
	failure("expected below the head", proofReq("matches", "m1", 1, 0, 3), errcode.AggregateProofSequenceGap, reasonBeyondExpected)
	failure("unknown match", proofReq("matches", "nobody", 1, 0, 0), errcode.AggregateProofUnavailable, reasonUnknownMatch)
	failure("range past the head", &streamv1.AggregateProofRequest{Stream: &streamv1.StreamRef{Topic: "matches", Key: "m1"},
		FromSequence: 4, ToSequence: 9, WithEvents: true}, errcode.AggregateProofSequenceGap, reasonMissingAfterHead)

	// Range read: pages of the proven events.
	rr := prove(t, sc, &streamv1.AggregateProofRequest{Stream: &streamv1.StreamRef{Topic: "matches", Key: "m1"},
		FromSequence: 2, ToSequence: 4, WithEvents: true, MaxRecords: 2})
	recs := recordtest.Records(t, rr.GetRecords())
	if rr.GetProof().GetFailure() != "" || rr.GetCount() != 2 || len(recs) != 2 || rr.GetNextSequence() != 4 || !rr.GetHasMore() ||
		rr.GetProof().GetFirstSequence() != 2 || rr.GetProof().GetLastSequence() != 3 || rr.GetProof().GetEventCount() != 2 {
		t.Fatalf("range page 1: %v (%d records)", rr, len(recs))
	}
	for i, v := range recs {
		if ver, _ := v.AggregateVersion(); ver != uint64(2+i) || v.KeyString() != "m1" {
			t.Fatalf("range record %d: version %d key %s", i, ver, v.KeyString())
		}
	}
	rr = prove(t, sc, &streamv1.AggregateProofRequest{Stream: &streamv1.StreamRef{Topic: "matches", Key: "m1"},
		FromSequence: 4, ToSequence: 4, WithEvents: true, MaxRecords: 2})
	if rr.GetCount() != 1 || rr.GetHasMore() || rr.GetNextSequence() != 5 || rr.GetProof().GetLastEventId() != "ev-4" {
		t.Fatalf("range page 2: %v", rr)
	}

	// Identity: a stored digest that is not the payload's.
	appendReplay(t, sc, "matches", "m1", 6, "ev-6", "move 6", "00")
	if pr := failure("digest mismatch", proofReq("matches", "m1", 1, 0, 0), errcode.AggregateProofIdentityConflict, reasonDigestMismatch); pr.GetConflictSequence() != 6 || pr.GetConflictEventId() != "ev-6" {
		t.Fatalf("digest conflict %v", pr)
	}
	// The range before it still proves.
	if rr := prove(t, sc, &streamv1.AggregateProofRequest{Stream: &streamv1.StreamRef{Topic: "matches", Key: "m1"},
		FromSequence: 1, ToSequence: 5, WithEvents: true}); rr.GetProof().GetFailure() != "" || rr.GetCount() != 5 {
		t.Fatalf("range before the conflict: %v", rr.GetProof())
	}
	// The same event id under two sequences.
	appendReplay(t, sc, "matches", "m3", 1, "dup", "a", "")
	appendReplay(t, sc, "matches", "m3", 2, "dup", "b", "")
	if pr := failure("repeated event id", proofReq("matches", "m3", 1, 0, 0), errcode.AggregateProofIdentityConflict, reasonDuplicateEventID); pr.GetConflictSequence() != 2 || pr.GetConflictWithSequence() != 1 {
		t.Fatalf("event id conflict %v", pr)
	}
	appendReplay(t, sc, "matches", "m4", 1, "", "a", "")
	failure("no event id", proofReq("matches", "m4", 1, 0, 0), errcode.AggregateProofIdentityConflict, reasonMissingEventID)

	// A record of the match that skips versions (only a raw write can put
	// one there): not an event, but the proof reports it.
	_, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "matches", Partition: 0, LifecycleEpoch: 1, Acks: -1,
		Records: recordtest.Append(nil, replayEvent(t, "matches", "m2", 9, "stray", "s", "")), RecordCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	if pr := failure("stray record", proofReq("matches", "m2", 1, 0, 0), errcode.AggregateProofSequenceGap, reasonStrayEvent); pr.GetMissingFrom() != 6 || pr.GetMissingTo() != 8 || pr.GetConflictSequence() != 9 {
		t.Fatalf("stray %v", pr)
	}

	proven := testutil.ToFloat64(c.role.m.streamProofs.WithLabelValues("proven"))
	idConflicts := testutil.ToFloat64(c.role.m.streamProofs.WithLabelValues(errcode.AggregateProofIdentityConflict.Name()))
	if proven < 4 || idConflicts != 3 {
		t.Fatalf("strata_stream_proofs_total proven %v, identity conflicts %v", proven, idConflicts)
	}

	// A range read's events are checked against every retained event of
	// the match, not only against each other: m5's sequence 4 repeats
	// sequence 1's event id.
	for v, id := range []string{"a", "b", "c", "a"} {
		appendReplay(t, sc, "matches", "m5", uint64(v+1), id, fmt.Sprintf("m5-%d", v+1), "")
	}
	rangeRead := func(from, to, maxRecords uint64) *streamv1.AggregateProofRequest {
		return &streamv1.AggregateProofRequest{Stream: &streamv1.StreamRef{Topic: "matches", Key: "m5"},
			FromSequence: from, ToSequence: to, WithEvents: true, MaxRecords: uint32(maxRecords)}
	}
	if pr := failure("page repeated later", rangeRead(1, 2, 2), errcode.AggregateProofIdentityConflict, reasonDuplicateEventID); pr.GetConflictSequence() != 4 || pr.GetConflictWithSequence() != 1 || pr.GetConflictEventId() != "a" {
		t.Fatalf("page whose id repeats later: %v", pr)
	}
	if pr := failure("page repeats earlier", rangeRead(4, 4, 0), errcode.AggregateProofIdentityConflict, reasonDuplicateEventID); pr.GetConflictSequence() != 4 || pr.GetConflictWithSequence() != 1 {
		t.Fatalf("page repeating an earlier id: %v", pr)
	}
	failure("first page of a longer range", rangeRead(1, 4, 1), errcode.AggregateProofIdentityConflict, reasonDuplicateEventID)
	if rr := prove(t, sc, rangeRead(2, 3, 0)); rr.GetProof().GetFailure() != "" || rr.GetCount() != 2 {
		t.Fatalf("page with unique ids: %v", rr.GetProof())
	}

	_, err = sc.AggregateProof(ctx(t), proofReq("plain-es", "m1", 1, 0, 0))
	wantCode(t, err, errcode.InvalidTopicPolicy)
	_, err = sc.AggregateProof(ctx(t), proofReq("matches", "m1", 0, 0, 0))
	wantCode(t, err, errcode.InvalidParameter)
}

// TestAggregateProofRetentionGap: retention removes the head of one match's
// stream and all of another's; the proofs report the retained gap with
// the diagnostics, reads start at the first retained version, and the
// versions go on from the head.
func TestAggregateProofRetentionGap(t *testing.T) {
	c := startCluster(t, nil, nil, "", func(cfg *Config) { cfg.SegmentBytes = 4096 })
	defer c.stop()
	tp := esTopic("short")
	tp.Config.AggregateReplay = true
	tp.Config.RetentionBytes = 1 // every closed segment below the HWM goes
	c.metad.PutTopic(tp)
	c.waitServing(t, "short", 0)
	sc := c.streams(t)
	big := string(make([]byte, 1500))
	for v := uint64(1); v <= 3; v++ {
		appendReplay(t, sc, "short", "m1", v, fmt.Sprintf("m1-%d", v), big, "")
		appendReplay(t, sc, "short", "gone", v, fmt.Sprintf("gone-%d", v), big, "")
	}
	for v := uint64(1); v <= 8; v++ {
		appendReplay(t, sc, "short", "filler", v, fmt.Sprintf("f-%d", v), big, "")
	}
	appendReplay(t, sc, "short", "m1", 4, "m1-4", "small", "")
	appendReplay(t, sc, "short", "m1", 5, "m1-5", "small", "")
	if pr := prove(t, sc, proofReq("short", "m1", 1, 0, 0)).GetProof(); pr.GetFailure() != "" {
		t.Fatalf("proof before retention %v", pr)
	}
	c.retain(t)

	pr := prove(t, sc, proofReq("short", "m1", 1, 0, 0)).GetProof()
	first := pr.GetFirstRetainedSequence()
	if pr.GetFailure() != errcode.AggregateProofRetentionGap.Name() || pr.GetReason() != reasonRetentionRemoved || first < 4 ||
		pr.GetMissingFrom() != 1 || pr.GetMissingTo() != first-1 || pr.GetLogStartOffset() == 0 || pr.GetHeadSequence() != 5 {
		t.Fatalf("m1 proof after retention %v", pr)
	}
	// The retained part still proves (a range read of it).
	rr := prove(t, sc, &streamv1.AggregateProofRequest{Stream: &streamv1.StreamRef{Topic: "short", Key: "m1"},
		FromSequence: first, ToSequence: 5, WithEvents: true})
	if rr.GetProof().GetFailure() != "" || rr.GetCount() != uint32(5-first+1) {
		t.Fatalf("range of the retained part %v", rr.GetProof())
	}
	// Reads start at the first retained version.
	rs, err := sc.ReadStream(ctx(t), &streamv1.ReadStreamRequest{Stream: &streamv1.StreamRef{Topic: "short", Key: "m1"}, FromVersion: 1})
	if err != nil || rs.GetFirstRetainedVersion() != first || rs.GetCount() != uint32(5-first+1) || rs.GetHeadVersion() != 5 {
		t.Fatalf("read after retention %v %v", rs, err)
	}
	// A match whose events are all gone keeps its head.
	pr = prove(t, sc, proofReq("short", "gone", 1, 0, 0)).GetProof()
	if pr.GetFailure() != errcode.AggregateProofRetentionGap.Name() || pr.GetMissingFrom() != 1 || pr.GetMissingTo() != 3 ||
		pr.GetHeadSequence() != 3 || pr.GetFirstRetainedSequence() != 0 {
		t.Fatalf("proof of a removed match %v", pr)
	}
	ver, err := sc.StreamVersion(ctx(t), &streamv1.StreamVersionRequest{Stream: &streamv1.StreamRef{Topic: "short", Key: "gone"}})
	if err != nil || ver.GetVersion() != 3 {
		t.Fatalf("version of a removed match %v %v", ver, err)
	}
	_, err = sc.AppendStream(ctx(t), &streamv1.AppendStreamRequest{Stream: &streamv1.StreamRef{Topic: "short", Key: "gone"},
		Version: 1, Record: replayEvent(t, "short", "gone", 1, "again-1", "x", ""), AggregateReplay: true})
	wantCode(t, err, errcode.VersionConflict)
	appendReplay(t, sc, "short", "gone", 4, "gone-4", "x", "")
}
