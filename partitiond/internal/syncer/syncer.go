package syncer

import (
	"sync"
	"sync/atomic"

	"github.com/strataio/strata/partitiond/internal/seglog"
)

// DefaultParallel bounds concurrent fdatasyncs of one round.
const DefaultParallel = 8

// Syncer batches sync requests. Create it with New and stop it with Close.
type Syncer struct {
	parallel int

	mu      sync.Mutex
	pending []seglog.SyncTarget
	wake    chan struct{}
	closed  bool

	done   chan struct{}
	rounds atomic.Uint64
}

// New starts a syncer running at most parallel syncs at once (<= 0 picks
// DefaultParallel).
func New(parallel int) *Syncer {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	s := &Syncer{parallel: parallel, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Request queues t; t.SyncPending runs in the next round. Targets dedupe
// their own requests (seglog.Log queues itself at most once). After Close,
// Request runs the sync on the caller's goroutine so nothing waits forever.
func (s *Syncer) Request(t seglog.SyncTarget) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		t.SyncPending()
		return
	}
	s.pending = append(s.pending, t)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Rounds returns how many sync rounds ran.
func (s *Syncer) Rounds() uint64 { return s.rounds.Load() }

func (s *Syncer) run() {
	defer close(s.done)
	var batch []seglog.SyncTarget
	for {
		s.mu.Lock()
		batch, s.pending = s.pending, batch[:0]
		closed := s.closed
		s.mu.Unlock()
		if len(batch) > 0 {
			s.round(batch)
			clear(batch)
			continue
		}
		if closed {
			return
		}
		<-s.wake
	}
}

func (s *Syncer) round(batch []seglog.SyncTarget) {
	s.rounds.Add(1)
	if len(batch) == 1 {
		batch[0].SyncPending()
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.parallel)
	for _, t := range batch {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			t.SyncPending()
		}()
	}
	wg.Wait()
}

// Close runs the pending syncs and stops the goroutine.
func (s *Syncer) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done
}
