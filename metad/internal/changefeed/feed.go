package changefeed

import (
	"fmt"
	"sync"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Defaults for New.
const (
	DefaultHistory          = 8192
	DefaultSubscriberBuffer = 1024
)

// ErrLagging closes a subscription that fell behind: its buffer filled up.
// The subscriber resumes from the last revision it received.
var ErrLagging = errcode.ClusterMetadataUnavailable.New("watch subscriber fell behind; resume from the last revision received")

// ErrReset closes every subscription when the state is replaced by a
// snapshot restore; subscribers resume and get a full snapshot.
var ErrReset = errcode.ClusterMetadataUnavailable.New("metadata state was replaced by a snapshot restore; resume to get a full snapshot")

// ErrClosed closes subscriptions when the feed shuts down.
var ErrClosed = errcode.ClusterMetadataUnavailable.New("metadata change feed closed")

// Feed is the event history and the set of live subscriptions. Methods are
// safe for concurrent use. The publisher (the FSM) must hold its own state
// lock across Publish and across the snapshot function given to Subscribe, so
// a subscriber's snapshot and the events after it are seamless.
type Feed struct {
	mu      sync.Mutex
	ring    []*metav1.WatchResponse // history, oldest at ring[start]
	start   int
	n       int
	last    uint64 // revision of the newest event, or the base after Reset
	subs    map[*Subscription]struct{}
	bufSize int
	closed  bool
}

// New returns a feed retaining up to history events (DefaultHistory when
// <= 0) and giving each subscriber a buffer of bufSize events
// (DefaultSubscriberBuffer when <= 0).
func New(history, bufSize int) *Feed {
	if history <= 0 {
		history = DefaultHistory
	}
	if bufSize <= 0 {
		bufSize = DefaultSubscriberBuffer
	}
	return &Feed{ring: make([]*metav1.WatchResponse, history), subs: map[*Subscription]struct{}{}, bufSize: bufSize}
}

// Revision returns the revision of the newest event.
func (f *Feed) Revision() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Oldest returns the oldest revision a subscriber can resume from without a
// snapshot: resuming from Oldest()-1 or later replays history.
func (f *Feed) Oldest() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.oldestLocked()
}

func (f *Feed) oldestLocked() uint64 {
	if f.n == 0 {
		return f.last + 1
	}
	return f.ring[f.start].GetRevision()
}

// Publish appends events to the history and hands them to every subscriber.
// Revisions must continue the sequence (last+1, last+2, ...); a gap is a bug
// in the publisher and panics rather than silently corrupting resumes.
func (f *Feed) Publish(events []*metav1.WatchResponse) {
	if len(events) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range events {
		if ev.GetRevision() != f.last+1 {
			panic(fmt.Sprintf("changefeed: event revision %d does not follow %d", ev.GetRevision(), f.last))
		}
		f.last = ev.GetRevision()
		if f.n < len(f.ring) {
			f.ring[(f.start+f.n)%len(f.ring)] = ev
			f.n++
		} else {
			f.ring[f.start] = ev
			f.start = (f.start + 1) % len(f.ring)
		}
	}
	for s := range f.subs {
		for _, ev := range events {
			select {
			case s.ch <- ev:
			default:
				f.dropLocked(s, ErrLagging)
			}
			if s.err != nil {
				break
			}
		}
	}
}

// Reset drops the history and sets the current revision to revision (after a
// snapshot restore). Every subscriber is closed with ErrReset.
func (f *Feed) Reset(revision uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.ring)
	f.start, f.n, f.last = 0, 0, revision
	for s := range f.subs {
		f.dropLocked(s, ErrReset)
	}
}

// Close closes every subscription with ErrClosed and refuses new ones.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for s := range f.subs {
		f.dropLocked(s, ErrClosed)
	}
}

// Subscribe starts a subscription resuming after revision from. It returns
// the backlog to send first — the retained events after from, or, when those
// are not all retained (from is 0, too old, or ahead of the feed), a single
// event built by snapshot, which must return the full state at the current
// revision — and the subscription carrying every later event.
func (f *Feed) Subscribe(from uint64, snapshot func() *metav1.WatchResponse) ([]*metav1.WatchResponse, *Subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &Subscription{feed: f, ch: make(chan *metav1.WatchResponse, f.bufSize), done: make(chan struct{})}
	if f.closed {
		s.err = ErrClosed
		close(s.done)
		return nil, s
	}
	f.subs[s] = struct{}{}
	var backlog []*metav1.WatchResponse
	switch {
	case from != 0 && from == f.last:
	case from != 0 && from < f.last && from+1 >= f.oldestLocked():
		for i := range f.n {
			ev := f.ring[(f.start+i)%len(f.ring)]
			if ev.GetRevision() > from {
				backlog = append(backlog, ev)
			}
		}
	default:
		snap := snapshot()
		if snap.GetRevision() != f.last {
			panic(fmt.Sprintf("changefeed: snapshot at revision %d, feed at %d", snap.GetRevision(), f.last))
		}
		backlog = []*metav1.WatchResponse{snap}
	}
	return backlog, s
}

func (f *Feed) dropLocked(s *Subscription, err error) {
	if _, ok := f.subs[s]; !ok {
		return
	}
	delete(f.subs, s)
	s.err = err
	close(s.done)
}

// Subscription is one watcher's stream of events after its backlog.
type Subscription struct {
	feed *Feed
	ch   chan *metav1.WatchResponse
	done chan struct{}
	err  error // set under feed.mu before done closes
}

// C delivers events in revision order. Drain it until Done closes; events
// already in C when Done closes are still valid and in order.
func (s *Subscription) C() <-chan *metav1.WatchResponse { return s.ch }

// Done is closed when the feed ends the subscription (Err says why) or after
// Close.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended: ErrLagging, ErrReset, ErrClosed,
// or nil after the subscriber's own Close. It is only meaningful after Done.
func (s *Subscription) Err() error {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	return s.err
}

// Close ends the subscription; the feed stops delivering to it.
func (s *Subscription) Close() {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	if _, ok := s.feed.subs[s]; ok {
		delete(s.feed.subs, s)
		close(s.done)
	}
}
