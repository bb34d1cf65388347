package partition

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/statestore"
)

func TestCreatePartitionIsIdempotent(t *testing.T) {
	n, p := openPartition(t, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	q, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0, LeaderEpoch: 4,
		Config: TopicConfig{RetentionHours: 5}})
	if err != nil || q != p {
		t.Fatalf("repeat create: %v (same partition %v)", err, q == p)
	}
	if p.Config().RetentionHours != 5 || p.LeaderEpoch() != 4 {
		t.Fatalf("config not updated: %+v epoch %d", p.Config(), p.LeaderEpoch())
	}
	if o, _ := p.ListOffsets(); o.LEO != 1 {
		t.Fatalf("repeat create lost data: %+v", o)
	}
}

func TestCreatePartitionValidation(t *testing.T) {
	n := newNodeEnv(t).open(t)
	defer n.Close()
	for _, tc := range []struct {
		name string
		spec PartitionSpec
		code errcode.Code
	}{
		{"EmptyTopic", PartitionSpec{Topic: ""}, errcode.InvalidTopicName},
		{"DotTopic", PartitionSpec{Topic: ".."}, errcode.InvalidTopicName},
		{"SlashTopic", PartitionSpec{Topic: "a/b"}, errcode.InvalidTopicName},
		{"NegativePartition", PartitionSpec{Topic: "a", Partition: -1}, errcode.InvalidPartition},
		{"BadPolicy", PartitionSpec{Topic: "a", Config: TopicConfig{CleanupPolicy: "forever"}}, errcode.InvalidTopicPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.CreatePartition(context.Background(), tc.spec)
			wantCode(t, err, tc.code)
		})
	}
}

func TestLeaderEpochHistory(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a", "b")
	if err := p.SetLeaderEpoch(3); err != nil {
		t.Fatal(err)
	}
	res := appendPayloads(t, p, "c")
	if res.LeaderEpoch != 3 {
		t.Fatalf("%+v", res)
	}
	_ = p.SetLeaderEpoch(2) // lower: ignored
	appendPayloads(t, p, "d")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = e.open(t)
	defer n.Close()
	p, _ = n.Partition("t", 0)
	eps := p.log.Epochs()
	if len(eps) != 2 || eps[0].Epoch != 0 || eps[0].StartOffset != 0 || eps[1].Epoch != 3 || eps[1].StartOffset != 2 {
		t.Fatalf("epoch history %+v", eps)
	}
	if ep, end, ok := p.log.EndOffsetForEpoch(1); !ok || ep != 0 || end != 2 {
		t.Fatalf("end of epoch 1: %d %d %v", ep, end, ok)
	}
}

func TestTruncateUnderNewLifecycleEpoch(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a", "b", "c")
	if _, err := idemAppend(t, p, idem{pid: "x", base: 1, n: 1}, AcksAll); err != nil {
		t.Fatal(err)
	}
	oldDir := p.meta.Load().Dir
	ok, err := n.TruncatePartition(context.Background(), "t", 0, 1)
	if err != nil || !ok {
		t.Fatalf("truncate: %v %v", ok, err)
	}
	// The old handle and old-epoch requests are fenced.
	_, err = p.Fetch(context.Background(), &FetchRequest{Offset: 0, LifecycleEpoch: 0})
	e1 := wantCode(t, err, errcode.StaleLifecycleEpoch)
	if field(e1, "current") != "1" || field(e1, "got") != "0" {
		t.Fatalf("%v", e1)
	}
	q, err := n.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	set, cnt := payloads(t, "t", "stale")
	_, err = q.Append(context.Background(), &AppendRequest{LifecycleEpoch: 0, Acks: AcksLeader, Records: set, RecordCount: cnt})
	wantCode(t, err, errcode.StaleLifecycleEpoch)
	// leo 0, hwm 0, producer state gone (sequence restarts at 1).
	if o, _ := q.ListOffsets(); o != (Offsets{}) {
		t.Fatalf("after truncate %+v", o)
	}
	if _, err := idemAppend(t, q, idem{pid: "x", base: 1, n: 1}, AcksAll); err != nil {
		t.Fatalf("producer state survived truncate: %v", err)
	}
	if ex, _ := n.fs.Exists(n.fs.Join(n.logsDir, oldDir)); ex {
		t.Fatal("old log directory still there")
	}
	// Stale truncate and repeated truncate.
	_, err = n.TruncatePartition(context.Background(), "t", 0, 0)
	wantCode(t, err, errcode.StaleLifecycleEpoch)
	if ok, err := n.TruncatePartition(context.Background(), "t", 0, 1); !ok || err != nil {
		t.Fatalf("repeat truncate: %v %v", ok, err)
	}
	if o, _ := q.ListOffsets(); o.LEO != 1 {
		t.Fatalf("repeat truncate changed data: %+v", o)
	}
	// The marker survives a restart.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = e.open(t)
	defer n.Close()
	q, _ = n.Partition("t", 0)
	if q.LifecycleEpoch() != 1 {
		t.Fatalf("epoch after restart %d", q.LifecycleEpoch())
	}
}

func TestTruncateMarkerDurableBeforeStorageReplaced(t *testing.T) {
	// Crash right after the state change of a truncate: the restarted node
	// must come back under the new epoch with empty storage, and remove the
	// old directory (interrupted cleanup resumes at startup).
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a", "b")
	old := *p.meta.Load()
	m := old
	m.LifecycleEpoch, m.State, m.Dir = 2, statestore.StateCreating, "t-0-2-new"
	if err := n.state.ResetPartition(m); err != nil {
		t.Fatal(err)
	}
	c := e.crashClone(0)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := c.open(t)
	defer n2.Close()
	q, err := n2.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := q.ListOffsets(); q.LifecycleEpoch() != 2 || o.LEO != 0 {
		t.Fatalf("epoch %d offsets %+v", q.LifecycleEpoch(), o)
	}
	if ex, _ := n2.fs.Exists(n2.fs.Join(n2.logsDir, old.Dir)); ex {
		t.Fatal("old directory not cleaned up at startup")
	}
}

func TestDeletePartition(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	defer n.Close()
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	dir := p.meta.Load().Dir
	ok, err := n.DeletePartition(context.Background(), "t", 0)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	_, err = n.Partition("t", 0)
	wantCode(t, err, errcode.PartitionNotFound)
	_, err = p.Fetch(context.Background(), &FetchRequest{})
	wantCode(t, err, errcode.PartitionNotFound)
	if ex, _ := n.fs.Exists(n.fs.Join(n.logsDir, dir)); ex {
		t.Fatal("log directory still there")
	}
	if _, ok, _ := n.state.Meta("t", 0); ok {
		t.Fatal("meta still there")
	}
	// Retry is safe; recreation starts empty.
	if ok, err := n.DeletePartition(context.Background(), "t", 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	q := mustCreate(t, n, "t", 0, TopicConfig{})
	if o, _ := q.ListOffsets(); o.LEO != 0 {
		t.Fatalf("%+v", o)
	}
}

func TestDeleteCleanupPendingIsRetried(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failing atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && op.Kind == errorfs.OpRemoveAll {
			return errorfs.ErrInjected
		}
		return nil
	}))
	e := newNodeEnv(t, func(c *NodeConfig) { c.FS = fs; c.StateFS = mem })
	e.fs = mem
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	failing.Store(true)
	ok, err := n.DeletePartition(context.Background(), "t", 0)
	if err != nil || ok {
		t.Fatalf("delete with failing cleanup: complete=%v err=%v", ok, err)
	}
	_, err = n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0})
	wantCode(t, err, errcode.TopicCleanupPending)
	// A restart with cleanup still failing keeps it pending; once removal
	// works, startup finishes it.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = e.open(t)
	if m, ok, _ := n.state.Meta("t", 0); !ok || m.State != statestore.StateDeleting {
		t.Fatalf("meta after failed cleanup: %+v %v", m, ok)
	}
	failing.Store(false)
	if ok, err := n.DeletePartition(context.Background(), "t", 0); !ok || err != nil {
		t.Fatalf("retry: %v %v", ok, err)
	}
	if _, ok, _ := n.state.Meta("t", 0); ok {
		t.Fatal("meta left after retried cleanup")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteResumedAtStartup(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	m := *p.meta.Load()
	m.State = statestore.StateDeleting
	if err := n.state.PutMeta(m, true); err != nil {
		t.Fatal(err)
	}
	c := e.crashClone(0) // crash after the delete was committed
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := c.open(t)
	defer n2.Close()
	if _, ok, _ := n2.state.Meta("t", 0); ok {
		t.Fatal("delete not finished at startup")
	}
	if ex, _ := n2.fs.Exists(n2.fs.Join(n2.logsDir, m.Dir)); ex {
		t.Fatal("directory left")
	}
}

func TestLifecycleEpochOnCreate(t *testing.T) {
	n, p := openPartition(t, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	q, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0, LifecycleEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := q.ListOffsets(); q.LifecycleEpoch() != 3 || o.LEO != 0 {
		t.Fatalf("create under a newer epoch must truncate: %d %+v", q.LifecycleEpoch(), o)
	}
	_, err = n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0, LifecycleEpoch: 2})
	wantCode(t, err, errcode.StaleLifecycleEpoch)
}

func TestMissingLogDirectoryIsStartupError(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	mustCreate(t, n, "u", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	dir := p.meta.Load().Dir
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.RemoveAll("/data/logs/" + dir); err != nil {
		t.Fatal(err)
	}
	n = e.open(t) // the node opens; the damaged partition reports
	defer n.Close()
	_, err := n.Partition("t", 0)
	wantCode(t, err, errcode.StorageCorrupt)
	if _, err := n.Partition("u", 0); err != nil {
		t.Fatalf("healthy partition: %v", err)
	}
	if st := n.Stats(); st.StatFailures != 1 || st.Handlers != 1 {
		t.Fatalf("stats %+v", st)
	}
	var e2 *errcode.Error
	if !errors.As(err, &e2) || field(e2, "topic") != "t" {
		t.Fatalf("%v", err)
	}
}

// A request that races the node's shutdown (a clean stop) gets a retryable
// availability answer the gateway reroutes on, never the final
// partition_not_found a deleted partition gets (TestReplicationFailover saw
// partition_not_found during a clean stop).
func TestClosedNodeAnswersRetryably(t *testing.T) {
	e := newNodeEnv(t)
	n := e.open(t)
	p := mustCreate(t, n, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	done := make(chan error, 1)
	go func() {
		_, err := p.Fetch(context.Background(), &FetchRequest{Offset: 1, Wait: time.Minute})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if e := wantCode(t, err, errcode.RoleUnavailable); !e.Retryable {
			t.Fatalf("not retryable: %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll outlived the node")
	}
	_, err := p.Fetch(context.Background(), &FetchRequest{})
	wantCode(t, err, errcode.RoleUnavailable)
}
