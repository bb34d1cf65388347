package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
)

// TestBlackboxTopicAdmin drives the topic administration commands of spec
// 4.4 (CREATE with the patch rules, ALTER_TOPIC_CONFIG, DELETE, TRUNCATE,
// LIST, HELP, DESCRIBE, METADATA, LIST_OFFSETS, CLUSTER_STATUS, ELECT_LEADER)
// and every error code each can produce on the all-in-one, over the wire.
func TestBlackboxTopicAdmin(t *testing.T) {
	srv := bbStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := dial(t, ctx, srv.ClientAddr())
	gw := srv.ClientAddr()

	t.Run("CREATE and patch rules", func(t *testing.T) {
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "CREATE topic=adm partitions=2", prefix: "OK topic=adm ", fields: map[string]string{
				"partitions": "2", "revision": "1", "cleanup_policy": "delete", "partitioner": "hash_key",
				"auth_policy": "open", "read_acl": "", "write_acl": "", "retention_hours": "0", "retention_bytes": "0",
				"replication_factor": "1", "idempotent": "false", "event_sourcing": "false", "lifecycle_epoch": "*",
				"min_in_sync_replicas": "default", "effective_min_in_sync_replicas": "1"}},
			// A changed field set bumps the revision; omitted fields keep their value.
			{cmd: "CREATE topic=adm partitions=3 retention_hours=5", prefix: "OK", fields: map[string]string{"partitions": "3", "retention_hours": "5", "revision": "2", "cleanup_policy": "delete"}},
			// Nothing changes: same revision.
			{cmd: "CREATE topic=adm partitions=3 retention_hours=5", prefix: "OK", fields: map[string]string{"revision": "2"}},
			{cmd: "CREATE topic=adm", prefix: "OK", fields: map[string]string{"revision": "2", "partitions": "3"}},
			// Explicit 0 is applied.
			{cmd: "CREATE topic=adm retention_hours=0", prefix: "OK", fields: map[string]string{"retention_hours": "0", "revision": "3"}},
			// Immutable fields may be restated with their current value.
			{cmd: "CREATE topic=adm replication_factor=1 idempotent=false event_sourcing=false", prefix: "OK", fields: map[string]string{"revision": "3"}},
			{cmd: "CREATE topic=adm partitioner=round_robin auth_policy=acl read_acl=alice,bob write_acl=*", prefix: "OK", fields: map[string]string{
				"partitioner": "round_robin", "auth_policy": "acl", "read_acl": "alice,bob", "write_acl": "*", "revision": "4"}},
			{cmd: "CREATE topic=adm partitioner=hash_key auth_policy=open", prefix: "OK", fields: map[string]string{"revision": "5", "read_acl": "alice,bob"}},
			// partitiond advertises topic lifecycle protocol 2, so compacted
			// policies are accepted for application topics (spec 4.4 rule 4);
			// an omitted policy keeps the current one.
			{cmd: "CREATE topic=adm cleanup_policy=compact", prefix: "OK", fields: map[string]string{"revision": "6", "cleanup_policy": "compact"}},
			{cmd: "CREATE topic=adm cleanup_policy=delete,compact", prefix: "OK", fields: map[string]string{"revision": "7", "cleanup_policy": "delete,compact"}},
			{cmd: "CREATE topic=adm", prefix: "OK", fields: map[string]string{"revision": "7", "cleanup_policy": "delete,compact"}},
			{cmd: "CREATE topic=adm cleanup_policy=delete", prefix: "OK", fields: map[string]string{"revision": "8", "cleanup_policy": "delete"}},
			{cmd: "CREATE topic=adm.v2_x-y=z partitions=1", prefix: "OK", fields: map[string]string{"topic": "adm.v2_x-y=z", "revision": "1"}},
			{cmd: "CREATE topic=" + strings.Repeat("n", 249) + " partitions=1", prefix: "OK", fields: map[string]string{"revision": "1"}},
			// Errors.
			{cmd: "CREATE topic=adm partitions=2", err: verr("partition_count_decrease", cValidation, false, "current", "3", "requested", "2")},
			{cmd: "CREATE topic=adm replication_factor=3", err: verr("immutable_topic_field", cValidation, false, "field", "replication_factor")},
			{cmd: "CREATE topic=adm idempotent=true", err: verr("immutable_topic_field", cValidation, false, "field", "idempotent")},
			{cmd: "CREATE topic=adm event_sourcing=true", err: verr("immutable_topic_field", cValidation, false, "field", "event_sourcing")},
			{cmd: "CREATE topic=bad/name", err: verr("invalid_topic_name", cValidation, false, "topic", "bad/name")},
			{cmd: "CREATE topic=..", err: verr("invalid_topic_name", cValidation, false, "topic", "..")},
			{cmd: "CREATE topic=.", err: verr("invalid_topic_name", cValidation, false, "topic", ".")},
			{cmd: "CREATE topic=" + strings.Repeat("n", 250), err: verr("invalid_topic_name", cValidation, false)},
			{cmd: "CREATE topic=caf\u00e9", err: verr("invalid_topic_name", cValidation, false)},
			{cmd: "CREATE partitions=2", err: verr("missing_topic", cValidation, false)},
			{cmd: "CREATE topic=adm2 partitions=abc", err: verr("invalid_parameter", cValidation, false, "param", "partitions")},
			{cmd: "CREATE topic=adm2 partitions=0", err: verr("invalid_parameter", cValidation, false, "param", "partitions")},
			{cmd: "CREATE topic=adm2 idempotent=maybe", err: verr("invalid_parameter", cValidation, false, "param", "idempotent")},
			{cmd: "CREATE topic=adm2 retention_hours=-1", err: verr("invalid_parameter", cValidation, false, "param", "retention_hours")},
			{cmd: "CREATE topic=adm2 cleanup_policy=foo", err: verr("invalid_topic_policy", cValidation, false)},
			{cmd: "CREATE topic=adm2 event_sourcing=true cleanup_policy=compact", err: verr("invalid_topic_policy", cValidation, false)},
			{cmd: "CREATE topic=adm2 event_sourcing=true cleanup_policy=delete,compact", err: verr("invalid_topic_policy", cValidation, false)},
			{cmd: "CREATE topic=adm2 partitioner=foo", err: verr("invalid_parameter", cValidation, false, "param", "partitioner")},
			{cmd: "CREATE topic=adm2 auth_policy=foo", err: verr("invalid_parameter", cValidation, false, "param", "auth_policy")},
			{cmd: "CREATE topic=adm2 replication_factor=3", err: verr("invalid_replication_factor", cValidation, false, "replication_factor", "3")},
			{cmd: "CREATE topic=adm2 min_in_sync_replicas=2", err: verr("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
		})
		// A failed CREATE created nothing.
		bbRun(t, ctx, cl, []bbCase{{cmd: "DESCRIBE topic=adm2", err: verr("topic_not_found", cNotFound, false, "topic", "adm2")}})
	})

	t.Run("explicit empty ACL is applied", func(t *testing.T) {
		before := bbOK(t, ctx, cl, "CREATE topic=adm read_acl=carol")
		if before["read_acl"] != "carol" {
			t.Fatalf("read_acl %q", before["read_acl"])
		}
		rev, _ := strconv.Atoi(before["revision"])
		// The CRQ2 request carries read_acl with an empty value (the text
		// form cannot express it, so it is built by hand).
		req := &wire.Request{Fields: []wire.Field{{Key: "topic", Value: "adm"}, {Key: "read_acl", Value: ""}}}
		raw := bbNegotiate(t, gw, wire.CompressionNone)
		p, err := req.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := wire.TableA.ID(wire.CmdCreate)
		raw.sendFrame(id, p)
		f := raw.mustRead()
		if f.Header.Status != wire.StatusOK {
			t.Fatalf("CREATE read_acl=<empty>: %v", bbFrameErr(t, f))
		}
		ok, err := wire.ParseOK(string(f.Payload))
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := ok.Get("read_acl"); v != "" {
			t.Fatalf("read_acl after explicit empty = %q (%s)", v, f.Payload)
		}
		if v, _ := ok.Get("revision"); v != strconv.Itoa(rev+1) {
			t.Fatalf("revision %s, want %d", v, rev+1)
		}
	})

	t.Run("ALTER_TOPIC_CONFIG", func(t *testing.T) {
		rev, _ := strconv.Atoi(bbOK(t, ctx, cl, "CREATE topic=adm")["revision"])
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=1", prefix: "OK", fields: map[string]string{"topic": "adm", "min_in_sync_replicas": "1", "effective_min_in_sync_replicas": "1", "revision": strconv.Itoa(rev + 1)}},
			{cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=default", prefix: "OK", fields: map[string]string{"min_in_sync_replicas": "default", "effective_min_in_sync_replicas": "1", "revision": strconv.Itoa(rev + 2)}},
			{cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=2", err: verr("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
			{cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=0", err: verr("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
			{cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=x", err: verr("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
			{cmd: "ALTER_TOPIC_CONFIG topic=nope min_in_sync_replicas=1", err: verr("topic_not_found", cNotFound, false, "topic", "nope")},
			{cmd: "ALTER_TOPIC_CONFIG min_in_sync_replicas=1", err: verr("missing_topic", cValidation, false)},
			{cmd: "ALTER_TOPIC_CONFIG topic=adm", err: verr("missing_min_in_sync_replicas", cValidation, false)},
		})
		// The override is visible through CREATE's answer (no-op patch).
		if got := bbOK(t, ctx, cl, "CREATE topic=adm")["min_in_sync_replicas"]; got != "default" {
			t.Fatalf("min_in_sync_replicas after default = %q", got)
		}
		// The client wrapper answers the same.
		r, err := cl.AlterTopicConfig(ctx, "adm", "1")
		if err != nil || r.Value("min_in_sync_replicas") != "1" {
			t.Fatalf("AlterTopicConfig: %v %q", err, r.Text)
		}
	})

	t.Run("LIST HELP METADATA DESCRIBE", func(t *testing.T) {
		topics, err := cl.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"adm", "adm.v2_x-y=z"} {
			if !contains(topics, want) {
				t.Fatalf("LIST %v lacks %s", topics, want)
			}
		}
		for _, tp := range topics {
			if strings.HasPrefix(tp, "__") {
				t.Fatalf("LIST shows internal topic %s", tp)
			}
		}
		lst := bbOK(t, ctx, cl, "LIST")
		if lst["count"] != strconv.Itoa(len(topics)) {
			t.Fatalf("LIST count %s, topics %v", lst["count"], topics)
		}

		help := bbOK(t, ctx, cl, "HELP")["commands"]
		names := strings.Split(help, ",")
		for _, want := range []string{"CREATE", "ALTER_TOPIC_CONFIG", "DELETE", "TRUNCATE", "LIST", "HELP", "DESCRIBE", "METADATA",
			"LIST_OFFSETS", "CLUSTER_STATUS", "ELECT_LEADER", "PUBLISH", "CONSUME", "STREAM", "JOIN_GROUP", "SYNC_GROUP",
			"HEARTBEAT", "LEAVE_GROUP", "COMMIT_OFFSET", "FETCH_OFFSET", "BATCH_COMMIT", "GROUP_STATUS", "FIND_COORDINATOR",
			"LIST_GROUPS", "REGISTER_GROUP", "EXIT", "DELETE_GROUP", "RESET_OFFSETS"} {
			if !contains(names, want) {
				t.Fatalf("HELP lacks %s: %s", want, help)
			}
		}
		for _, bad := range []string{"NEGOTIATE", "REPLICATE_MESSAGE", "RAFT_APPLY", "INTERNAL_BATCH", "JOIN_CLUSTER"} {
			if contains(names, bad) {
				t.Fatalf("HELP lists %s: %s", bad, help)
			}
		}

		md, err := cl.Metadata(ctx, "adm")
		if err != nil {
			t.Fatal(err)
		}
		if md.Partitions != 3 || len(md.Leaders) != 3 || len(md.Epochs) != 3 {
			t.Fatalf("METADATA %+v", md)
		}
		for _, l := range md.Leaders {
			if l != gw {
				t.Fatalf("METADATA leader %s, want the gateway address %s", l, gw)
			}
		}
		m := bbOK(t, ctx, cl, "METADATA topic=adm")
		for _, k := range []string{"topic", "partitions", "leaders", "epochs", "revision", "replication_factor", "idempotent", "event_sourcing",
			"cleanup_policy", "partitioner", "auth_policy", "read_acl", "write_acl", "retention_hours", "retention_bytes", "lifecycle_epoch"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("METADATA lacks %s: %v", k, m)
			}
		}

		d, err := cl.Describe(ctx, "adm")
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != "OK" || d.Topic != "adm" || d.Definition.Name != "adm" || d.Definition.Partitions != 3 ||
			d.Definition.ReplicationFactor != 1 || d.Definition.Policy.Partitioner != "hash_key" || len(d.Partitions) != 3 {
			t.Fatalf("DESCRIBE %s", d.Raw)
		}
		for i, p := range d.Partitions {
			if p.ID != int32(i) || p.Leader != gw || len(p.Replicas) != 1 || len(p.ISR) != 1 {
				t.Fatalf("DESCRIBE partition %d: %+v", i, p)
			}
		}
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "DESCRIBE topic=nope", err: verr("topic_not_found", cNotFound, false, "topic", "nope")},
			{cmd: "DESCRIBE", err: verr("missing_topic", cValidation, false)},
			{cmd: "METADATA topic=nope", err: verr("topic_not_found", cNotFound, false, "topic", "nope")},
			{cmd: "METADATA", err: verr("missing_topic", cValidation, false)},
		})
	})

	t.Run("LIST_OFFSETS", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			retry(t, ctx, func() error {
				_, err := cl.Publish(ctx, client.PublishRequest{Topic: "adm", Partition: 0, Acks: "1", ProducerID: "p", Message: fmt.Sprintf("m%d", i)})
				return err
			})
		}
		offs := bbOffsets(t, ctx, cl, "adm")
		if len(offs) != 3 {
			t.Fatalf("LIST_OFFSETS %v", offs)
		}
		if o := offs[0]; o.Earliest != 0 || o.Latest != 3 || o.LEO != 3 || o.HWM != 3 {
			t.Fatalf("P0 offsets %+v", o)
		}
		if o := offs[1]; o.Latest != 0 || o.LEO != 0 {
			t.Fatalf("P1 offsets %+v", o)
		}
		one, err := cl.ListOffsets(ctx, "adm", 0)
		if err != nil || len(one) != 1 || one[0].Partition != 0 || one[0].LEO != 3 {
			t.Fatalf("LIST_OFFSETS partition=0: %+v %v", one, err)
		}
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "LIST_OFFSETS topic=adm partition=0", prefix: "OK", fields: map[string]string{"topic": "adm", "offsets": "P0:earliest=0:latest=3:leo=3:hwm=3"}},
			{cmd: "LIST_OFFSETS topic=adm partition=9", err: verr("partition_not_found", cNotFound, false, "partition", "9")},
			{cmd: "LIST_OFFSETS topic=adm partition=x", err: verr("invalid_partition", cValidation, false, "command", "LIST_OFFSETS")},
			{cmd: "LIST_OFFSETS topic=adm partition=-1", err: verr("invalid_partition", cValidation, false, "command", "LIST_OFFSETS")},
			{cmd: "LIST_OFFSETS topic=nope", err: verr("topic_not_found", cNotFound, false, "topic", "nope")},
			{cmd: "LIST_OFFSETS", err: verr("missing_topic", cValidation, false, "command", "LIST_OFFSETS")},
		})
	})

	t.Run("CLUSTER_STATUS and ELECT_LEADER", func(t *testing.T) {
		raw, err := cl.ClusterStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := bbJSON(t, "CLUSTER_STATUS", raw)
		for _, k := range []string{"brokers", "raft_leader", "partitions", "leaderless_partitions", "under_replicated_partitions"} {
			if _, ok := st[k]; !ok {
				t.Fatalf("CLUSTER_STATUS lacks %s: %s", k, raw)
			}
		}
		if n, _ := st["leaderless_partitions"].(float64); n != 0 {
			t.Fatalf("leaderless partitions %v", n)
		}
		d, err := cl.Describe(ctx, "adm")
		if err != nil {
			t.Fatal(err)
		}
		broker := d.Partitions[0].Replicas[0]
		r, err := cl.ElectLeader(ctx, "adm", 0, broker)
		if err != nil {
			t.Fatal(err)
		}
		if r.Value("leader") != broker || r.Value("previous_leader") != broker || r.Value("changed") != "false" || r.Value("leader_epoch") == "" {
			t.Fatalf("ELECT_LEADER same leader: %s", r.Text)
		}
		// Idempotent retry against the selected leader.
		r2, err := cl.ElectLeader(ctx, "adm", 0, broker)
		if err != nil || r2.Value("leader_epoch") != r.Value("leader_epoch") {
			t.Fatalf("ELECT_LEADER retry: %v %s vs %s", err, r2.Text, r.Text)
		}
		// Another live broker that is not a replica is rejected.
		var coord string
		for _, b := range st["brokers"].(map[string]any)["active"].([]any) {
			if bm := b.(map[string]any); bm["role"] == "coordinatord" {
				coord, _ = bm["id"].(string)
			}
		}
		if coord == "" {
			t.Fatalf("no active coordinatord in %s", raw)
		}
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "ELECT_LEADER topic=adm partition=0 broker=" + coord, err: verr("leader_election_rejected", cConflict, false)},
			{cmd: "ELECT_LEADER topic=adm partition=0", err: verr("missing_broker", cValidation, false)},
			{cmd: "ELECT_LEADER topic=adm partition=9 broker=" + broker, err: verr("partition_not_found", cNotFound, false)},
			{cmd: "ELECT_LEADER topic=nope partition=0 broker=" + broker, err: verr("topic_not_found", cNotFound, false)},
			{cmd: "ELECT_LEADER topic=adm broker=" + broker, err: verr("missing_partition", cValidation, false)},
		})
	})

	t.Run("TRUNCATE", func(t *testing.T) {
		cur := bbOK(t, ctx, cl, "CREATE topic=adm")
		rev, _ := strconv.Atoi(cur["revision"])
		epoch, _ := strconv.Atoi(cur["lifecycle_epoch"])
		bbRun(t, ctx, cl, []bbCase{
			{cmd: fmt.Sprintf("TRUNCATE topic=adm expected_revision=%d", rev-1), err: verr("version_conflict", cConflict, false, "current", strconv.Itoa(rev), "expected", strconv.Itoa(rev-1))},
			{cmd: "TRUNCATE topic=adm", err: verr("missing_expected_revision", cValidation, false)},
			{cmd: "TRUNCATE expected_revision=1", err: verr("missing_topic", cValidation, false)},
			{cmd: "TRUNCATE topic=nope expected_revision=1", err: verr("topic_not_found", cNotFound, false)},
			{cmd: "TRUNCATE topic=__consumer_offsets expected_revision=1", err: verr("internal_topic_delete_forbidden", cAuthz, false)},
			{cmd: fmt.Sprintf("TRUNCATE topic=adm expected_revision=%d", rev), prefix: "OK", fields: map[string]string{
				"topic": "adm", "truncated": "true", "revision": strconv.Itoa(rev + 1), "lifecycle_epoch": strconv.Itoa(epoch + 1), "leo": "0", "hwm": "0"}},
		})
		// partitiond applies the new lifecycle epoch asynchronously; see
		// TestBlackboxBugTruncateThenListOffsetsStale for the read right after
		// the answer. Here: every partition reaches leo 0 / hwm 0.
		bbEventually(t, 5*time.Second, "offsets reset by TRUNCATE", func() (bool, string) {
			for p, o := range bbOffsets(t, ctx, cl, "adm") {
				if o.LEO != 0 || o.HWM != 0 || o.Latest != 0 {
					return false, fmt.Sprintf("P%d: %+v", p, o)
				}
			}
			return true, ""
		})
		// New records start again at offset 0 and the old ones are gone.
		var ack wire.AckResponse
		retry(t, ctx, func() (err error) {
			ack, err = cl.Publish(ctx, client.PublishRequest{Topic: "adm", Partition: 0, Acks: "1", ProducerID: "p", Message: "after"})
			return err
		})
		if ack.LastOffset != 0 {
			t.Fatalf("first offset after truncate %d", ack.LastOffset)
		}
		recs := bbConsumeAll(t, ctx, cl, "adm", 0, 0)
		if len(recs) != 1 || string(recs[0].Payload) != "after" {
			t.Fatalf("after truncate read %d records", len(recs))
		}
	})

	t.Run("DELETE", func(t *testing.T) {
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "DELETE topic=__consumer_offsets", err: verr("internal_topic_delete_forbidden", cAuthz, false)},
			{cmd: "DELETE topic=nope", err: verr("topic_not_found", cNotFound, false, "topic", "nope")},
			{cmd: "DELETE topic=nope if_exists=true", prefix: "OK topic=nope deleted=false"},
			{cmd: "DELETE topic=nope if_exists=maybe", err: verr("invalid_if_exists", cValidation, false)},
			{cmd: "DELETE", err: verr("missing_topic", cValidation, false)},
			{cmd: "DELETE topic=adm", prefix: "OK topic=adm deleted=true"},
			{cmd: "DESCRIBE topic=adm", err: verr("topic_not_found", cNotFound, false)},
			{cmd: "METADATA topic=adm", err: verr("topic_not_found", cNotFound, false)},
			{cmd: "PUBLISH topic=adm producerId=p message=x", err: verr("topic_not_found", cNotFound, false)},
			{cmd: "DELETE topic=adm if_exists=true", prefix: "OK topic=adm deleted=false"},
		})
		if deleted, err := cl.DeleteTopic(ctx, "adm.v2_x-y=z", false); err != nil || !deleted {
			t.Fatalf("DeleteTopic: %v %v", deleted, err)
		}
		topics, _ := cl.ListTopics(ctx)
		if contains(topics, "adm") {
			t.Fatalf("deleted topic still listed: %v", topics)
		}
		// Recreation starts at revision 1 with no old data (DELETE is not a
		// truncate). A topic that was never truncated: the truncated case is
		// TestBlackboxBugRecreateAfterTruncateSeesOldIncarnation.
		bbOK(t, ctx, cl, "CREATE topic=adm-del partitions=2")
		retry(t, ctx, func() error {
			_, err := cl.Publish(ctx, client.PublishRequest{Topic: "adm-del", Partition: 0, Acks: "1", ProducerID: "p", Message: "old"})
			return err
		})
		bbOK(t, ctx, cl, "DELETE topic=adm-del")
		var m map[string]string
		retry(t, ctx, func() error {
			r, err := cl.Do(ctx, "CREATE topic=adm-del partitions=1")
			if err == nil {
				m = map[string]string{}
				ok, _ := wire.ParseOK(r.Text())
				for _, f := range ok.Fields {
					m[f.Key] = f.Value
				}
			}
			return err
		})
		if m["revision"] != "1" || m["partitions"] != "1" {
			t.Fatalf("recreated: %v", m)
		}
		if o := bbOffsets(t, ctx, cl, "adm-del")[0]; o.LEO != 0 {
			recs := bbConsumeAll(t, ctx, cl, "adm-del", 0, 0)
			var ps []string
			for _, r := range recs {
				ps = append(ps, string(r.Payload))
			}
			t.Fatalf("recreated topic has old data: %+v records %q", o, ps)
		}
	})

	t.Run("unbuilt and internal commands", func(t *testing.T) {
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "AUTH principal=a token=b", err: verr("UNSUPPORTED_FEATURE", cValidation, false, "command", "AUTH")},
			{cmd: "INIT_PRODUCER_ID transactional_id=t", err: verr("UNSUPPORTED_FEATURE", cValidation, false, "command", "INIT_PRODUCER_ID")},
			{cmd: "BEGIN_TXN transactional_id=t producerId=p epoch=0", err: verr("UNSUPPORTED_FEATURE", cValidation, false, "command", "BEGIN_TXN")},
			{cmd: "APPEND_STREAM topic=adm key=k version=1 payload=x", err: verr("UNSUPPORTED_FEATURE", cValidation, false, "command", "APPEND_STREAM")},
			{cmd: "BROWSE_MESSAGES topic=adm", err: verr("UNSUPPORTED_FEATURE", cValidation, false, "command", "BROWSE_MESSAGES")},
			{cmd: "LIST_CLUSTER", err: verr("UNSUPPORTED_FEATURE", cValidation, false, "command", "LIST_CLUSTER")},
		})
		// Internal commands sent by a client over the wire (the client
		// library refuses to send them, so raw frames).
		raw := bbNegotiate(t, gw, wire.CompressionNone)
		for _, cmd := range []wire.Command{wire.CmdReplicateMessage, wire.CmdRaftApply, wire.CmdInternalBatch, wire.CmdJoinCluster} {
			id, ok := wire.TableA.ID(cmd)
			if !ok {
				t.Fatalf("%s has no id", cmd)
			}
			p, _ := (&wire.Request{}).AppendTo(nil)
			rid := raw.sendFrame(id, p)
			f := raw.mustRead()
			if f.Header.RequestID != rid {
				t.Fatalf("%s: answer for request %d, want %d", cmd, f.Header.RequestID, rid)
			}
			e := bbFrameErr(t, f)
			if e.Code != "internal_command_unauthorized" || e.Class != cAuthz || e.Retryable {
				t.Fatalf("%s: %v", cmd, e)
			}
		}
		// EXIT answers OK and then the server closes the connection.
		raw.sendText("EXIT")
		if f := raw.mustRead(); f.Header.Status != wire.StatusOK || string(f.Payload) != "OK" {
			t.Fatalf("EXIT: %+v %q", f.Header, f.Payload)
		}
		bbExpectClosed(t, raw.nc)
	})
}

// TestBlackboxBugTruncateThenListOffsetsStale: after TRUNCATE answered
// "truncated=true leo=0 hwm=0", a LIST_OFFSETS sent at once through the same
// gateway still reports the pre-truncate offsets (e.g. latest=3 leo=3 hwm=3)
// for a short while, instead of 0 or a retryable lifecycle_epoch_pending:
// read-your-writes after a topic change (docs/gateway.md) does not hold for
// the partition state.
//
// Fixed (regression test): the gateway answers TRUNCATE only once every
// partition leader serves the new lifecycle epoch (bounded wait), and
// partitiond answers LIST_OFFSETS with lifecycle_epoch_pending while its
// view is ahead of the local partition.
func TestBlackboxBugTruncateThenListOffsetsStale(t *testing.T) {
	srv := bbStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := dial(t, ctx, srv.ClientAddr())
	for round := 0; round < 5; round++ {
		topic := fmt.Sprintf("trunc-%d", round)
		rev := bbOK(t, ctx, cl, "CREATE topic="+topic+" partitions=1")["revision"]
		for i := 0; i < 3; i++ {
			retry(t, ctx, func() error {
				_, err := cl.Publish(ctx, client.PublishRequest{Topic: topic, Partition: 0, Acks: "1", ProducerID: "p", Message: "m"})
				return err
			})
		}
		bbOK(t, ctx, cl, "TRUNCATE topic="+topic+" expected_revision="+rev)
		o, err := cl.ListOffsets(ctx, topic, 0)
		if err == nil && (o[0].LEO != 0 || o[0].HWM != 0) {
			t.Fatalf("round %d: LIST_OFFSETS right after TRUNCATE: %+v", round, o[0])
		}
	}
}

// TestBlackboxBugRecreateAfterTruncateSeesOldIncarnation: a topic that was
// truncated (lifecycle_epoch 2), then deleted and recreated (revision 1,
// lifecycle_epoch 1), is served for a while by partitiond's partition of the
// old incarnation: LIST_OFFSETS reports the old records (leo 1) and CONSUME
// answers the non-retryable stale_lifecycle_epoch (current=2 got=1).
//
// Reproduction (about 1 in 2 rounds on the loaded VM): CREATE topic=x
// partitions=3; PUBLISH partition=0; TRUNCATE expected_revision=1; PUBLISH
// partition=0; DELETE topic=x; CREATE topic=x partitions=1 (after
// topic_cleanup_pending clears); LIST_OFFSETS topic=x partition=0 -> leo=1,
// CONSUME -> stale_lifecycle_epoch current=2 got=1, still after 10 s.
// A variant answers LIST_OFFSETS with a non-retryable topic_not_found
// ("unknown topic") right after the recreate.
//
// Fixed (regression test): the truncate's cleanup report, still in flight
// when the DELETE committed, counted as the delete cleanup (same lifecycle
// epoch), so metad removed the topic while partitiond kept the old
// partitions; DELETE now starts a lifecycle epoch of its own. The
// topic_not_found variant was partitiond's view lagging the gateway's;
// partitiond now waits briefly (view_catch_up) for a topic it does not list.
func TestBlackboxBugRecreateAfterTruncateSeesOldIncarnation(t *testing.T) {
	srv := bbStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := dial(t, ctx, srv.ClientAddr())
	for round := 0; round < 4; round++ {
		topic := fmt.Sprintf("reinc-%d", round)
		rev := bbOK(t, ctx, cl, "CREATE topic="+topic+" partitions=3")["revision"]
		pub := func(msg string) {
			retry(t, ctx, func() error {
				_, err := cl.Publish(ctx, client.PublishRequest{Topic: topic, Partition: 0, Acks: "1", ProducerID: "p", Message: msg})
				return err
			})
		}
		pub("before")
		bbOK(t, ctx, cl, "TRUNCATE topic="+topic+" expected_revision="+rev)
		bbEventually(t, 5*time.Second, "truncate applied", func() (bool, string) {
			o, err := cl.ListOffsets(ctx, topic, 0)
			return err == nil && o[0].LEO == 0, fmt.Sprint(o, err)
		})
		pub("after-truncate")
		bbOK(t, ctx, cl, "DELETE topic="+topic)
		retry(t, ctx, func() error { _, err := cl.Do(ctx, "CREATE topic="+topic+" partitions=1"); return err })
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			o, err := cl.ListOffsets(ctx, topic, 0)
			if err == nil && o[0].LEO != 0 {
				t.Fatalf("round %d: recreated topic reports the old incarnation's offsets %+v; %s", round, o[0], bbSettles(ctx, cl, topic))
			}
			if err != nil && !errcodeRetryable(err) {
				t.Fatalf("round %d: LIST_OFFSETS on the recreated topic: %v", round, err)
			}
			b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: 0, Offset: 0, Member: "m"})
			if err == nil && len(b.Records) != 0 {
				t.Fatalf("round %d: recreated topic returns old record %q", round, b.Records[0].Payload)
			}
			if err != nil && !errcodeRetryable(err) {
				t.Fatalf("round %d: CONSUME on the recreated topic: %v; %s", round, err, bbSettles(ctx, cl, topic))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// bbSettles reports whether a recreated topic's partition 0 becomes clean
// (leo 0, CONSUME ok) within 10 s, for the bug report.
func bbSettles(ctx context.Context, cl *client.Client, topic string) string {
	start := time.Now()
	var last string
	for time.Since(start) < 10*time.Second {
		o, err := cl.ListOffsets(ctx, topic, 0)
		_, cerr := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: 0, Offset: 0, Member: "m"})
		if err == nil && o[0].LEO == 0 && cerr == nil {
			return fmt.Sprintf("settled after %v", time.Since(start).Round(time.Millisecond))
		}
		last = fmt.Sprint(o, err, cerr)
		time.Sleep(100 * time.Millisecond)
	}
	return "still wrong after 10s: " + last
}

// TestBlackboxHealthyDeleteAndTruncateSayNoCleanupPending: spec 3.1/4.4 add
// cleanup_pending=true to a DELETE or TRUNCATE answer only "when node-local
// storage cleanup must be retried". On a healthy all-in-one the cleanup
// finishes within the command's short wait, so neither answer carries it
// (the flag while cleanup is really outstanding is checked in
// gateway/server TestDeleteSaysCleanupPendingOnlyWhileOutstanding).
func TestBlackboxHealthyDeleteAndTruncateSayNoCleanupPending(t *testing.T) {
	srv := bbStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := dial(t, ctx, srv.ClientAddr())
	rev := bbOK(t, ctx, cl, "CREATE topic=cp partitions=1")["revision"]
	bbOffsets(t, ctx, cl, "cp")
	if m := bbOK(t, ctx, cl, "TRUNCATE topic=cp expected_revision="+rev); m["cleanup_pending"] != "" {
		t.Fatalf("TRUNCATE on a healthy node: %v", m)
	}
	if m := bbOK(t, ctx, cl, "DELETE topic=cp"); m["cleanup_pending"] != "" {
		t.Fatalf("DELETE on a healthy node: %v", m)
	}
}
