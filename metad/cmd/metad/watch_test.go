package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// watchCheck is a raw Watch client that checks the stream contract across
// reconnects: after resuming from revision r the next event is r+1 (every
// change exactly once, in order) unless it is a full snapshot at a revision
// >= r; incremental events never come before a first snapshot. It rebuilds
// the topics from the events so the end state can be compared with the
// leader's.
type watchCheck struct {
	mu         sync.Mutex
	rev        uint64
	base       bool
	topics     map[string]*metav1.Topic
	events     int
	snapshots  int
	reconnects int
	violations []string
}

func newWatchCheck() *watchCheck { return &watchCheck{topics: map[string]*metav1.Topic{}} }

// run follows the leader (NOT_LEADER redirects, else the next address)
// until ctx ends, resuming from the last revision it applied.
func (w *watchCheck) run(ctx context.Context, c *cluster) {
	addrs := c.addrs()
	target, next := addrs[0], 0
	for ctx.Err() == nil {
		err := w.once(ctx, c, target)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.reconnects++
		w.mu.Unlock()
		if e := errcode.From(err); e.Code == errcode.NotLeader.Name() && e.Field("leader") != "" {
			target = e.Field("leader")
		} else {
			next++
			target = addrs[next%len(addrs)]
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *watchCheck) once(ctx context.Context, c *cluster, addr string) error {
	conn, err := c.pool.Get(addr)
	if err != nil {
		return err
	}
	w.mu.Lock()
	from := w.rev
	w.mu.Unlock()
	stream, err := metav1.NewMetadataServiceClient(conn).Watch(ctx, &metav1.WatchRequest{FromRevision: from})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		w.apply(ev)
	}
}

func (w *watchCheck) apply(ev *metav1.WatchResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if s := ev.GetSnapshot(); s != nil {
		w.snapshots++
		if ev.GetRevision() < w.rev {
			w.violations = append(w.violations, fmt.Sprintf("snapshot at revision %d after %d", ev.GetRevision(), w.rev))
		}
		w.topics = map[string]*metav1.Topic{}
		for _, t := range s.GetTopics() {
			w.topics[t.GetConfig().GetName()] = t
		}
		w.base = true
		w.rev = ev.GetRevision()
		return
	}
	switch {
	case !w.base:
		w.violations = append(w.violations, fmt.Sprintf("event at revision %d before any snapshot", ev.GetRevision()))
	case ev.GetRevision() != w.rev+1:
		w.violations = append(w.violations, fmt.Sprintf("event at revision %d after %d", ev.GetRevision(), w.rev))
	}
	switch e := ev.GetEvent().(type) {
	case *metav1.WatchResponse_TopicUpserted:
		w.topics[e.TopicUpserted.GetConfig().GetName()] = e.TopicUpserted
	case *metav1.WatchResponse_TopicRemoved:
		delete(w.topics, e.TopicRemoved)
	}
	w.rev = ev.GetRevision()
}

// diff compares the watcher's topics with the leader's once the watcher
// reached the leader's revision: "" when they are identical.
func (w *watchCheck) diff(rev uint64, leader map[string]*metav1.Topic) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rev < rev {
		return fmt.Sprintf("at revision %d, leader at %d", w.rev, rev)
	}
	var bad []string
	for name, t := range leader {
		if !proto.Equal(t, w.topics[name]) {
			bad = append(bad, name)
		}
	}
	for name, t := range w.topics {
		// The watch also carries DELETING topics, which ListTopics hides.
		if _, ok := leader[name]; !ok && t.GetConfig().GetState() != metav1.TopicState_TOPIC_STATE_DELETING {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Sprintf("%d topics differ from the leader's (first %s)", len(bad), bad[0])
	}
	return ""
}
