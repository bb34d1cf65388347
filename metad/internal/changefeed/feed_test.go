package changefeed

import (
	"errors"
	"testing"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func ev(rev uint64, name string) *metav1.WatchResponse {
	return &metav1.WatchResponse{Revision: rev, Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: name}}
}

func publishN(f *Feed, from, to uint64) {
	var evs []*metav1.WatchResponse
	for r := from; r <= to; r++ {
		evs = append(evs, ev(r, "t"))
	}
	f.Publish(evs)
}

func snapshotAt(f *Feed) func() *metav1.WatchResponse {
	return func() *metav1.WatchResponse {
		return &metav1.WatchResponse{Revision: f.last, Event: &metav1.WatchResponse_Snapshot{Snapshot: &metav1.Snapshot{}}}
	}
}

func revisions(evs []*metav1.WatchResponse) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.GetRevision())
	}
	return out
}

func isSnapshot(evs []*metav1.WatchResponse) bool {
	return len(evs) == 1 && evs[0].GetSnapshot() != nil
}

// wantSnapshot subscribes to f from revision from and requires the backlog
// to be one snapshot, at revision rev.
func wantSnapshot(t *testing.T, f *Feed, from, rev uint64) {
	t.Helper()
	backlog, sub := f.Subscribe(from, snapshotAt(f))
	defer sub.Close()
	if !isSnapshot(backlog) || backlog[0].GetRevision() != rev {
		t.Fatalf("subscribe from %d: backlog = %v, want a snapshot at %d", from, backlog, rev)
	}
}

func TestSubscribeFromZeroGetsASnapshot(t *testing.T) {
	f := New(8, 8)
	publishN(f, 1, 3)
	wantSnapshot(t, f, 0, 3)
}

func TestSubscribeResumesFromRetainedHistory(t *testing.T) {
	f := New(8, 8)
	publishN(f, 1, 6)
	backlog, sub := f.Subscribe(2, snapshotAt(f))
	defer sub.Close()
	if got := revisions(backlog); len(got) != 4 || got[0] != 3 || got[3] != 6 {
		t.Fatalf("backlog revisions = %v, want 3..6", got)
	}
	publishN(f, 7, 7)
	if got := <-sub.C(); got.GetRevision() != 7 {
		t.Fatalf("live event revision %d, want 7", got.GetRevision())
	}
}

func TestSubscribeAtTheHeadHasNoBacklog(t *testing.T) {
	f := New(8, 8)
	publishN(f, 1, 4)
	backlog, sub := f.Subscribe(4, snapshotAt(f))
	defer sub.Close()
	if len(backlog) != 0 {
		t.Fatalf("backlog = %v, want none", revisions(backlog))
	}
}

func TestSubscribeOlderThanHistoryGetsASnapshot(t *testing.T) {
	f := New(4, 8)
	publishN(f, 1, 10) // retains 7..10
	if got := f.Oldest(); got != 7 {
		t.Fatalf("Oldest = %d, want 7", got)
	}
	b6, s6 := f.Subscribe(6, snapshotAt(f)) // needs 7..10: all retained
	defer s6.Close()
	if got := revisions(b6); len(got) != 4 || got[0] != 7 {
		t.Fatalf("resume from 6 = %v, want 7..10", got)
	}
	wantSnapshot(t, f, 5, 10) // needs 6: evicted
}

func TestSubscribeFromTheFutureGetsASnapshot(t *testing.T) {
	f := New(4, 8)
	publishN(f, 1, 3)
	wantSnapshot(t, f, 99, 3) // a revision the feed never had
}

func TestLaggingSubscriberIsClosedNotBlocking(t *testing.T) {
	f := New(64, 2)
	_, slow := f.Subscribe(0, snapshotAt(f))
	_, fast := f.Subscribe(0, snapshotAt(f))
	defer fast.Close()
	publishN(f, 1, 2)
	<-fast.C()
	<-fast.C()
	publishN(f, 3, 4) // slow has 2 buffered: overflows; fast has room
	<-slow.Done()
	if !errors.Is(slow.Err(), ErrLagging) {
		t.Fatalf("slow subscriber err = %v, want ErrLagging", slow.Err())
	}
	// Events delivered before the drop are still readable in order.
	if got := (<-slow.C()).GetRevision(); got != 1 {
		t.Fatalf("first buffered = %d", got)
	}
	select {
	case <-fast.Done():
		t.Fatal("fast subscriber dropped")
	default:
	}
}

func TestResetClosesSubscribersAndForcesSnapshots(t *testing.T) {
	f := New(8, 8)
	publishN(f, 1, 3)
	_, s := f.Subscribe(3, snapshotAt(f))
	f.Reset(40)
	<-s.Done()
	if !errors.Is(s.Err(), ErrReset) {
		t.Fatalf("err = %v, want ErrReset", s.Err())
	}
	b, s2 := f.Subscribe(3, snapshotAt(f))
	defer s2.Close()
	if !isSnapshot(b) || b[0].GetRevision() != 40 {
		t.Fatalf("after reset = %v, want snapshot at 40", b)
	}
	publishN(f, 41, 41)
	if got := (<-s2.C()).GetRevision(); got != 41 {
		t.Fatalf("after reset live = %d", got)
	}
}

func TestPublishPanicsOnARevisionGap(t *testing.T) {
	f := New(8, 8)
	publishN(f, 1, 2)
	defer func() {
		if recover() == nil {
			t.Fatal("gap accepted")
		}
	}()
	f.Publish([]*metav1.WatchResponse{ev(4, "t")})
}

func TestCloseEndsSubscriptions(t *testing.T) {
	f := New(8, 8)
	_, s := f.Subscribe(0, snapshotAt(f))
	f.Close()
	<-s.Done()
	if !errors.Is(s.Err(), ErrClosed) {
		t.Fatalf("err = %v", s.Err())
	}
	_, s2 := f.Subscribe(0, snapshotAt(f))
	<-s2.Done()
	s2.Close() // harmless
}
