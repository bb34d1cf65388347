package blackbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/streamtest"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// eventSourcing drives the event-sourcing commands over the wire (spec 2.5,
// 4.8): appends with version checks, the record fields, reads with and
// without a snapshot, from_version rules, snapshots, stream history,
// racing appenders, and BROWSE_MESSAGES next to a group whose committed
// offset must not move.
func eventSourcing(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 120*time.Second)
	framework.CreateTopics(t, ctx, cl, "topic=es-orders partitions=3 event_sourcing=true", "topic=es-plain partitions=1")

	t.Run("append, version rules and errors", func(t *testing.T) {
		for v := uint64(1); v <= 3; v++ {
			res, err := cl.AppendStream(ctx, client.Event{Topic: "es-orders", Key: "order-1", Version: v, EventType: "Placed",
				SchemaVersion: 2, Metadata: `{"trace": "a b"}`, Payload: []byte("payload " + strconv.FormatUint(v, 10))})
			if err != nil {
				t.Fatalf("append %d: %v", v, err)
			}
			if res.Version != v || res.Partition != framework.FNVPartition("order-1", 3) {
				t.Fatalf("append %d: %+v", v, res)
			}
		}
		_, err := cl.AppendStream(ctx, client.Event{Topic: "es-orders", Key: "order-1", Version: 3, Payload: []byte("stale")})
		framework.CheckErr(t, "stale version", err, *framework.Want("version_conflict", cConflict, false, "current", "3", "expected", "3"))
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "APPEND_STREAM topic=es-plain key=k version=1 message=x", Err: framework.Want("event_sourcing_not_enabled", cValidation, false, "topic", "es-plain")},
			{Cmd: "APPEND_STREAM topic=es-orders key=k2 version=1 schema_version=0 message=x", Err: framework.Want("invalid_schema_version", cValidation, false)},
			{Cmd: "APPEND_STREAM topic=es-orders key=k2 version=2 message=x", Err: framework.Want("version_conflict", cConflict, false, "current", "0", "expected", "2")},
			{Cmd: "APPEND_STREAM topic=es-orders version=1 message=x", Err: framework.Want("missing_parameter", cValidation, false, "param", "key")},
			{Cmd: "STREAM_VERSION topic=es-orders key=order-1", Prefix: "OK", Fields: map[string]string{"version": "3"}},
			{Cmd: "STREAM_VERSION topic=es-orders key=nobody", Prefix: "OK", Fields: map[string]string{"version": "0"}},
			{Cmd: "SAVE_SNAPSHOT topic=es-orders key=order-1 version=4 message={}", Err: framework.Want("snapshot_version_exceeds_stream", cConflict, false, "current", "3")},
		})
	})

	t.Run("read stream, snapshots and history", func(t *testing.T) {
		r, err := cl.ReadStream(ctx, "es-orders", "order-1", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "OK" || r.Count != 3 || len(r.Events) != 3 || r.Snapshot != nil {
			t.Fatalf("read: %+v", r)
		}
		ev := r.Events[1]
		if ev.AggregateVersion != 2 || ev.EventType != "Placed" || ev.SchemaVersion != 2 || ev.Metadata != `{"trace": "a b"}` ||
			ev.Key != "order-1" || string(ev.Payload) != "payload 2" {
			t.Fatalf("event 2: %+v", ev)
		}
		if snap, err := cl.ReadSnapshot(ctx, "es-orders", "order-1"); err != nil || snap != nil {
			t.Fatalf("snapshot before save: %v %v", snap, err)
		}
		if err := cl.SaveSnapshot(ctx, "es-orders", "order-1", 2, []byte(`{"total":2}`)); err != nil {
			t.Fatal(err)
		}
		snap, err := cl.ReadSnapshot(ctx, "es-orders", "order-1")
		if err != nil || snap == nil || snap.Version != 2 || snap.Payload != `{"total":2}` {
			t.Fatalf("snapshot: %+v %v", snap, err)
		}
		r, err = cl.ReadStream(ctx, "es-orders", "order-1", 1, 0)
		if err != nil || r.Snapshot == nil || r.Snapshot.Version != 2 || r.Count != 1 || r.Events[0].AggregateVersion != 3 {
			t.Fatalf("read with snapshot: %+v %v", r, err)
		}
		r, err = cl.ReadStream(ctx, "es-orders", "order-1", 3, 0)
		if err != nil || r.Snapshot != nil || r.Count != 1 {
			t.Fatalf("read after the snapshot: %+v %v", r, err)
		}
		// invalid_from_version: one JSON envelope, no batch frame.
		resp, err := cl.Do(ctx, "READ_STREAM topic=es-orders key=order-1 from_version=0")
		if err != nil || len(resp.Frames) != 1 {
			t.Fatalf("from_version=0: %d frames, %v", len(resp.Frames), err)
		}
		env := framework.JSON(t, "READ_STREAM error", resp.Frames[0])
		if env["status"] != "ERROR" || !containsCode(env["error"], "invalid_from_version") {
			t.Fatalf("from_version=0 envelope %v", env)
		}
		_, err = cl.ReadStream(ctx, "es-plain", "k", 0, 0)
		framework.CheckErr(t, "read on a plain topic", err, *framework.Want("event_sourcing_not_enabled", cValidation, false))

		h, err := cl.ReadStreamHistory(ctx, "es-orders", "order-1", 1, 2)
		if err != nil || h.Count != 2 || h.NextVersion != 3 || h.HeadVersion != 3 || !h.HasMore || h.Completeness != "complete" {
			t.Fatalf("history page 1: %+v %v", h, err)
		}
		h, err = cl.ReadStreamHistory(ctx, "es-orders", "order-1", h.NextVersion, 2)
		if err != nil || h.Count != 1 || h.NextVersion != 4 || h.HasMore || h.Events[0].AggregateVersion != 3 {
			t.Fatalf("history page 2: %+v %v", h, err)
		}
		h, err = cl.ReadStreamHistory(ctx, "es-orders", "nobody", 1, 0)
		if err != nil || h.Count != 0 || h.Completeness != "unknown" {
			t.Fatalf("history of an unknown aggregate: %+v %v", h, err)
		}
	})

	t.Run("racing appenders", func(t *testing.T) {
		// CI size; the spec's proof size (10,000) with
		// STRATA_STREAM_RACE_VERSIONS=10000 (`make race-streams`). Each
		// appender has its own connection, spread over the gateways.
		total := streamtest.Versions(t, 300)
		appenders := make([]streamtest.Appender, 8)
		for a := range appenders {
			acl := framework.Dial(t, ctx, c.Gateways()[a%len(c.Gateways())].ClientAddr)
			appenders[a] = func(v uint64, payload string) (uint64, error) {
				res, err := acl.AppendStream(ctx, client.Event{Topic: "es-orders", Key: "race", Version: v, Payload: []byte(payload)})
				return res.Version, err
			}
		}
		res, err := streamtest.Race(total, appenders, func(from uint64) ([]streamtest.Event, error) {
			r, err := cl.ReadStream(ctx, "es-orders", "race", from, 1024)
			if err != nil {
				return nil, err
			}
			evs := make([]streamtest.Event, len(r.Events))
			for i, ev := range r.Events {
				evs[i] = streamtest.Event{Version: ev.AggregateVersion, Payload: string(ev.Payload)}
			}
			return evs, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d appenders, %d versions: %d conflicts, %v (%.0f appends/s)", len(appenders), total, res.Conflicts,
			res.Elapsed.Round(time.Millisecond), float64(total)/res.Elapsed.Seconds())
	})

	t.Run("aggregate replay topics", func(t *testing.T) {
		framework.CreateTopics(t, ctx, cl, "topic=es-replay partitions=2 event_sourcing=true aggregate_replay=true idempotent=true")
		ev := client.Event{Topic: "es-replay", Key: "match-1", Version: 1, EventID: "ev-1", ProducerID: "p1", SeqNum: 1, Payload: []byte("kickoff")}
		first, err := cl.AppendStream(ctx, ev)
		if err != nil || first.Duplicate {
			t.Fatalf("append: %+v %v", first, err)
		}
		again, err := cl.AppendStream(ctx, ev)
		if err != nil || !again.Duplicate || again.Offset != first.Offset || again.Version != 1 {
			t.Fatalf("exact repeat: %+v %v", again, err)
		}
		other := ev
		other.Payload = []byte("a different kickoff")
		_, err = cl.AppendStream(ctx, other)
		framework.CheckErr(t, "same id, other payload", err, *framework.Want("version_conflict", cConflict, false, "reason", "event_identity_conflict", "current", "1"))
		r, err := cl.ReadStream(ctx, "es-replay", "match-1", 1, 0)
		if err != nil || r.Count != 1 {
			t.Fatalf("read: %+v %v", r, err)
		}
		sum := sha256.Sum256([]byte("kickoff"))
		if got := r.Events[0]; got.EventID != "ev-1" || got.PayloadDigest != hex.EncodeToString(sum[:]) || got.Version != 3 || got.ProducerID != "p1" {
			t.Fatalf("replay event fields: %+v", got)
		}
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "APPEND_STREAM topic=es-replay key=match-1 version=2 message=x", Err: framework.Want("missing_parameter", cValidation, false, "param", "event_id")},
			{Cmd: "PUBLISH topic=es-replay producerId=p message=x", Err: framework.Want("invalid_topic_policy", cValidation, false, "topic", "es-replay")},
			{Cmd: "CREATE topic=es-replay partitions=3", Err: framework.Want("immutable_topic_field", cValidation, false, "field", "partitions")},
		})
	})

	t.Run("aggregate replay proofs and range reads", func(t *testing.T) {
		framework.CreateTopics(t, ctx, cl, "topic=es-proofs partitions=2 event_sourcing=true aggregate_replay=true idempotent=true")
		for v := uint64(1); v <= 4; v++ {
			ev := client.Event{Topic: "es-proofs", Key: "match-9", Version: v, EventID: fmt.Sprintf("m9-%d", v), ProducerID: "p1", SeqNum: v,
				Payload: []byte(fmt.Sprintf("move %d", v))}
			if _, err := cl.AppendStream(ctx, ev); err != nil {
				t.Fatalf("append %d: %v", v, err)
			}
		}
		part := framework.FNVPartition("match-9", 2)
		pr, err := cl.AggregateReplayProof(ctx, "es-proofs", "match-9", client.ProofOptions{ExpectedLastSequence: 4})
		if err != nil {
			t.Fatal(err)
		}
		if pr.Status != "proven" || pr.FirstSequence != 1 || pr.LastSequence != 4 || pr.EventCount != 4 || pr.FirstEventID != "m9-1" ||
			pr.LastEventID != "m9-4" || pr.Partition != part || pr.ProofHWM <= pr.LastOffset || pr.MatchID != "match-9" {
			t.Fatalf("proof %+v", pr)
		}
		_, err = cl.AggregateReplayProof(ctx, "es-proofs", "match-9", client.ProofOptions{ExpectedLastSequence: 6})
		framework.CheckErr(t, "expected beyond the head", err, *framework.Want("aggregate_proof_sequence_gap", errcode.ClassInternal, false,
			"match_id", "match-9", "reason", "missing_after_head"))
		if diag, ok := client.ProofOf(err); !ok || diag.Status != "aggregate_proof_sequence_gap" || diag.MissingFrom != 5 || diag.MissingTo != 6 || diag.HeadSequence != 4 {
			t.Fatalf("diagnostic proof %+v %v", diag, ok)
		}
		_, err = cl.AggregateReplayProof(ctx, "es-proofs", "nobody", client.ProofOptions{})
		framework.CheckErr(t, "unknown match", err, *framework.Want("aggregate_proof_proof_unavailable", errcode.ClassInternal, false, "reason", "unknown_match"))

		rr, err := cl.AggregateEventRangeRead(ctx, "es-proofs", "match-9", 2, 4, 2)
		if err != nil {
			t.Fatal(err)
		}
		if rr.Status != "OK" || rr.Count != 2 || len(rr.Events) != 2 || !rr.HasMore || rr.NextSequence != 4 || rr.Proof.Status != "proven" ||
			rr.Proof.FirstSequence != 2 || rr.Proof.LastSequence != 3 || rr.Events[0].EventID != "m9-2" || string(rr.Events[1].Payload) != "move 3" {
			t.Fatalf("range read %+v", rr)
		}
		_, err = cl.AggregateEventRangeRead(ctx, "es-proofs", "match-9", 3, 8, 0)
		framework.CheckErr(t, "range past the head", err, *framework.Want("aggregate_proof_sequence_gap", errcode.ClassInternal, false))
		if diag, ok := client.ProofOf(err); !ok || diag.MissingFrom != 5 || diag.MissingTo != 8 {
			t.Fatalf("range diagnostic proof %+v %v", diag, ok)
		}
		// The range read leaves the group offsets where they were.
		before := framework.Committed(t, ctx, cl, "es-proofs", part, "default-group")
		if _, err := cl.AggregateEventRangeRead(ctx, "es-proofs", "match-9", 1, 4, 0); err != nil {
			t.Fatal(err)
		}
		if after := framework.Committed(t, ctx, cl, "es-proofs", part, "default-group"); after != before {
			t.Fatalf("committed offset moved %d -> %d", before, after)
		}
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "AGGREGATE_REPLAY_PROOF topic=es-plain match_id=m", Err: framework.Want("event_sourcing_not_enabled", cValidation, false, "topic", "es-plain")},
			{Cmd: "AGGREGATE_REPLAY_PROOF topic=es-orders match_id=m", Err: framework.Want("invalid_topic_policy", cValidation, false, "reason", "aggregate_replay_required")},
			{Cmd: "AGGREGATE_REPLAY_PROOF topic=es-proofs", Err: framework.Want("missing_parameter", cValidation, false, "param", "match_id")},
			{Cmd: fmt.Sprintf("AGGREGATE_REPLAY_PROOF topic=es-proofs match_id=match-9 partition=%d", 1-part), Err: framework.Want("invalid_parameter", cValidation, false, "param", "partition")},
		})

		// Table A and table B (Python SDK) clients get the same answers
		// under their own command ids.
		for _, tc := range []struct {
			name  string
			table *wire.CommandTable
		}{{"table A", wire.TableA}, {"table B", wire.TableB}} {
			raw := framework.NegotiateTable(t, c.Gateways()[0].ClientAddr, tc.table, wire.CompressionNone)
			proofID, _ := tc.table.ID(wire.CmdAggregateReplayProof)
			rangeID, _ := tc.table.ID(wire.CmdAggregateEventRangeRead)
			id := raw.SendText("AGGREGATE_REPLAY_PROOF topic=es-proofs match_id=match-9")
			f := raw.MustRead()
			if f.Header.Command != proofID || f.Header.RequestID != id || f.Header.Status != wire.StatusOK ||
				!strings.HasPrefix(string(f.Payload), `OK proof={"status":"proven","topic":"es-proofs","match_id":"match-9"`) {
				t.Fatalf("%s proof: %+v %q", tc.name, f.Header, f.Payload)
			}
			id = raw.SendText("AGGREGATE_REPLAY_PROOF topic=es-proofs match_id=match-9 expected_last_sequence=2")
			f = raw.MustRead()
			e := framework.FrameErr(t, f)
			if f.Header.Command != proofID || f.Header.RequestID != id || e.Code != "aggregate_proof_sequence_gap" ||
				!strings.Contains(e.Field("proof"), `"reason":"events_after_expected"`) {
				t.Fatalf("%s failed proof: %+v %v", tc.name, f.Header, e)
			}
			id = raw.SendText("AGGREGATE_EVENT_RANGE_READ topic=es-proofs match_id=match-9 from_sequence=1 to_sequence=4 max_records=3")
			env, batch := raw.MustRead(), raw.MustRead()
			if env.Header.Command != rangeID || batch.Header.Command != rangeID || env.Header.RequestID != id || batch.Header.RequestID != id {
				t.Fatalf("%s range headers %+v %+v", tc.name, env.Header, batch.Header)
			}
			j := framework.JSON(t, tc.name+" range envelope", env.Payload)
			if j["status"] != "OK" || j["count"] != float64(3) || j["has_more"] != true || j["next_sequence"] != float64(4) {
				t.Fatalf("%s range envelope %v", tc.name, j)
			}
			b, err := wire.DecodeBatch(batch.Payload)
			if err != nil || len(b.Records) != 3 || b.Records[2].AggregateVersion != 3 {
				t.Fatalf("%s range batch %+v %v", tc.name, b, err)
			}
			id = raw.SendText("AGGREGATE_EVENT_RANGE_READ topic=es-proofs match_id=match-9 from_sequence=0 to_sequence=4")
			f = raw.MustRead()
			if f.Header.Command != rangeID || f.Header.RequestID != id || !containsCode(framework.JSON(t, "range error", f.Payload)["error"], "invalid_parameter") {
				t.Fatalf("%s range error %+v %q", tc.name, f.Header, f.Payload)
			}
			raw.Conn.Close()
		}
	})

	t.Run("cli stream and browse", func(t *testing.T) {
		gw := c.Gateways()[0].ClientAddr
		run := func(args ...string) map[string]any {
			t.Helper()
			code, out, errs := strataCLI(t.Context(), gw, args...)
			if code != 0 {
				t.Fatalf("strata %v: exit %d: %s", args, code, errs)
			}
			return framework.JSON(t, "strata "+args[0], []byte(out))
		}
		if out := run("stream", "append", "es-orders", "cli-agg", "--version", "1", "--type", "Opened", "--metadata", `{"by":"cli"}`, "--message", "hello"); out["version"] != float64(1) {
			t.Fatalf("stream append: %v", out)
		}
		if out := run("stream", "version", "es-orders", "cli-agg"); out["version"] != float64(1) {
			t.Fatalf("stream version: %v", out)
		}
		run("stream", "snapshot", "save", "es-orders", "cli-agg", "--version", "1", "--message", `{"open":true}`)
		if out := run("stream", "snapshot", "get", "es-orders", "cli-agg"); out["snapshot"] == nil {
			t.Fatalf("stream snapshot get: %v", out)
		}
		out := run("stream", "read", "es-orders", "cli-agg")
		if out["count"] != float64(0) || out["snapshot"] == nil {
			t.Fatalf("stream read (snapshot at the head): %v", out)
		}
		code, _, errs := strataCLI(t.Context(), gw, "stream", "append", "es-orders", "cli-agg", "--version", "1", "--message", "again")
		if code != 1 || !strings.Contains(errs, "version_conflict") {
			t.Fatalf("stale append: exit %d %s", code, errs)
		}
		if out := run("stream", "proof", "es-proofs", "match-9", "--expected-last", "4"); out["status"] != "proven" || out["event_count"] != float64(4) {
			t.Fatalf("stream proof: %v", out)
		}
		if out := run("stream", "range", "es-proofs", "match-9", "--from", "2", "--to", "3"); out["count"] != float64(2) || len(out["events"].([]any)) != 2 {
			t.Fatalf("stream range: %v", out)
		}
		pcode, pout, perrs := strataCLI(t.Context(), gw, "stream", "proof", "es-proofs", "match-9", "--expected-last", "9")
		if pcode != 1 || !strings.Contains(perrs, "aggregate_proof_sequence_gap") || framework.JSON(t, "failed proof", []byte(pout))["missing_to"] != float64(9) {
			t.Fatalf("failed stream proof: exit %d %s %s", pcode, pout, perrs)
		}
		framework.CreateTopics(t, ctx, cl, "topic=es-cli-browse partitions=1")
		framework.PublishAcked(t, ctx, cl, "es-cli-browse", 3)
		if out := run("browse", "es-cli-browse", "--offset", "1"); out["next_offset"] != float64(3) || len(out["records"].([]any)) != 2 {
			t.Fatalf("browse: %v", out)
		}
	})

	t.Run("browse never touches group offsets", func(t *testing.T) {
		framework.CreateTopics(t, ctx, cl, "topic=es-browse partitions=1")
		framework.PublishAcked(t, ctx, cl, "es-browse", 25)
		before := framework.Committed(t, ctx, cl, "es-browse", 0, "default-group")
		off := uint64(5)
		b, err := cl.Browse(ctx, "es-browse", 0, client.BrowseOptions{Offset: &off, MaxRecords: 10})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status != "OK" || len(b.Records) != 10 || b.Records[0].Offset != 5 || b.NextOffset != 15 || b.EarliestOffset != 0 ||
			b.ReadableEndOffset != 25 || !b.HasMore {
			t.Fatalf("browse: %+v (%d records)", b, len(b.Records))
		}
		b, err = cl.Browse(ctx, "es-browse", 0, client.BrowseOptions{})
		if err != nil || len(b.Records) != 25 || b.HasMore {
			t.Fatalf("browse defaults: %d records %v", len(b.Records), err)
		}
		if after := framework.Committed(t, ctx, cl, "es-browse", 0, "default-group"); after != before {
			t.Fatalf("committed offset moved %d -> %d", before, after)
		}
		resp, err := cl.Do(ctx, "BROWSE_MESSAGES topic=es-browse partition=0 max_records=1001")
		if err != nil || len(resp.Frames) != 1 || !containsCode(framework.JSON(t, "browse error", resp.Frames[0])["error"], "invalid_parameter") {
			t.Fatalf("max_records=1001: %v %v", resp.Frames, err)
		}
		_, err = cl.Browse(ctx, "es-missing", 0, client.BrowseOptions{})
		framework.CheckErr(t, "browse unknown topic", err, *framework.Want("topic_not_found", cNotFound, false))
	})

	t.Run("transactional appends", func(t *testing.T) {
		txnAppends(t, c, ctx, cl)
	})
}

// txnAppends: TXN_APPEND_STREAM. One transaction appends v2, v3, v4 of an
// aggregate (each checked against the head counting its own open events);
// while it is open readers see v1 only and other writers get the retryable
// concurrent_transactions; the commit shows all four. An aborted
// transaction gives its versions back. Table A (54) and table B (29)
// clients get the same answers under their own ids.
func txnAppends(t *testing.T, c framework.Cluster, ctx context.Context, cl *client.Client) {
	framework.CreateTopics(t, ctx, cl, "topic=es-txn partitions=2 event_sourcing=true")
	ev := func(key string, v uint64, p string) client.Event {
		return client.Event{Topic: "es-txn", Key: key, Version: v, EventType: "Moved", Metadata: `{"by":"txn"}`, Payload: []byte(p)}
	}
	versions := func(key string) []uint64 {
		t.Helper()
		r, err := cl.ReadStream(ctx, "es-txn", key, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, e := range r.Events {
			out = append(out, e.AggregateVersion)
		}
		return out
	}
	if _, err := cl.AppendStream(ctx, ev("cart", 1, "plain-1")); err != nil {
		t.Fatal(err)
	}
	tp := cl.NewTxnProducer("es-txn-writer")
	if err := tp.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	for v := uint64(2); v <= 4; v++ {
		res, err := tp.AppendStream(ctx, ev("cart", v, "txn-"+strconv.FormatUint(v, 10)))
		if err != nil {
			t.Fatalf("txn append %d: %v", v, err)
		}
		if res.Version != v || res.Partition != framework.FNVPartition("cart", 2) {
			t.Fatalf("txn append %d: %+v", v, res)
		}
	}
	s := tp.Session()
	sess := "transactional_id=es-txn-writer producerId=" + s.ProducerID + " epoch=" + strconv.FormatInt(s.Epoch, 10)
	framework.RunCases(t, ctx, cl, []framework.Case{
		{Cmd: "STREAM_VERSION topic=es-txn key=cart", Prefix: "OK", Fields: map[string]string{"version": "1"}},
		{Cmd: "APPEND_STREAM topic=es-txn key=cart version=5 message=racer",
			Err: framework.Want("concurrent_transactions", cAvail, true, "reason", "aggregate_in_transaction", "current", "1")},
		{Cmd: "TXN_APPEND_STREAM " + sess + " seqNum=90 topic=es-txn key=cart version=4 message=stale",
			Err: framework.Want("version_conflict", cConflict, false, "current", "4", "expected", "4")},
		{Cmd: "TXN_APPEND_STREAM " + sess + " topic=es-txn key=cart version=5 message=x",
			Err: framework.Want("invalid_parameter", cValidation, false, "param", "seqNum")},
		{Cmd: "TXN_APPEND_STREAM " + sess + " seqNum=91 topic=es-plain key=cart version=1 message=x",
			Err: framework.Want("event_sourcing_not_enabled", cValidation, false, "topic", "es-plain")},
		{Cmd: "TXN_APPEND_STREAM transactional_id=es-txn-nobody producerId=p epoch=1 seqNum=1 topic=es-txn key=other version=1 message=x",
			Err: framework.Want("transaction_not_found", cNotFound, false)},
	})
	if got := versions("cart"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("read while open: %v", got)
	}
	if err := tp.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := cl.ReadStream(ctx, "es-txn", "cart", 1, 0)
	if err != nil || r.Count != 4 || string(r.Events[3].Payload) != "txn-4" || r.Events[3].EventType != "Moved" {
		t.Fatalf("read after commit: %+v %v", r, err)
	}

	// Abort: v5, v6 go back; a plain append then takes v5.
	if err := tp.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	for v := uint64(5); v <= 6; v++ {
		if _, err := tp.AppendStream(ctx, ev("cart", v, "doomed")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tp.AppendStream(ctx, ev("fresh", 1, "doomed")); err != nil {
		t.Fatal(err)
	}
	if err := tp.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	framework.RunCases(t, ctx, cl, []framework.Case{
		{Cmd: "STREAM_VERSION topic=es-txn key=cart", Prefix: "OK", Fields: map[string]string{"version": "4"}},
		{Cmd: "STREAM_VERSION topic=es-txn key=fresh", Prefix: "OK", Fields: map[string]string{"version": "0"}},
	})
	if _, err := cl.AppendStream(ctx, ev("cart", 5, "plain-5")); err != nil {
		t.Fatalf("version 5 after the abort: %v", err)
	}
	if _, err := cl.AppendStream(ctx, ev("fresh", 1, "plain-1")); err != nil {
		t.Fatalf("fresh version 1 after the abort: %v", err)
	}
	if got := versions("cart"); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("read after abort: %v", got)
	}

	// Both wire tables.
	for i, tc := range []struct {
		name  string
		table *wire.CommandTable
	}{{"table A", wire.TableA}, {"table B", wire.TableB}} {
		if err := tp.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		s := tp.Session()
		raw := framework.NegotiateTable(t, c.Gateways()[0].ClientAddr, tc.table, wire.CompressionNone)
		want, _ := tc.table.ID(wire.CmdTxnAppendStream)
		key := "table-" + strconv.Itoa(i)
		id := raw.SendText("TXN_APPEND_STREAM transactional_id=es-txn-writer producerId=" + s.ProducerID + " epoch=" +
			strconv.FormatInt(s.Epoch, 10) + " seqNum=1 topic=es-txn key=" + key + " version=1 event_type=T message=hello")
		f := raw.MustRead()
		if f.Header.Command != want || f.Header.RequestID != id || f.Header.Status != wire.StatusOK ||
			!strings.HasPrefix(string(f.Payload), "OK transactional_id=es-txn-writer appended=true staged_messages=1 topic=es-txn partition=") ||
			!strings.Contains(string(f.Payload), " version=1 offset=") {
			t.Fatalf("%s: %+v %q", tc.name, f.Header, f.Payload)
		}
		raw.Conn.Close()
		if err := tp.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := versions(key); fmt.Sprint(got) != "[1]" {
			t.Fatalf("%s read: %v", tc.name, got)
		}
	}

	// Fencing: a new INIT_PRODUCER_ID aborts the open transaction, and its
	// version comes back (once the abort marker is written: until then a
	// plain append is refused retryably).
	if err := tp.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.AppendStream(ctx, ev("cart", 6, "fenced")); err != nil {
		t.Fatal(err)
	}
	if err := tp.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	framework.Retry(t, ctx, func() error {
		_, err := cl.AppendStream(ctx, ev("cart", 6, "plain-6"))
		if err != nil && !errcode.IsRetryable(err) {
			t.Fatalf("plain append after the fencing: %v", err)
		}
		return err
	})
	if err := tp.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = cl.ReadStream(ctx, "es-txn", "cart", 6, 0)
	if err != nil || r.Count != 1 || string(r.Events[0].Payload) != "plain-6" {
		t.Fatalf("read after the fencing: %+v %v", r, err)
	}
}

func containsCode(v any, code string) bool {
	s, _ := v.(string)
	return len(s) >= len(code) && s[:len(code)] == code
}
