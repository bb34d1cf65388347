package replica

import (
	"sync"
	"sync/atomic"

	"github.com/strataio/strata/libs/errcode"
)

// Metrics counts replication events; the role exports them (with the
// per-partition state from Manager.Stats) at scrape time.
type Metrics struct {
	FetchesServed     atomic.Uint64
	BytesServed       atomic.Uint64
	FetchesMade       atomic.Uint64
	BytesReplicated   atomic.Uint64
	FetchErrors       atomic.Uint64
	Truncations       atomic.Uint64
	Divergences       atomic.Uint64
	ISRShrinks        atomic.Uint64
	ISRExpands        atomic.Uint64
	ISRChangeFailures atomic.Uint64
	RefusedReplicaIDs atomic.Uint64
	SessionFailures   atomic.Uint64

	// failures counts a follower's failed fetches by topic and error class:
	// a partition's error in an answer, and a failed session (the leader
	// unreachable, the stream broken) once for every topic it followed. The
	// spec's async_replication_failures: what keeps a follower from copying
	// what the leader acknowledged with acks=1.
	mu       sync.Mutex
	failures map[[2]string]uint64
}

func (m *Metrics) fetchFailed(topic string, err error) {
	m.FetchErrors.Add(1)
	m.failed(topic, err)
}

// sessionFailed counts a fetch session that ended with err while following
// partitions of topics.
func (m *Metrics) sessionFailed(topics []string, err error) {
	m.SessionFailures.Add(1)
	for _, t := range topics {
		m.failed(t, err)
	}
}

func (m *Metrics) failed(topic string, err error) {
	class := "internal"
	if e, ok := errcode.As(err); ok {
		class = e.Class.String()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failures == nil {
		m.failures = map[[2]string]uint64{}
	}
	m.failures[[2]string{topic, class}]++
}

// Failures calls fn for every (topic, error class) with failed follower
// fetches, and their count.
func (m *Metrics) Failures(fn func(topic, class string, n uint64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, n := range m.failures {
		fn(k[0], k[1], n)
	}
}

func (m *Metrics) served(bytes int) {
	m.FetchesServed.Add(1)
	m.BytesServed.Add(uint64(bytes))
}

func (m *Metrics) diverged()        { m.Divergences.Add(1) }
func (m *Metrics) replicaRefused()  { m.RefusedReplicaIDs.Add(1) }
func (m *Metrics) isrChangeFailed() { m.ISRChangeFailures.Add(1) }
func (m *Metrics) isrChanged(shrink bool) {
	if shrink {
		m.ISRShrinks.Add(1)
	} else {
		m.ISRExpands.Add(1)
	}
}
