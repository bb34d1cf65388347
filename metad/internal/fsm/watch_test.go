package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/metad/internal/changefeed"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestEveryChangeEmitsFullObjectsWithConsecutiveRevisions(t *testing.T) {
	x := newH(t)
	drain := x.watchFrom(0)
	if evs := drain(); len(evs) != 1 || evs[0].GetSnapshot() == nil || evs[0].GetRevision() != 0 {
		t.Fatalf("initial backlog = %v", evs)
	}
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](2) }))
	evs := drain()
	if len(evs) != 4 {
		t.Fatalf("%d events, want 3 node upserts and 1 topic upsert", len(evs))
	}
	for i, ev := range evs {
		if ev.GetRevision() != uint64(i+1) {
			t.Fatalf("event %d has revision %d", i, ev.GetRevision())
		}
	}
	if tp := evs[3].GetTopicUpserted(); tp == nil || len(tp.GetPartitions()) != 2 || tp.GetConfig().GetRevision() != 1 {
		t.Fatalf("topic event = %v", evs[3])
	}
	// One command touching several objects: nodes first, then topics.
	x.now += lease
	x.heartbeat("p2", 1)
	x.heartbeat("p3", 1)
	x.reconcile()
	evs = drain()
	if len(evs) < 2 || evs[0].GetNodeUpserted().GetId() != "p1" || evs[0].GetNodeUpserted().GetLive() || evs[len(evs)-1].GetTopicUpserted() == nil {
		t.Fatalf("reconcile events = %v", evs)
	}
}

func TestWatchResumesAcrossReconnect(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	var seen []*metav1.WatchResponse
	backlog, sub := x.f.Watch(0)
	seen = append(seen, backlog...)
	x.ok(create("a"))
	seen = append(seen, <-sub.C())
	sub.Close() // disconnect
	x.ok(create("b"))
	x.ok(create("c"))
	last := seen[len(seen)-1].GetRevision()
	backlog, sub = x.f.Watch(last)
	defer sub.Close()
	if len(backlog) != 2 || backlog[0].GetRevision() != last+1 || backlog[1].GetTopicUpserted().GetConfig().GetName() != "c" {
		t.Fatalf("resumed backlog = %v", backlog)
	}
}

// TestWatchReplayRebuildsTheState applies every event of a long run to a
// local copy and compares it with the FSM: events are complete.
func TestWatchReplayRebuildsTheState(t *testing.T) {
	x := newH(t)
	drain := x.watchFrom(0)
	runRandom(x, 7, 300)
	topics := map[string]*metav1.Topic{}
	nodes := map[string]*metav1.Node{}
	for _, ev := range drain() {
		switch e := ev.GetEvent().(type) {
		case *metav1.WatchResponse_Snapshot:
		case *metav1.WatchResponse_TopicUpserted:
			topics[e.TopicUpserted.GetConfig().GetName()] = e.TopicUpserted
		case *metav1.WatchResponse_TopicRemoved:
			delete(topics, e.TopicRemoved)
		case *metav1.WatchResponse_NodeUpserted:
			nodes[e.NodeUpserted.GetId()] = e.NodeUpserted
		case *metav1.WatchResponse_NodeRemoved:
			delete(nodes, e.NodeRemoved)
		}
	}
	st := x.state()
	if len(topics) != len(st.topics) || len(nodes) != len(st.nodes) {
		t.Fatalf("replayed %d topics %d nodes, state has %d %d", len(topics), len(nodes), len(st.topics), len(st.nodes))
	}
	for name, tp := range st.topics {
		if topics[name] != tp {
			t.Fatalf("topic %s differs from its last event", name)
		}
	}
	for id, n := range st.nodes {
		if !sameBesidesHeartbeat(nodes[id], n) {
			t.Fatalf("node %s differs from its last event beyond the heartbeat", id)
		}
	}
}

func TestRestoreResetsWatchers(t *testing.T) {
	x := populated(t)
	b := snapshotBytes(t, x.f)
	y := newH(t)
	_, sub := y.f.Watch(0)
	if err := y.f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	<-sub.Done()
	if !errors.Is(sub.Err(), changefeed.ErrReset) {
		t.Fatalf("err = %v", sub.Err())
	}
	backlog, sub2 := y.f.Watch(3)
	defer sub2.Close()
	if len(backlog) != 1 || backlog[0].GetSnapshot() == nil || backlog[0].GetRevision() != x.f.Revision() {
		t.Fatalf("after restore = %v", backlog)
	}
	if n := len(backlog[0].GetSnapshot().GetTopics()); n != 2 {
		t.Fatalf("snapshot has %d topics", n)
	}
}

func TestRejectedCommandEmitsNothing(t *testing.T) {
	x := newH(t)
	drain := x.watchFrom(0)
	drain()
	x.fails(create(".."), errcode.InvalidTopicName)
	if evs := drain(); len(evs) != 0 || x.f.Revision() != 0 {
		t.Fatalf("rejected command: %d events, revision %d", len(evs), x.f.Revision())
	}
}
