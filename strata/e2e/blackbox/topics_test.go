package blackbox

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// topicAdmin drives the topic administration commands of spec 4.4 (CREATE
// with the patch rules, ALTER_TOPIC_CONFIG, DELETE, TRUNCATE, LIST, HELP,
// DESCRIBE, METADATA, LIST_OFFSETS, CLUSTER_STATUS, ELECT_LEADER) and every
// error code each can produce, over the wire.
func topicAdmin(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 90*time.Second)
	gw := c.Gateways()[0].ClientAddr
	// A replication factor above the live partition servers is refused:
	// 3 on the all-in-one's one partitiond, one more than the partition
	// servers of a larger deployment.
	pds := activeBrokers(t, ctx, cl, "partitiond")
	tooMany := strconv.Itoa(max(3, pds+1))
	// Deployments of three or more partition servers run replication
	// factor 3 and min ISR 2 (compose, Kubernetes and the process cluster
	// configure it); the all-in-one runs 1 and 1.
	rf, minISR := "1", "1"
	if pds >= 3 {
		rf, minISR = "3", "2"
	}

	t.Run("CREATE and patch rules", func(t *testing.T) {
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "CREATE topic=adm partitions=2", Prefix: "OK topic=adm ", Fields: map[string]string{
				"partitions": "2", "revision": "1", "cleanup_policy": "delete", "partitioner": "hash_key",
				"auth_policy": "open", "read_acl": "", "write_acl": "", "retention_hours": "0", "retention_bytes": "0",
				"replication_factor": rf, "idempotent": "false", "event_sourcing": "false", "lifecycle_epoch": "*",
				"min_in_sync_replicas": "default", "effective_min_in_sync_replicas": minISR}},
			// A changed field set bumps the revision; omitted fields keep their value.
			{Cmd: "CREATE topic=adm partitions=3 retention_hours=5", Prefix: "OK", Fields: map[string]string{"partitions": "3", "retention_hours": "5", "revision": "2", "cleanup_policy": "delete"}},
			// Nothing changes: same revision.
			{Cmd: "CREATE topic=adm partitions=3 retention_hours=5", Prefix: "OK", Fields: map[string]string{"revision": "2"}},
			{Cmd: "CREATE topic=adm", Prefix: "OK", Fields: map[string]string{"revision": "2", "partitions": "3"}},
			// Explicit 0 is applied.
			{Cmd: "CREATE topic=adm retention_hours=0", Prefix: "OK", Fields: map[string]string{"retention_hours": "0", "revision": "3"}},
			// Immutable fields may be restated with their current value.
			{Cmd: "CREATE topic=adm replication_factor=" + rf + " idempotent=false event_sourcing=false", Prefix: "OK", Fields: map[string]string{"revision": "3"}},
			{Cmd: "CREATE topic=adm partitioner=round_robin auth_policy=acl read_acl=alice,bob write_acl=*", Prefix: "OK", Fields: map[string]string{
				"partitioner": "round_robin", "auth_policy": "acl", "read_acl": "alice,bob", "write_acl": "*", "revision": "4"}},
			{Cmd: "CREATE topic=adm partitioner=hash_key auth_policy=open", Prefix: "OK", Fields: map[string]string{"revision": "5", "read_acl": "alice,bob"}},
			// partitiond advertises topic lifecycle protocol 2, so compacted
			// policies are accepted for application topics (spec 4.4 rule 4);
			// an omitted policy keeps the current one.
			{Cmd: "CREATE topic=adm cleanup_policy=compact", Prefix: "OK", Fields: map[string]string{"revision": "6", "cleanup_policy": "compact"}},
			{Cmd: "CREATE topic=adm cleanup_policy=delete,compact", Prefix: "OK", Fields: map[string]string{"revision": "7", "cleanup_policy": "delete,compact"}},
			{Cmd: "CREATE topic=adm", Prefix: "OK", Fields: map[string]string{"revision": "7", "cleanup_policy": "delete,compact"}},
			{Cmd: "CREATE topic=adm cleanup_policy=delete", Prefix: "OK", Fields: map[string]string{"revision": "8", "cleanup_policy": "delete"}},
			{Cmd: "CREATE topic=adm.v2_x-y=z partitions=1", Prefix: "OK", Fields: map[string]string{"topic": "adm.v2_x-y=z", "revision": "1"}},
			{Cmd: "CREATE topic=" + strings.Repeat("n", 249) + " partitions=1", Prefix: "OK", Fields: map[string]string{"revision": "1"}},
			// Errors.
			{Cmd: "CREATE topic=adm partitions=2", Err: framework.Want("partition_count_decrease", cValidation, false, "current", "3", "requested", "2")},
			{Cmd: "CREATE topic=adm replication_factor=2", Err: framework.Want("immutable_topic_field", cValidation, false, "field", "replication_factor")},
			{Cmd: "CREATE topic=adm idempotent=true", Err: framework.Want("immutable_topic_field", cValidation, false, "field", "idempotent")},
			{Cmd: "CREATE topic=adm event_sourcing=true", Err: framework.Want("immutable_topic_field", cValidation, false, "field", "event_sourcing")},
			{Cmd: "CREATE topic=bad/name", Err: framework.Want("invalid_topic_name", cValidation, false, "topic", "bad/name")},
			{Cmd: "CREATE topic=..", Err: framework.Want("invalid_topic_name", cValidation, false, "topic", "..")},
			{Cmd: "CREATE topic=.", Err: framework.Want("invalid_topic_name", cValidation, false, "topic", ".")},
			{Cmd: "CREATE topic=" + strings.Repeat("n", 250), Err: framework.Want("invalid_topic_name", cValidation, false)},
			{Cmd: "CREATE topic=caf\u00e9", Err: framework.Want("invalid_topic_name", cValidation, false)},
			{Cmd: "CREATE partitions=2", Err: framework.Want("missing_topic", cValidation, false)},
			{Cmd: "CREATE topic=adm2 partitions=abc", Err: framework.Want("invalid_parameter", cValidation, false, "param", "partitions")},
			{Cmd: "CREATE topic=adm2 partitions=0", Err: framework.Want("invalid_parameter", cValidation, false, "param", "partitions")},
			{Cmd: "CREATE topic=adm2 idempotent=maybe", Err: framework.Want("invalid_parameter", cValidation, false, "param", "idempotent")},
			{Cmd: "CREATE topic=adm2 retention_hours=-1", Err: framework.Want("invalid_parameter", cValidation, false, "param", "retention_hours")},
			{Cmd: "CREATE topic=adm2 cleanup_policy=foo", Err: framework.Want("invalid_topic_policy", cValidation, false)},
			{Cmd: "CREATE topic=adm2 event_sourcing=true cleanup_policy=compact", Err: framework.Want("invalid_topic_policy", cValidation, false)},
			{Cmd: "CREATE topic=adm2 event_sourcing=true cleanup_policy=delete,compact", Err: framework.Want("invalid_topic_policy", cValidation, false)},
			{Cmd: "CREATE topic=adm2 partitioner=foo", Err: framework.Want("invalid_parameter", cValidation, false, "param", "partitioner")},
			{Cmd: "CREATE topic=adm2 auth_policy=foo", Err: framework.Want("invalid_parameter", cValidation, false, "param", "auth_policy")},
			{Cmd: "CREATE topic=adm2 replication_factor=" + tooMany, Err: framework.Want("invalid_replication_factor", cValidation, false, "replication_factor", tooMany)},
			{Cmd: "CREATE topic=adm2 min_in_sync_replicas=4", Err: framework.Want("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
		})
		// A failed CREATE created nothing.
		framework.RunCases(t, ctx, cl, []framework.Case{{Cmd: "DESCRIBE topic=adm2", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "adm2")}})
		// The 249-byte name was accepted; its partition never opens
		// (bugMaxLengthTopicNeverOpens), so delete it again: the deployment
		// is shared with the scenarios after this one and must stay ready.
		framework.OK(t, ctx, cl, "DELETE topic="+strings.Repeat("n", 249))
	})

	t.Run("explicit empty ACL is applied", func(t *testing.T) {
		before := framework.OK(t, ctx, cl, "CREATE topic=adm read_acl=carol")
		if before["read_acl"] != "carol" {
			t.Fatalf("read_acl %q", before["read_acl"])
		}
		rev, _ := strconv.Atoi(before["revision"])
		// The CRQ2 request carries read_acl with an empty value (the text
		// form cannot express it, so it is built by hand).
		req := &wire.Request{Fields: []wire.Field{{Key: "topic", Value: "adm"}, {Key: "read_acl", Value: ""}}}
		raw := framework.Negotiate(t, gw, wire.CompressionNone)
		p, err := req.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := wire.TableA.ID(wire.CmdCreate)
		raw.SendFrame(id, p)
		f := raw.MustRead()
		if f.Header.Status != wire.StatusOK {
			t.Fatalf("CREATE read_acl=<empty>: %v", framework.FrameErr(t, f))
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
		rev, _ := strconv.Atoi(framework.OK(t, ctx, cl, "CREATE topic=adm")["revision"])
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=1", Prefix: "OK", Fields: map[string]string{"topic": "adm", "min_in_sync_replicas": "1", "effective_min_in_sync_replicas": "1", "revision": strconv.Itoa(rev + 1)}},
			{Cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=default", Prefix: "OK", Fields: map[string]string{"min_in_sync_replicas": "default", "effective_min_in_sync_replicas": minISR, "revision": strconv.Itoa(rev + 2)}},
			{Cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=4", Err: framework.Want("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
			{Cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=0", Err: framework.Want("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
			{Cmd: "ALTER_TOPIC_CONFIG topic=adm min_in_sync_replicas=x", Err: framework.Want("invalid_parameter", cValidation, false, "param", "min_in_sync_replicas")},
			{Cmd: "ALTER_TOPIC_CONFIG topic=nope min_in_sync_replicas=1", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
			{Cmd: "ALTER_TOPIC_CONFIG min_in_sync_replicas=1", Err: framework.Want("missing_topic", cValidation, false)},
			{Cmd: "ALTER_TOPIC_CONFIG topic=adm", Err: framework.Want("missing_min_in_sync_replicas", cValidation, false)},
		})
		// The override is visible through CREATE's answer (no-op patch).
		if got := framework.OK(t, ctx, cl, "CREATE topic=adm")["min_in_sync_replicas"]; got != "default" {
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
			if !slices.Contains(topics, want) {
				t.Fatalf("LIST %v lacks %s", topics, want)
			}
		}
		for _, tp := range topics {
			if strings.HasPrefix(tp, "__") {
				t.Fatalf("LIST shows internal topic %s", tp)
			}
		}
		lst := framework.OK(t, ctx, cl, "LIST")
		if lst["count"] != strconv.Itoa(len(topics)) {
			t.Fatalf("LIST count %s, topics %v", lst["count"], topics)
		}

		help := framework.OK(t, ctx, cl, "HELP")["commands"]
		names := strings.Split(help, ",")
		for _, want := range []string{"CREATE", "ALTER_TOPIC_CONFIG", "DELETE", "TRUNCATE", "LIST", "HELP", "DESCRIBE", "METADATA",
			"LIST_OFFSETS", "CLUSTER_STATUS", "ELECT_LEADER", "PUBLISH", "CONSUME", "STREAM", "JOIN_GROUP", "SYNC_GROUP",
			"HEARTBEAT", "LEAVE_GROUP", "COMMIT_OFFSET", "FETCH_OFFSET", "BATCH_COMMIT", "GROUP_STATUS", "FIND_COORDINATOR",
			"LIST_GROUPS", "REGISTER_GROUP", "EXIT", "DELETE_GROUP", "RESET_OFFSETS"} {
			if !slices.Contains(names, want) {
				t.Fatalf("HELP lacks %s: %s", want, help)
			}
		}
		for _, bad := range []string{"NEGOTIATE", "REPLICATE_MESSAGE", "RAFT_APPLY", "INTERNAL_BATCH", "JOIN_CLUSTER"} {
			if slices.Contains(names, bad) {
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
			if !framework.IsGateway(c, l) {
				t.Fatalf("METADATA leader %s, want a gateway address %v", l, framework.ClientAddrs(c))
			}
		}
		m := framework.OK(t, ctx, cl, "METADATA topic=adm")
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
			strconv.Itoa(d.Definition.ReplicationFactor) != rf || d.Definition.Policy.Partitioner != "hash_key" || len(d.Partitions) != 3 {
			t.Fatalf("DESCRIBE %s", d.Raw)
		}
		for i, p := range d.Partitions {
			if p.ID != int32(i) || !framework.IsGateway(c, p.Leader) || strconv.Itoa(len(p.Replicas)) != rf || strconv.Itoa(len(p.ISR)) != rf {
				t.Fatalf("DESCRIBE partition %d: %+v", i, p)
			}
		}
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "DESCRIBE topic=nope", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
			{Cmd: "DESCRIBE", Err: framework.Want("missing_topic", cValidation, false)},
			{Cmd: "METADATA topic=nope", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
			{Cmd: "METADATA", Err: framework.Want("missing_topic", cValidation, false)},
		})
	})

	t.Run("LIST_OFFSETS", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			publishRetrying(t, ctx, cl, "adm", fmt.Sprintf("m%d", i))
		}
		offs := framework.Offsets(t, ctx, cl, "adm")
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
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "LIST_OFFSETS topic=adm partition=0", Prefix: "OK", Fields: map[string]string{"topic": "adm", "offsets": "P0:earliest=0:latest=3:leo=3:hwm=3"}},
			{Cmd: "LIST_OFFSETS topic=adm partition=9", Err: framework.Want("partition_not_found", cNotFound, false, "partition", "9")},
			{Cmd: "LIST_OFFSETS topic=adm partition=x", Err: framework.Want("invalid_partition", cValidation, false, "command", "LIST_OFFSETS")},
			{Cmd: "LIST_OFFSETS topic=adm partition=-1", Err: framework.Want("invalid_partition", cValidation, false, "command", "LIST_OFFSETS")},
			{Cmd: "LIST_OFFSETS topic=nope", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
			{Cmd: "LIST_OFFSETS", Err: framework.Want("missing_topic", cValidation, false, "command", "LIST_OFFSETS")},
		})
	})

	t.Run("CLUSTER_STATUS and ELECT_LEADER", func(t *testing.T) {
		raw, err := cl.ClusterStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := framework.JSON(t, "CLUSTER_STATUS", raw)
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
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "ELECT_LEADER topic=adm partition=0 broker=" + coord, Err: framework.Want("leader_election_rejected", cConflict, false)},
			{Cmd: "ELECT_LEADER topic=adm partition=0", Err: framework.Want("missing_broker", cValidation, false)},
			// A broker id no node has is not an active broker of the
			// partition (spec 4.4): rejected, not missing_broker, which is
			// the absent parameter.
			{Cmd: "ELECT_LEADER topic=adm partition=0 broker=ghost", Err: framework.Want("leader_election_rejected", cConflict, false)},
			{Cmd: "ELECT_LEADER topic=adm partition=9 broker=" + broker, Err: framework.Want("partition_not_found", cNotFound, false)},
			{Cmd: "ELECT_LEADER topic=nope partition=0 broker=" + broker, Err: framework.Want("topic_not_found", cNotFound, false)},
			{Cmd: "ELECT_LEADER topic=adm broker=" + broker, Err: framework.Want("missing_partition", cValidation, false)},
		})
	})

	t.Run("TRUNCATE", func(t *testing.T) {
		cur := framework.OK(t, ctx, cl, "CREATE topic=adm")
		rev, _ := strconv.Atoi(cur["revision"])
		epoch, _ := strconv.Atoi(cur["lifecycle_epoch"])
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: fmt.Sprintf("TRUNCATE topic=adm expected_revision=%d", rev-1), Err: framework.Want("version_conflict", cConflict, false, "current", strconv.Itoa(rev), "expected", strconv.Itoa(rev-1))},
			{Cmd: "TRUNCATE topic=adm", Err: framework.Want("missing_expected_revision", cValidation, false)},
			{Cmd: "TRUNCATE expected_revision=1", Err: framework.Want("missing_topic", cValidation, false)},
			{Cmd: "TRUNCATE topic=nope expected_revision=1", Err: framework.Want("topic_not_found", cNotFound, false)},
			{Cmd: "TRUNCATE topic=__consumer_offsets expected_revision=1", Err: framework.Want("internal_topic_delete_forbidden", cAuthz, false)},
			{Cmd: fmt.Sprintf("TRUNCATE topic=adm expected_revision=%d", rev), Prefix: "OK", Fields: map[string]string{
				"topic": "adm", "truncated": "true", "revision": strconv.Itoa(rev + 1), "lifecycle_epoch": strconv.Itoa(epoch + 1), "leo": "0", "hwm": "0"}},
		})
		// partitiond applies the new lifecycle epoch asynchronously; see
		// bugTruncateThenListOffsetsStale for the read right after
		// the answer. Here: every partition reaches leo 0 / hwm 0.
		framework.Eventually(t, 5*time.Second, "offsets reset by TRUNCATE", func() (bool, string) {
			for p, o := range framework.Offsets(t, ctx, cl, "adm") {
				if o.LEO != 0 || o.HWM != 0 || o.Latest != 0 {
					return false, fmt.Sprintf("P%d: %+v", p, o)
				}
			}
			return true, ""
		})
		// New records start again at offset 0 and the old ones are gone.
		if ack := publishRetrying(t, ctx, cl, "adm", "after"); ack.LastOffset != 0 {
			t.Fatalf("first offset after truncate %d", ack.LastOffset)
		}
		recs := framework.ConsumeAll(t, ctx, cl, "adm", 0, 0)
		if len(recs) != 1 || string(recs[0].Payload) != "after" {
			t.Fatalf("after truncate read %d records", len(recs))
		}
	})

	t.Run("DELETE", func(t *testing.T) {
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "DELETE topic=__consumer_offsets", Err: framework.Want("internal_topic_delete_forbidden", cAuthz, false)},
			{Cmd: "DELETE topic=nope", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
			{Cmd: "DELETE topic=nope if_exists=true", Prefix: "OK topic=nope deleted=false"},
			{Cmd: "DELETE topic=nope if_exists=maybe", Err: framework.Want("invalid_if_exists", cValidation, false)},
			{Cmd: "DELETE", Err: framework.Want("missing_topic", cValidation, false)},
			{Cmd: "DELETE topic=adm", Prefix: "OK topic=adm deleted=true"},
			{Cmd: "DESCRIBE topic=adm", Err: framework.Want("topic_not_found", cNotFound, false)},
			{Cmd: "METADATA topic=adm", Err: framework.Want("topic_not_found", cNotFound, false)},
			{Cmd: "PUBLISH topic=adm producerId=p message=x", Err: framework.Want("topic_not_found", cNotFound, false)},
			{Cmd: "DELETE topic=adm if_exists=true", Prefix: "OK topic=adm deleted=false"},
		})
		if deleted, err := cl.DeleteTopic(ctx, "adm.v2_x-y=z", false); err != nil || !deleted {
			t.Fatalf("DeleteTopic: %v %v", deleted, err)
		}
		topics, _ := cl.ListTopics(ctx)
		if slices.Contains(topics, "adm") {
			t.Fatalf("deleted topic still listed: %v", topics)
		}
		// Recreation starts at revision 1 with no old data (DELETE is not a
		// truncate). A topic that was never truncated: the truncated case is
		// bugRecreateAfterTruncateSeesOldIncarnation.
		framework.OK(t, ctx, cl, "CREATE topic=adm-del partitions=2")
		publishRetrying(t, ctx, cl, "adm-del", "old")
		framework.OK(t, ctx, cl, "DELETE topic=adm-del")
		var m map[string]string
		framework.Retry(t, ctx, func() error {
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
		if o := framework.Offsets(t, ctx, cl, "adm-del")[0]; o.LEO != 0 {
			recs := framework.ConsumeAll(t, ctx, cl, "adm-del", 0, 0)
			var ps []string
			for _, r := range recs {
				ps = append(ps, string(r.Payload))
			}
			t.Fatalf("recreated topic has old data: %+v records %q", o, ps)
		}
	})

	t.Run("unbuilt and internal commands", func(t *testing.T) {
		framework.CreateTopics(t, ctx, cl, "topic=adm-plain partitions=1")
		framework.RunCases(t, ctx, cl, []framework.Case{
			// The suite's clusters run without enable_sasl: AUTH says so.
			{Cmd: "AUTH principal=a token=b", Err: framework.Want("authentication_failed", cAuthz, false, "reason", "authentication_disabled")},
			{Cmd: "BEGIN_TXN transactional_id=never-initialised producerId=p epoch=1", Err: framework.Want("transaction_not_found", cNotFound, false, "transactional_id", "never-initialised")},
			{Cmd: "TXN_APPEND_STREAM transactional_id=t producerId=p epoch=1 seqNum=1 topic=adm-plain key=k version=1 message=x", Err: framework.Want("event_sourcing_not_enabled", cValidation, false, "topic", "adm-plain")},
		})
		// Internal commands sent by a client over the wire (the client
		// library refuses to send them, so raw frames).
		raw := framework.Negotiate(t, gw, wire.CompressionNone)
		for _, cmd := range []wire.Command{wire.CmdReplicateMessage, wire.CmdRaftApply, wire.CmdInternalBatch, wire.CmdJoinCluster} {
			id, ok := wire.TableA.ID(cmd)
			if !ok {
				t.Fatalf("%s has no id", cmd)
			}
			p, _ := (&wire.Request{}).AppendTo(nil)
			rid := raw.SendFrame(id, p)
			f := raw.MustRead()
			if f.Header.RequestID != rid {
				t.Fatalf("%s: answer for request %d, want %d", cmd, f.Header.RequestID, rid)
			}
			e := framework.FrameErr(t, f)
			if e.Code != "internal_command_unauthorized" || e.Class != cAuthz || e.Retryable {
				t.Fatalf("%s: %v", cmd, e)
			}
		}
		// Spec 4.9: a request carrying internal_token meets a node with no
		// internal_auth_token configured (Strata's internal hops are mTLS).
		for _, cmd := range []wire.Command{wire.CmdListSnapshots, wire.CmdFetchSnapshot, wire.CmdCatchupSnapshots, wire.CmdReplicateSnapshot, wire.CmdReplicateMessage} {
			id, _ := wire.TableA.ID(cmd)
			req := &wire.Request{}
			req.Add("topic", "adm")
			req.Add("internal_token", "guess")
			p, _ := req.AppendTo(nil)
			rid := raw.SendFrame(id, p)
			f := raw.MustRead()
			e := framework.FrameErr(t, f)
			if f.Header.RequestID != rid || e.Code != "internal_auth_not_configured" || e.Class != cAuthz || e.Retryable || e.Field("command") != cmd.String() {
				t.Fatalf("%s with internal_token: %v", cmd, e)
			}
		}
		// EXIT answers OK and then the server closes the connection.
		raw.SendText("EXIT")
		if f := raw.MustRead(); f.Header.Status != wire.StatusOK || string(f.Payload) != "OK" {
			t.Fatalf("EXIT: %+v %q", f.Header, f.Payload)
		}
		framework.ExpectClosed(t, raw.Conn)
	})
}

// bugTruncateThenListOffsetsStale: after TRUNCATE answered
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
func bugTruncateThenListOffsetsStale(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 60*time.Second)
	for round := 0; round < 5; round++ {
		topic := fmt.Sprintf("trunc-%d", round)
		rev := framework.OK(t, ctx, cl, "CREATE topic="+topic+" partitions=1")["revision"]
		for i := 0; i < 3; i++ {
			publishRetrying(t, ctx, cl, topic, "m")
		}
		framework.OK(t, ctx, cl, "TRUNCATE topic="+topic+" expected_revision="+rev)
		o, err := cl.ListOffsets(ctx, topic, 0)
		if err == nil && (o[0].LEO != 0 || o[0].HWM != 0) {
			t.Fatalf("round %d: LIST_OFFSETS right after TRUNCATE: %+v", round, o[0])
		}
	}
}

// bugRecreateAfterTruncateSeesOldIncarnation: a topic that was
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
func bugRecreateAfterTruncateSeesOldIncarnation(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 60*time.Second)
	for round := 0; round < 4; round++ {
		topic := fmt.Sprintf("reinc-%d", round)
		rev := framework.OK(t, ctx, cl, "CREATE topic="+topic+" partitions=3")["revision"]
		publishRetrying(t, ctx, cl, topic, "before")
		framework.OK(t, ctx, cl, "TRUNCATE topic="+topic+" expected_revision="+rev)
		framework.Eventually(t, 5*time.Second, "truncate applied", func() (bool, string) {
			o, err := cl.ListOffsets(ctx, topic, 0)
			return err == nil && o[0].LEO == 0, fmt.Sprint(o, err)
		})
		publishRetrying(t, ctx, cl, topic, "after-truncate")
		framework.OK(t, ctx, cl, "DELETE topic="+topic)
		framework.Retry(t, ctx, func() error { _, err := cl.Do(ctx, "CREATE topic="+topic+" partitions=1"); return err })
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			o, err := cl.ListOffsets(ctx, topic, 0)
			if err == nil && o[0].LEO != 0 {
				t.Fatalf("round %d: recreated topic reports the old incarnation's offsets %+v; %s", round, o[0], settles(ctx, cl, topic))
			}
			if err != nil && !errcode.IsRetryable(err) {
				t.Fatalf("round %d: LIST_OFFSETS on the recreated topic: %v", round, err)
			}
			b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: 0, Offset: 0, Member: "m"})
			if err == nil && len(b.Records) != 0 {
				t.Fatalf("round %d: recreated topic returns old record %q", round, b.Records[0].Payload)
			}
			if err != nil && !errcode.IsRetryable(err) {
				t.Fatalf("round %d: CONSUME on the recreated topic: %v; %s", round, err, settles(ctx, cl, topic))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// settles reports whether a recreated topic's partition 0 becomes clean
// (leo 0, CONSUME ok) within 10 s, for the bug report.
func settles(ctx context.Context, cl *client.Client, topic string) string {
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

// healthyDeleteAndTruncateSayNoCleanupPending: spec 3.1/4.4 add
// cleanup_pending=true to a DELETE or TRUNCATE answer only "when node-local
// storage cleanup must be retried". On a healthy deployment the cleanup
// finishes within the command's short wait, so neither answer carries it
// (the flag while cleanup is really outstanding is checked in
// gateway TestDeleteSaysCleanupPendingOnlyWhileOutstanding).
func healthyDeleteAndTruncateSayNoCleanupPending(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 30*time.Second)
	rev := framework.OK(t, ctx, cl, "CREATE topic=cp partitions=1")["revision"]
	framework.Offsets(t, ctx, cl, "cp")
	if m := framework.OK(t, ctx, cl, "TRUNCATE topic=cp expected_revision="+rev); m["cleanup_pending"] != "" {
		t.Fatalf("TRUNCATE on a healthy node: %v", m)
	}
	if m := framework.OK(t, ctx, cl, "DELETE topic=cp"); m["cleanup_pending"] != "" {
		t.Fatalf("DELETE on a healthy node: %v", m)
	}
}

// bugMaxLengthTopicNeverOpens: a topic name may have 249 bytes (spec 2.1,
// "portable on-disk identifier") and CREATE accepts one, but partitiond
// named the partition's log directory <topic>-<partition>-<lifecycle
// epoch>-<hex nanoseconds>, more than the 255 bytes a file name may have.
// The partition never opened (storage_unavailable "file name too long", so
// the all-in-one's /ready stayed 503), PUBLISH never succeeded, and after a
// DELETE the cleanup never finished: a re-CREATE answered
// topic_cleanup_pending forever.
//
// Fixed (regression test): a name over 100 bytes gets a bounded directory
// name (a prefix, '~' and the SHA-256 of the name; docs/partitiond.md,
// On-disk layout). The topic goes through create, write, read, delete and
// recreate, and the recreated topic is empty.
func bugMaxLengthTopicNeverOpens(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 60*time.Second)
	topic := strings.Repeat("l", 200) + strings.Repeat("=._-", 12) + "z"
	if len(topic) != 249 {
		t.Fatalf("topic of %d bytes", len(topic))
	}
	// Leave the shared deployment ready whatever the outcome.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.DeleteTopic(ctx, topic, true)
	})
	framework.OK(t, ctx, cl, "CREATE topic="+topic+" partitions=1")
	publishRetrying(t, ctx, cl, topic, "first")
	framework.Eventually(t, 10*time.Second, "written record readable", func() (bool, string) {
		b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: 0, Offset: 0, Member: "m"})
		return err == nil && len(b.Records) == 1 && string(b.Records[0].Payload) == "first", fmt.Sprint(b, err)
	})
	if m := framework.OK(t, ctx, cl, "DELETE topic="+topic); m["deleted"] != "true" {
		t.Fatalf("DELETE: %v", m)
	}
	// The recreate is refused (retryable topic_cleanup_pending) only while
	// the delete's cleanup is outstanding, which must end.
	framework.Retry(t, ctx, func() error { _, err := cl.Do(ctx, "CREATE topic="+topic+" partitions=1"); return err })
	framework.Eventually(t, 10*time.Second, "recreated topic empty", func() (bool, string) {
		o, err := cl.ListOffsets(ctx, topic, 0)
		return err == nil && o[0].LEO == 0, fmt.Sprint(o, err)
	})
	publishRetrying(t, ctx, cl, topic, "second")
	framework.Eventually(t, 10*time.Second, "recreated topic holds only the new record", func() (bool, string) {
		b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: 0, Offset: 0, Member: "m"})
		return err == nil && len(b.Records) == 1 && string(b.Records[0].Payload) == "second", fmt.Sprint(b, err)
	})
	for _, g := range c.Gateways() {
		if g.HealthAddr != "" {
			framework.WaitReady(t, g.HealthAddr, 10*time.Second)
		}
	}
}

// publishRetrying publishes msg to partition 0 of topic with acks=all,
// retrying until it is stored (a partition just created, truncated or
// recreated may still be opening), and returns the acknowledgement.
func publishRetrying(t *testing.T, ctx context.Context, cl *client.Client, topic, msg string) wire.AckResponse {
	t.Helper()
	var ack wire.AckResponse
	framework.Retry(t, ctx, func() (err error) {
		ack, err = cl.Publish(ctx, client.PublishRequest{Topic: topic, Partition: 0, Acks: "all", ProducerID: "p", Message: msg})
		return err
	})
	return ack
}

// activeBrokers counts the active brokers of a role in CLUSTER_STATUS: what
// the deployment holds, learnt over the wire like any client would.
func activeBrokers(t *testing.T, ctx context.Context, cl *client.Client, role string) int {
	t.Helper()
	raw, err := cl.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	brokers, _ := framework.JSON(t, "CLUSTER_STATUS", raw)["brokers"].(map[string]any)
	active, _ := brokers["active"].([]any)
	n := 0
	for _, b := range active {
		if bm, _ := b.(map[string]any); bm["role"] == role {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no active %s in CLUSTER_STATUS %s", role, raw)
	}
	return n
}
