package replica

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// Meta is what replication asks metad: ISR changes and HWM checkpoints.
type Meta interface {
	AlterIsr(ctx context.Context, req *metav1.AlterIsrRequest) (*metav1.AlterIsrResponse, error)
	CheckpointHwm(ctx context.Context, req *metav1.CheckpointHwmRequest) error
}

// Config configures a Manager.
type Config struct {
	// NodeID is this partition server's id (replica ids are node ids).
	NodeID string
	// Node is the local storage; its DurableChanged wakes long polls.
	Node *partition.Node
	Meta Meta
	// Dial returns a client to a partition server's internal address.
	Dial func(addr string) (partitionv1.PartitionServiceClient, error)
	// MaxLag: a follower not caught up for this long leaves the ISR
	// (Kafka's replica.lag.time.max.ms). Default 10 s.
	MaxLag time.Duration
	// FetchMaxWait bounds a follower's long poll on the leader (default
	// 500 ms); FetchMaxBytes and PartitionMaxBytes bound one answer
	// (defaults 16 MiB and 4 MiB).
	FetchMaxWait      time.Duration
	FetchMaxBytes     int
	PartitionMaxBytes int
	// RetryBackoff is the pause after a failed fetch session (default
	// 100 ms, doubling to 2 s).
	RetryBackoff time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
	// Metrics receives replication events (optional).
	Metrics *Metrics
}

func (c *Config) setDefaults() {
	if c.MaxLag <= 0 {
		c.MaxLag = 10 * time.Second
	}
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = 500 * time.Millisecond
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = 16 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 4 << 20
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Metrics == nil {
		c.Metrics = &Metrics{}
	}
}

type key struct {
	topic string
	id    int32
}

// Assignment is a local partition's place in metad's view.
type Assignment struct {
	Part           *partition.Partition
	Topic          string
	Partition      int32
	LifecycleEpoch uint64
	LeaderEpoch    uint64
	// Leader is the leader's node id ("" while the partition is offline)
	// and LeaderAddr its internal RPC address.
	Leader     string
	LeaderAddr string
	Replicas   []string
	ISR        []string
	// MinISR is the effective minimum ISR (topic override, else broker
	// default).
	MinISR int
}

// Manager runs replication for the node's partitions. Create it with New,
// feed it metad's view with Apply and Remove, serve ReplicaFetch with
// Serve, and stop it with Close.
type Manager struct {
	cfg Config

	mu       sync.Mutex
	leaders  map[key]*leaderState
	follows  map[key]*follow
	fetchers map[string]*fetcher // by leader node id + address
	closed   bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Manager and starts its ISR maintenance loop.
func New(cfg Config) *Manager {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, leaders: map[key]*leaderState{}, follows: map[key]*follow{},
		fetchers: map[string]*fetcher{}, ctx: ctx, cancel: cancel}
	m.wg.Add(1)
	go m.isrLoop()
	return m
}

// Close stops every fetcher and the ISR loop and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	fs := m.fetchers
	m.fetchers = map[string]*fetcher{}
	m.mu.Unlock()
	m.cancel()
	for _, f := range fs {
		f.stop()
	}
	m.wg.Wait()
}

// Apply gives a local partition the role the view assigns it. Repeating
// the same assignment changes nothing.
func (m *Manager) Apply(a Assignment) {
	k := key{a.Topic, a.Partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if a.Leader == m.cfg.NodeID {
		if ls := m.leaders[k]; ls != nil && ls.part == a.Part && ls.epoch == a.LeaderEpoch {
			ls.update(a)
			return
		}
		m.stopFollowingLocked(k)
		ls := newLeaderState(m, a)
		m.leaders[k] = ls
		a.Part.SetFollower(false)
		ls.mu.Lock()
		ls.recomputeLocked()
		ls.mu.Unlock()
		m.cfg.Logger.Info("leading partition", "topic", a.Topic, "partition", a.Partition, "leader_epoch", a.LeaderEpoch,
			"isr", a.ISR, "hwm", a.Part.HighWatermark(), "leo", a.Part.LogEndOffset())
		return
	}
	if ls := m.leaders[k]; ls != nil {
		delete(m.leaders, k)
		m.cfg.Logger.Info("stopped leading partition", "topic", a.Topic, "partition", a.Partition,
			"leader_epoch", ls.epoch, "new_leader", a.Leader, "new_epoch", a.LeaderEpoch)
	}
	if !a.Part.Follower() {
		// A new follower's HWM is what it last knew committed (a restarted
		// node's durable end may hold records its leader never had); the
		// leader's answers move it on.
		a.Part.SetFollower(true)
		a.Part.LowerHWM(min(a.Part.HighWatermark(), a.Part.CheckpointedHWM()))
	}
	if f := m.follows[k]; f != nil && f.part == a.Part && f.leader == a.Leader && f.addr == a.LeaderAddr &&
		f.leaderEpoch() == a.LeaderEpoch {
		return
	}
	m.stopFollowingLocked(k)
	if a.Leader == "" || a.LeaderAddr == "" {
		return // offline: wait for the next view
	}
	f := &follow{key: k, part: a.Part, leader: a.Leader, addr: a.LeaderAddr, lifecycle: a.LifecycleEpoch}
	f.epoch.Store(a.LeaderEpoch)
	m.follows[k] = f
	fk := a.Leader + "@" + a.LeaderAddr
	fe := m.fetchers[fk]
	if fe == nil {
		fe = newFetcher(m, a.Leader, a.LeaderAddr)
		m.fetchers[fk] = fe
	}
	fe.add(f)
}

// Remove forgets a partition (deleted, truncated into a new incarnation, or
// no longer assigned here).
func (m *Manager) Remove(topic string, id int32) {
	k := key{topic, id}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.leaders, k)
	m.stopFollowingLocked(k)
}

// stopFollowingLocked takes k out of its fetcher, waiting until the fetcher
// is done with it, and stops fetchers left without partitions. m.mu is held.
func (m *Manager) stopFollowingLocked(k key) {
	f := m.follows[k]
	if f == nil {
		return
	}
	delete(m.follows, k)
	fk := f.leader + "@" + f.addr
	if fe := m.fetchers[fk]; fe != nil {
		if fe.remove(k) == 0 {
			delete(m.fetchers, fk)
			fe.stop()
		}
	}
}

// Leading reports whether this node leads the partition at the given
// lifecycle epoch, with the ISR size and the effective minimum: what an
// acks=all append is checked against before it is written.
func (m *Manager) Leading(topic string, id int32) (isr, minISR int, ok bool) {
	m.mu.Lock()
	ls := m.leaders[key{topic, id}]
	m.mu.Unlock()
	if ls == nil {
		return 0, 0, false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.isr), ls.minISR, true
}

// PartitionStats is one led partition's replication state, for metrics.
type PartitionStats struct {
	Topic     string
	Partition int32
	Replicas  int
	ISR       int
	Followers []FollowerStats
}

// FollowerStats is a follower's lag as its leader sees it.
type FollowerStats struct {
	ID         string
	InSync     bool
	LagRecords uint64
	// LagSeconds is how long the follower has not been caught up (0 when
	// it is).
	LagSeconds float64
}

// Stats returns the replication state of every partition this node leads.
func (m *Manager) Stats() []PartitionStats {
	m.mu.Lock()
	ls := make([]*leaderState, 0, len(m.leaders))
	for _, l := range m.leaders {
		ls = append(ls, l)
	}
	m.mu.Unlock()
	now := m.cfg.Now()
	out := make([]PartitionStats, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.stats(now))
	}
	slices.SortFunc(out, func(a, b PartitionStats) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

func (m *Manager) leader(k key) *leaderState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaders[k]
}

// isrLoop proposes ISR changes every MaxLag/4 (at least every second).
func (m *Manager) isrLoop() {
	defer m.wg.Done()
	every := min(max(m.cfg.MaxLag/4, 20*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		ls := make([]*leaderState, 0, len(m.leaders))
		for _, l := range m.leaders {
			ls = append(ls, l)
		}
		m.mu.Unlock()
		now := m.cfg.Now()
		for _, l := range ls {
			l.maybeAlterISR(now)
		}
	}
}
