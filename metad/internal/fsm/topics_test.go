package fsm

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestValidTopicNameFollowsThePortableContract(t *testing.T) {
	cases := map[string]bool{
		"orders":                 true,
		"a":                      true,
		"A.b_c-d=e9":             true,
		"...":                    true,
		"__consumer_offsets":     true,
		strings.Repeat("x", 249): true,
		"":                       false,
		".":                      false,
		"..":                     false,
		strings.Repeat("x", 250): false,
		"has space":              false,
		"slash/y":                false,
		"colon:y":                false,
		"caf\u00e9":              false,
		"nul\x00":                false,
		"star*":                  false,
		"comma,":                 false,
		"tab\t":                  false,
	}
	for name, want := range cases {
		if got := ValidTopicName(name); got != want {
			t.Errorf("ValidTopicName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCreateTopicAppliesDefaults(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	resp := x.ok(create("orders")).(*metav1.CreateTopicResponse)
	if !resp.GetCreated() || !resp.GetChanged() {
		t.Fatalf("created=%v changed=%v", resp.GetCreated(), resp.GetChanged())
	}
	want := &metav1.TopicConfig{
		Name: "orders", Revision: 1, LifecycleEpoch: 1, Partitions: 4, ReplicationFactor: 3,
		CleanupPolicy: "delete", Partitioner: "hash_key", AuthPolicy: "open", State: metav1.TopicState_TOPIC_STATE_ACTIVE,
	}
	if got := x.topic("orders").GetConfig(); !proto.Equal(got, want) {
		t.Fatalf("config = %v\nwant     %v", got, want)
	}
	if EffectiveMinISR(want, 2) != 2 {
		t.Fatal("no override: the broker default applies")
	}
	for i, p := range x.topic("orders").GetPartitions() {
		if p.GetId() != int32(i) || len(p.GetReplicas()) != 3 || p.GetLeader() != p.GetReplicas()[0] ||
			!slices.Equal(p.GetIsr(), p.GetReplicas()) || p.GetLeaderEpoch() != FirstLeaderEpoch || p.GetCommittedHwm() != 0 {
			t.Fatalf("partition %d = %v", i, p)
		}
	}
}

func TestCreateTopicUsesTheProposersDefaults(t *testing.T) {
	x := newH(t)
	x.partitionds(1)
	cmd := create("solo")
	cmd.Defaults = &metav1.TopicDefaults{ReplicationFactor: 1, CleanupPolicy: "compact"}
	x.ok(cmd)
	cfg := x.topic("solo").GetConfig()
	if cfg.GetReplicationFactor() != 1 || cfg.GetCleanupPolicy() != "compact" {
		t.Fatalf("config = %v", cfg)
	}
}

func TestCreateTopicRejects(t *testing.T) {
	type tc struct {
		name  string
		setup func(x *h)
		cmd   *metav1.CreateTopicCommand
		code  errcode.Code
	}
	existing := func(mods ...func(*metav1.CreateTopicRequest)) func(x *h) {
		return func(x *h) { x.ok(create("t", mods...)) }
	}
	cases := []tc{
		{"EmptyName", nil, create(""), errcode.InvalidTopicName},
		{"DotName", nil, create("."), errcode.InvalidTopicName},
		{"DotDotName", nil, create(".."), errcode.InvalidTopicName},
		{"LongName", nil, create(strings.Repeat("n", 250)), errcode.InvalidTopicName},
		{"SpaceInName", nil, create("a b"), errcode.InvalidTopicName},
		{"NonASCIIName", nil, create("\u00fcber"), errcode.InvalidTopicName},
		{"InternalNameFromClient", nil, create(ConsumerOffsetsTopic), errcode.InternalTopicWriteForbidden},
		{"ZeroPartitions", nil, create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](0) }), errcode.InvalidParameter},
		{"NegativePartitions", nil, create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](-1) }), errcode.InvalidParameter},
		{"TooManyPartitions", nil, create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](MaxPartitions + 1) }), errcode.InvalidParameter},
		{"ZeroReplicationFactor", nil, create("t", func(r *metav1.CreateTopicRequest) { r.ReplicationFactor = ptr[int32](0) }), errcode.InvalidReplicationFactor},
		{"ReplicationFactorAboveLiveServers", nil, create("t", func(r *metav1.CreateTopicRequest) { r.ReplicationFactor = ptr[int32](4) }), errcode.InvalidReplicationFactor},
		{"UnknownCleanupPolicy", nil, create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("forever") }), errcode.InvalidTopicPolicy},
		{"ReorderedCleanupPolicy", nil, create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("compact,delete") }), errcode.InvalidTopicPolicy},
		{"EmptyCleanupPolicy", nil, create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("") }), errcode.InvalidTopicPolicy},
		{"EventSourcingCompact", nil, create("t", func(r *metav1.CreateTopicRequest) {
			r.EventSourcing, r.CleanupPolicy = ptr(true), ptr("compact")
		}), errcode.InvalidTopicPolicy},
		{"EventSourcingDeleteCompact", nil, create("t", func(r *metav1.CreateTopicRequest) {
			r.EventSourcing, r.CleanupPolicy = ptr(true), ptr("delete,compact")
		}), errcode.InvalidTopicPolicy},
		{"CompactWithoutLifecycleV2", func(x *h) { x.register(pnode("p4", 1, 1)) },
			create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("compact") }), errcode.UnsupportedTopicPolicy},
		{"UnknownPartitioner", nil, create("t", func(r *metav1.CreateTopicRequest) { r.Partitioner = ptr("random") }), errcode.InvalidParameter},
		{"UnknownAuthPolicy", nil, create("t", func(r *metav1.CreateTopicRequest) { r.AuthPolicy = ptr("closed") }), errcode.InvalidParameter},
		{"NegativeRetentionHours", nil, create("t", func(r *metav1.CreateTopicRequest) { r.RetentionHours = ptr[int64](-1) }), errcode.InvalidParameter},
		{"NegativeRetentionBytes", nil, create("t", func(r *metav1.CreateTopicRequest) { r.RetentionBytes = ptr[int64](-5) }), errcode.InvalidParameter},
		{"MinISRZero", nil, create("t", func(r *metav1.CreateTopicRequest) { r.MinInSyncReplicas = ptr("0") }), errcode.InvalidParameter},
		{"MinISRAboveReplicationFactor", nil, create("t", func(r *metav1.CreateTopicRequest) { r.MinInSyncReplicas = ptr("4") }), errcode.InvalidParameter},
		{"MinISRNotANumber", nil, create("t", func(r *metav1.CreateTopicRequest) { r.MinInSyncReplicas = ptr("two") }), errcode.InvalidParameter},
		{"MinISREmpty", nil, create("t", func(r *metav1.CreateTopicRequest) { r.MinInSyncReplicas = ptr("") }), errcode.InvalidParameter},
		{"AggregateReplayWithoutEventSourcing", nil, create("t", func(r *metav1.CreateTopicRequest) {
			r.AggregateReplay, r.Idempotent = ptr(true), ptr(true)
		}), errcode.InvalidParameter},
		{"AggregateReplayWithoutIdempotent", nil, create("t", func(r *metav1.CreateTopicRequest) {
			r.AggregateReplay, r.EventSourcing = ptr(true), ptr(true)
		}), errcode.InvalidParameter},
		{"MinISRNegative", nil, create("t", func(r *metav1.CreateTopicRequest) { r.MinInSyncReplicas = ptr("-1") }), errcode.InvalidParameter},
		{"PatchWhileCleanupPending", func(x *h) {
			x.ok(create("t"))
			x.ok(&metav1.DeleteTopicRequest{Name: "t"})
		}, create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](8) }), errcode.TopicCleanupPending},

		// Patches of an existing topic.
		{"PartitionDecrease", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](2) }), errcode.PartitionCountDecrease},
		{"PartitionDecreaseToZero", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](0) }), errcode.PartitionCountDecrease},
		{"ReplicationFactorChange", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.ReplicationFactor = ptr[int32](2) }), errcode.ImmutableTopicField},
		{"IdempotentChange", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.Idempotent = ptr(true) }), errcode.ImmutableTopicField},
		{"EventSourcingChange", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.EventSourcing = ptr(true) }), errcode.ImmutableTopicField},
		{"EventSourcingFalseRestatedOnEventSourcingTopic", existing(func(r *metav1.CreateTopicRequest) { r.EventSourcing = ptr(true) }),
			create("t", func(r *metav1.CreateTopicRequest) { r.EventSourcing = ptr(false) }), errcode.ImmutableTopicField},
		{"CompactPatchOnEventSourcingTopic", existing(func(r *metav1.CreateTopicRequest) { r.EventSourcing = ptr(true) }),
			create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("compact") }), errcode.InvalidTopicPolicy},
		{"InternalFlagChange", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.Internal = true }), errcode.ImmutableTopicField},
		{"AggregateReplayChange", existing(func(r *metav1.CreateTopicRequest) { r.EventSourcing, r.Idempotent = ptr(true), ptr(true) }),
			create("t", func(r *metav1.CreateTopicRequest) { r.AggregateReplay = ptr(true) }), errcode.ImmutableTopicField},
		{"AggregateReplayPartitionCount", existing(func(r *metav1.CreateTopicRequest) {
			r.EventSourcing, r.Idempotent, r.AggregateReplay = ptr(true), ptr(true), ptr(true)
		}), create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr(int32(9)) }), errcode.ImmutableTopicField},
		{"AggregateReplayTurnedOff", existing(func(r *metav1.CreateTopicRequest) {
			r.EventSourcing, r.Idempotent, r.AggregateReplay = ptr(true), ptr(true), ptr(true)
		}), create("t", func(r *metav1.CreateTopicRequest) { r.AggregateReplay = ptr(false) }), errcode.ImmutableTopicField},
		{"IdempotentTurnedOff", existing(func(r *metav1.CreateTopicRequest) { r.Idempotent = ptr(true) }),
			create("t", func(r *metav1.CreateTopicRequest) { r.Idempotent = ptr(false) }), errcode.ImmutableTopicField},
		{"InvalidPolicyInPatch", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("forever") }), errcode.InvalidTopicPolicy},
		{"NegativeRetentionInPatch", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.RetentionHours = ptr[int64](-1) }), errcode.InvalidParameter},
		{"CompactPatchWithoutLifecycleV2", func(x *h) {
			x.ok(create("t"))
			x.register(pnode("p4", 1, 1))
		}, create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("compact") }), errcode.UnsupportedTopicPolicy},
		{"MinISRPatchAboveReplicationFactor", existing(), create("t", func(r *metav1.CreateTopicRequest) { r.MinInSyncReplicas = ptr("9") }), errcode.InvalidParameter},
		{"RecreateWhileCleanupPending", func(x *h) {
			x.ok(create("t"))
			x.ok(&metav1.DeleteTopicRequest{Name: "t"})
		}, create("t"), errcode.TopicCleanupPending},
		{"GrowWithTooFewLiveServers", func(x *h) {
			x.ok(create("t"))
			x.now += 2 * lease
			x.heartbeat("p1", 1)
			x.reconcile() // p2 and p3 expire; only p1 renewed its lease
		}, create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](8) }), errcode.InvalidReplicationFactor},
	}
	for _, c := range cases {
		rejects(t, c.name, c.cmd, c.code, c.setup)
	}
}

// TestCreateRejectsPartitionDecrease is the rule on its own: the count only
// grows, and the error names both values.
func TestCreateRejectsPartitionDecrease(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](6) }))
	e := x.fails(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](5) }), errcode.PartitionCountDecrease)
	if e.Field("current") != "6" || e.Field("requested") != "5" {
		t.Fatalf("fields = %v", e.Fields)
	}
}

func TestReplicationFactorErrorNamesLiveServers(t *testing.T) {
	x := newH(t)
	x.partitionds(2)
	e := x.fails(create("t"), errcode.InvalidReplicationFactor)
	if e.Field("live_partition_servers") != "2" || e.Field("replication_factor") != "3" || !strings.Contains(e.Message, "2 are live") {
		t.Fatalf("error = %v", e)
	}
}

func TestCreatePatchKeepsOmittedFieldsAndAppliesExplicitZeroes(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) {
		r.RetentionHours, r.RetentionBytes = ptr[int64](24), ptr[int64](1<<20)
		r.ReadAcl, r.WriteAcl, r.AuthPolicy = ptr("alice"), ptr("bob"), ptr("acl")
		r.Partitioner, r.MinInSyncReplicas = ptr("round_robin"), ptr("2")
		r.Idempotent = ptr(true)
	}))
	// Omitted fields keep their value.
	resp := x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.RetentionHours = ptr[int64](48) })).(*metav1.CreateTopicResponse)
	cfg := resp.GetTopic().GetConfig()
	if cfg.GetRevision() != 2 || cfg.GetRetentionHours() != 48 || cfg.GetRetentionBytes() != 1<<20 || cfg.GetReadAcl() != "alice" ||
		cfg.GetPartitioner() != "round_robin" || cfg.GetMinInSyncReplicas() != 2 || !cfg.GetIdempotent() {
		t.Fatalf("after patch: %v", cfg)
	}
	// Explicit zero, false-ish and empty values are applied, and restating
	// immutable fields with their current value is fine.
	resp = x.ok(create("t", func(r *metav1.CreateTopicRequest) {
		r.RetentionHours, r.RetentionBytes = ptr[int64](0), ptr[int64](0)
		r.ReadAcl, r.WriteAcl = ptr(""), ptr("")
		r.ReplicationFactor, r.Idempotent, r.EventSourcing = ptr[int32](3), ptr(true), ptr(false)
		r.MinInSyncReplicas = ptr("default")
	})).(*metav1.CreateTopicResponse)
	cfg = resp.GetTopic().GetConfig()
	if cfg.GetRevision() != 3 || cfg.GetRetentionHours() != 0 || cfg.GetRetentionBytes() != 0 || cfg.GetReadAcl() != "" ||
		cfg.GetWriteAcl() != "" || cfg.MinInSyncReplicas != nil {
		t.Fatalf("after zeroing patch: %v", cfg)
	}
}

func TestCreateNoOpKeepsRevisionAndEmitsNothing(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](2) }))
	drain := x.watchFrom(x.f.Revision())
	resp := x.ok(create("t", func(r *metav1.CreateTopicRequest) {
		r.Partitions, r.ReplicationFactor, r.CleanupPolicy = ptr[int32](2), ptr[int32](3), ptr("delete")
	})).(*metav1.CreateTopicResponse)
	if resp.GetCreated() || resp.GetChanged() || resp.GetTopic().GetConfig().GetRevision() != 1 {
		t.Fatalf("no-op patch: created=%v changed=%v revision=%d", resp.GetCreated(), resp.GetChanged(), resp.GetTopic().GetConfig().GetRevision())
	}
	if evs := drain(); len(evs) != 0 {
		t.Fatalf("no-op emitted %d events", len(evs))
	}
}

func TestCreateGrowPreservesLeadersEpochsAndHWMs(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](2) }))
	p0 := x.topic("t").GetPartitions()[0]
	x.ok(&metav1.CheckpointHwmRequest{Topic: "t", Partition: 0, LeaderEpoch: p0.GetLeaderEpoch(), LifecycleEpoch: 1, Hwm: 42})
	x.ok(&metav1.AlterIsrRequest{Topic: "t", Partition: 0, LeaderEpoch: p0.GetLeaderEpoch(), Isr: p0.GetReplicas()})
	x.ok(&metav1.ElectLeaderRequest{Topic: "t", Partition: 0, BrokerId: p0.GetReplicas()[1]})
	before := x.topic("t").GetPartitions()

	resp := x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](5) })).(*metav1.CreateTopicResponse)
	after := resp.GetTopic().GetPartitions()
	if len(after) != 5 || resp.GetTopic().GetConfig().GetRevision() != 2 {
		t.Fatalf("partitions=%d revision=%d", len(after), resp.GetTopic().GetConfig().GetRevision())
	}
	for i := range before {
		if !proto.Equal(before[i], after[i]) {
			t.Fatalf("partition %d changed: %v -> %v", i, before[i], after[i])
		}
	}
	for _, p := range after[2:] {
		if p.GetLeaderEpoch() != FirstLeaderEpoch || len(p.GetReplicas()) != 3 || p.GetCommittedHwm() != 0 {
			t.Fatalf("new partition = %v", p)
		}
	}
}

func TestCreateInternalTopicIsCompactedWithoutLifecycleV2(t *testing.T) {
	x := newH(t)
	x.register(pnode("p1", 1, 1)) // lacks v2
	cmd := create(ConsumerOffsetsTopic, func(r *metav1.CreateTopicRequest) {
		r.Internal, r.Partitions, r.ReplicationFactor = true, ptr[int32](50), ptr[int32](1)
	})
	x.ok(cmd)
	cfg := x.topic(ConsumerOffsetsTopic).GetConfig()
	if !cfg.GetInternal() || cfg.GetCleanupPolicy() != "compact" || cfg.GetPartitions() != 50 {
		t.Fatalf("internal topic = %v", cfg)
	}
}

func TestCompactIsAcceptedWhenEveryLiveServerHasLifecycleV2(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.register(pnode("p9", 1, 1))
	x.now += 2 * lease
	for _, id := range []string{"p1", "p2", "p3"} {
		if r := x.heartbeat(id, 1); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	x.reconcile() // p9 (v1 only) expires: no longer a live server
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.CleanupPolicy = ptr("delete,compact") }))
}

func TestAlterTopicConfigReplacesOnlyTheOverride(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.RetentionHours = ptr[int64](5) }))
	r := x.ok(&metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "2"}).(*metav1.AlterTopicConfigResponse)
	if cfg := r.GetTopic().GetConfig(); cfg.GetMinInSyncReplicas() != 2 || cfg.GetRevision() != 2 || cfg.GetRetentionHours() != 5 {
		t.Fatalf("after alter: %v", cfg)
	}
	r = x.ok(&metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "2"}).(*metav1.AlterTopicConfigResponse)
	if r.GetTopic().GetConfig().GetRevision() != 2 {
		t.Fatal("restating the override advanced the revision")
	}
	r = x.ok(&metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "default"}).(*metav1.AlterTopicConfigResponse)
	if cfg := r.GetTopic().GetConfig(); cfg.MinInSyncReplicas != nil || cfg.GetRevision() != 3 {
		t.Fatalf("after default: %v", cfg)
	}
	if EffectiveMinISR(r.GetTopic().GetConfig(), 2) != 2 {
		t.Fatal("effective min ISR without override")
	}
}

func TestAlterTopicConfigRejects(t *testing.T) {
	cases := []struct {
		name string
		req  *metav1.AlterTopicConfigRequest
		code errcode.Code
	}{
		{"UnknownTopic", &metav1.AlterTopicConfigRequest{Name: "nope", MinInSyncReplicas: "1"}, errcode.TopicNotFound},
		{"InvalidName", &metav1.AlterTopicConfigRequest{Name: "..", MinInSyncReplicas: "1"}, errcode.InvalidTopicName},
		{"AboveReplicationFactor", &metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "4"}, errcode.InvalidParameter},
		{"Zero", &metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "0"}, errcode.InvalidParameter},
		{"Empty", &metav1.AlterTopicConfigRequest{Name: "t"}, errcode.InvalidParameter},
	}
	for _, c := range cases {
		rejects(t, c.name, c.req, c.code, createT)
	}
}

func TestDeleteTracksCleanupUntilEveryReplicaReports(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](6) }))
	r := x.ok(&metav1.DeleteTopicRequest{Name: "t"}).(*metav1.DeleteTopicResponse)
	if !r.GetDeleted() || !r.GetCleanupPending() {
		t.Fatalf("delete = %v", r)
	}
	tp := x.topic("t")
	if tp.GetConfig().GetState() != metav1.TopicState_TOPIC_STATE_DELETING || !slices.Equal(tp.GetCleanupPendingNodes(), []string{"p1", "p2", "p3"}) {
		t.Fatalf("deleting topic = %v", tp)
	}
	// The topic is gone for clients.
	x.fails(&metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "1"}, errcode.TopicNotFound)
	x.fails(&metav1.DeleteTopicRequest{Name: "t"}, errcode.TopicNotFound)
	again := x.ok(&metav1.DeleteTopicRequest{Name: "t", IfExists: true}).(*metav1.DeleteTopicResponse)
	if again.GetDeleted() || !again.GetCleanupPending() {
		t.Fatalf("if_exists on a deleting topic = %v", again)
	}
	// The deletion is lifecycle epoch 2: a report for epoch 1 (a truncate's
	// cleanup still in flight) must not count as the delete cleanup.
	if tp.GetConfig().GetLifecycleEpoch() != 2 {
		t.Fatalf("deleting topic lifecycle epoch = %d, want 2", tp.GetConfig().GetLifecycleEpoch())
	}
	// Reports: wrong epoch fenced, unknown node and repeats harmless.
	x.fails(&metav1.ReportCleanupRequest{NodeId: "p1", Topic: "t", LifecycleEpoch: 1}, errcode.StaleLifecycleEpoch)
	x.ok(&metav1.ReportCleanupRequest{NodeId: "p9", Topic: "t", LifecycleEpoch: 2})
	x.ok(&metav1.ReportCleanupRequest{NodeId: "p1", Topic: "t", LifecycleEpoch: 2})
	x.ok(&metav1.ReportCleanupRequest{NodeId: "p1", Topic: "t", LifecycleEpoch: 2})
	x.ok(&metav1.ReportCleanupRequest{NodeId: "p2", Topic: "t", LifecycleEpoch: 2})
	x.fails(create("t"), errcode.TopicCleanupPending)
	drain := x.watchFrom(x.f.Revision())
	x.ok(&metav1.ReportCleanupRequest{NodeId: "p3", Topic: "t", LifecycleEpoch: 2})
	if _, ok := x.state().Topic("t"); ok {
		t.Fatal("topic still present after the last cleanup report")
	}
	evs := drain()
	if len(evs) != 1 || evs[0].GetTopicRemoved() != "t" {
		t.Fatalf("events = %v, want one topic_removed", evs)
	}
	// Recreation starts over at revision 1.
	r2 := x.ok(create("t")).(*metav1.CreateTopicResponse)
	if r2.GetTopic().GetConfig().GetRevision() != 1 || !r2.GetCreated() {
		t.Fatalf("recreated = %v", r2.GetTopic().GetConfig())
	}
	x.ok(&metav1.ReportCleanupRequest{NodeId: "p1", Topic: "gone", LifecycleEpoch: 1}) // unknown topic: no-op
}

func TestDeleteRejects(t *testing.T) {
	cases := []struct {
		name string
		req  *metav1.DeleteTopicRequest
		code errcode.Code
	}{
		{"Missing", &metav1.DeleteTopicRequest{Name: "nope"}, errcode.TopicNotFound},
		{"InvalidName", &metav1.DeleteTopicRequest{Name: "a b"}, errcode.InvalidTopicName},
		{"ConsumerOffsets", &metav1.DeleteTopicRequest{Name: ConsumerOffsetsTopic}, errcode.InternalTopicDeleteForbidden},
		{"ConsumerOffsetsIfExists", &metav1.DeleteTopicRequest{Name: ConsumerOffsetsTopic, IfExists: true}, errcode.InternalTopicDeleteForbidden},
		{"OtherInternal", &metav1.DeleteTopicRequest{Name: "__internal2"}, errcode.InternalTopicDeleteForbidden},
	}
	createInternal := func(x *h) {
		x.ok(create(ConsumerOffsetsTopic, func(r *metav1.CreateTopicRequest) { r.Internal = true }))
		x.ok(create("__internal2", func(r *metav1.CreateTopicRequest) { r.Internal = true }))
	}
	for _, c := range cases {
		rejects(t, c.name, c.req, c.code, createInternal)
	}
}

func TestDeleteIfExistsOnAMissingTopicChangesNothing(t *testing.T) {
	x := newH(t)
	before := x.f.EncodeState()
	r := x.ok(&metav1.DeleteTopicRequest{Name: "nope", IfExists: true}).(*metav1.DeleteTopicResponse)
	if r.GetDeleted() || r.GetCleanupPending() {
		t.Fatalf("delete if_exists = %v", r)
	}
	if string(before) != string(x.f.EncodeState()) {
		t.Fatal("state changed")
	}
}

func TestTruncateAdvancesEpochsAndResetsHWM(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](3) }))
	for i := range int32(3) {
		x.ok(&metav1.CheckpointHwmRequest{Topic: "t", Partition: i, LeaderEpoch: 1, LifecycleEpoch: 1, Hwm: uint64(10 * (i + 1))})
	}
	x.fails(&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 2}, errcode.VersionConflict)
	r := x.ok(&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 1}).(*metav1.TruncateTopicResponse)
	cfg := r.GetTopic().GetConfig()
	if cfg.GetRevision() != 2 || cfg.GetLifecycleEpoch() != 2 || !r.GetCleanupPending() || cfg.GetState() != metav1.TopicState_TOPIC_STATE_ACTIVE {
		t.Fatalf("after truncate: %v pending=%v", cfg, r.GetCleanupPending())
	}
	for _, p := range r.GetTopic().GetPartitions() {
		if p.GetLeaderEpoch() != 2 || p.GetCommittedHwm() != 0 || p.GetLeader() == "" {
			t.Fatalf("partition after truncate = %v", p)
		}
	}
	// The old lifecycle epoch is fenced; the new one checkpoints from 0.
	x.fails(&metav1.CheckpointHwmRequest{Topic: "t", Partition: 0, LeaderEpoch: 2, LifecycleEpoch: 1, Hwm: 50}, errcode.StaleLifecycleEpoch)
	x.ok(&metav1.CheckpointHwmRequest{Topic: "t", Partition: 0, LeaderEpoch: 2, LifecycleEpoch: 2, Hwm: 3})
	// A retry with the old expected revision conflicts: truncate is not
	// silently repeated.
	x.fails(&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 1}, errcode.VersionConflict)
	// Cleanup reports for the new epoch clear the pending set; the topic
	// stays.
	for _, id := range []string{"p1", "p2", "p3"} {
		x.ok(&metav1.ReportCleanupRequest{NodeId: id, Topic: "t", LifecycleEpoch: 2})
	}
	if tp := x.topic("t"); len(tp.GetCleanupPendingNodes()) != 0 || !Live(tp) {
		t.Fatalf("after cleanup = %v", tp)
	}
}

func TestTruncateRejects(t *testing.T) {
	cases := []struct {
		name  string
		setup func(x *h)
		req   *metav1.TruncateTopicRequest
		code  errcode.Code
	}{
		{"Missing", nil, &metav1.TruncateTopicRequest{Name: "nope", ExpectedRevision: 1}, errcode.TopicNotFound},
		{"InvalidName", nil, &metav1.TruncateTopicRequest{Name: "", ExpectedRevision: 1}, errcode.InvalidTopicName},
		{"NoExpectedRevision", nil, &metav1.TruncateTopicRequest{Name: "t"}, errcode.MissingParameter},
		{"StaleExpectedRevision", func(x *h) { x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.RetentionHours = ptr[int64](1) })) },
			&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 1}, errcode.VersionConflict},
		{"ConsumerOffsets", func(x *h) {
			x.ok(create(ConsumerOffsetsTopic, func(r *metav1.CreateTopicRequest) { r.Internal = true }))
		},
			&metav1.TruncateTopicRequest{Name: ConsumerOffsetsTopic, ExpectedRevision: 1}, errcode.InternalTopicDeleteForbidden},
		{"LiveServerWithoutLifecycleV1", func(x *h) { x.register(pnode("p7", 1, 2)) },
			&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 1}, errcode.UnsupportedLifecycleProtocol},
		{"Deleting", func(x *h) { x.ok(&metav1.DeleteTopicRequest{Name: "t"}) },
			&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 1}, errcode.TopicNotFound},
	}
	for _, c := range cases {
		rejects(t, c.name, c.req, c.code, createT, c.setup)
	}
}

// A truncate's cleanup report that arrives after a DELETE committed must
// not count as the delete cleanup: it would remove the topic while the node
// still holds the old incarnation's partitions (the recreated topic was
// then served by them).
func TestLateTruncateReportDoesNotFinishDelete(t *testing.T) {
	x := newH(t)
	x.partitionds(1)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](3); r.ReplicationFactor = ptr[int32](1) }))
	x.ok(&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 1})
	x.ok(&metav1.DeleteTopicRequest{Name: "t"})
	x.fails(&metav1.ReportCleanupRequest{NodeId: "p1", Topic: "t", LifecycleEpoch: 2}, errcode.StaleLifecycleEpoch)
	tp := x.topic("t")
	if tp == nil || Live(tp) || !slices.Equal(tp.GetCleanupPendingNodes(), []string{"p1"}) {
		t.Fatalf("after a late truncate report: %v", tp)
	}
	x.fails(create("t"), errcode.TopicCleanupPending)
	x.ok(&metav1.ReportCleanupRequest{NodeId: "p1", Topic: "t", LifecycleEpoch: 3})
	if _, ok := x.state().Topic("t"); ok {
		t.Fatal("topic still present after the delete cleanup report")
	}
}
