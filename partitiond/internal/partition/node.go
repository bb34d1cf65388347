package partition

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/partitiond/internal/clock"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/producer"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/segment"
	"github.com/strataio/strata/partitiond/internal/statestore"
	"github.com/strataio/strata/partitiond/internal/syncer"
)

// Directory names under NodeConfig.Dir.
const (
	LogsDir  = "logs"
	StateDir = "state"
)

type key struct {
	topic string
	part  int32
}

// Node is partitiond's storage: every partition hosted by this process, the
// node state store, the group-commit syncer and the segment reader cache.
type Node struct {
	cfg       NodeConfig
	fs        fsys.FS
	logsDir   string
	clock     clock.Clock
	log       *slog.Logger
	inspector record.Inspector
	state     *statestore.Store
	syncer    *syncer.Syncer
	cache     *seglog.ReaderCache

	// mu guards the registry; lifecycle operations hold lifeMu for their
	// whole duration so they never interleave. The lock order of the whole
	// engine is in partitiond/LOCKS.md.
	mu     sync.RWMutex
	lifeMu sync.Mutex
	parts  map[key]*Partition
	failed map[key]error
	// orphans are log directories whose removal is still outstanding.
	orphans map[string]bool
	closed  bool

	storageFailures atomic.Uint64
	// dropped counts the page-cache bytes the logs gave back: [0] after
	// writes, [1] after reads (seglog.Config.OnDrop).
	dropped     [2]atomic.Uint64
	compactMu   sync.Mutex
	compactRuns map[[2]string]uint64

	loopStop context.CancelFunc
	loopDone chan struct{}

	// durable fires whenever any partition's durable end advances.
	durable signal
	// fsync is the latency histogram of the logs' fdatasyncs.
	fsync prometheus.Histogram
}

// DurableChanged returns a channel closed at the next durable-end advance of
// any partition of the node: one wait for a follower's long poll over many
// partitions.
func (n *Node) DurableChanged() <-chan struct{} { return n.durable.wait() }

// Open opens the node's storage under cfg.Dir: the state store, then every
// partition it lists (recovering each log), resuming deletes and truncates
// that were interrupted. A partition whose storage is damaged does not stop
// the node: it is recorded as failed and every request to it answers with
// the startup error (errcode.StorageCorrupt). ctx bounds nothing yet; it is
// there for the callers' deadlines.
func Open(ctx context.Context, cfg NodeConfig) (*Node, error) {
	_ = ctx
	if cfg.Dir == "" {
		return nil, errcode.InvalidParameter.New("partitiond storage needs a directory", "param", "dir")
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if cfg.StateFS == nil {
		cfg.StateFS = cfg.FS
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Defaults.fill()
	if !validPolicy(cfg.Defaults.CleanupPolicy) {
		return nil, errcode.InvalidTopicPolicy.New("unknown default cleanup policy", "cleanup_policy", cfg.Defaults.CleanupPolicy)
	}
	if cfg.ReaderCacheSize <= 0 {
		cfg.ReaderCacheSize = 512
	}
	fs := fsys.FromVFS(cfg.FS)
	n := &Node{
		cfg:         cfg,
		fs:          fs,
		logsDir:     fs.Join(cfg.Dir, LogsDir),
		clock:       cfg.Clock,
		log:         cfg.Logger,
		inspector:   record.Wire{},
		parts:       make(map[key]*Partition),
		failed:      make(map[key]error),
		orphans:     make(map[string]bool),
		compactRuns: make(map[[2]string]uint64),
		fsync:       newFsyncHistogram(),
	}
	if err := fs.MkdirAll(n.logsDir); err != nil {
		return nil, errcode.StorageUnavailable.New("create " + n.logsDir + ": " + err.Error())
	}
	if err := fs.SyncDir(cfg.Dir); err != nil {
		return nil, errcode.StorageUnavailable.New("sync " + cfg.Dir + ": " + err.Error())
	}
	st, err := statestore.Open(fsys.FromVFS(cfg.StateFS).Join(cfg.Dir, StateDir), cfg.StateFS, cfg.Logger)
	if err != nil {
		return nil, err
	}
	n.state = st
	n.syncer = syncer.New(cfg.SyncParallel)
	n.cache = seglog.NewReaderCache(cfg.ReaderCacheSize)
	if err := n.load(); err != nil {
		n.closeAll()
		return nil, err
	}
	if cfg.MaintenanceInterval > 0 {
		ctx, stop := context.WithCancel(context.Background())
		n.loopStop, n.loopDone = stop, make(chan struct{})
		go n.maintenanceLoop(ctx, cfg.MaintenanceInterval)
	}
	return n, nil
}

func (n *Node) load() error {
	metas, err := n.state.Metas()
	if err != nil {
		return err
	}
	referenced := map[string]bool{}
	for _, m := range metas {
		k := key{m.Topic, m.Partition}
		switch m.State {
		case statestore.StateDeleting:
			// A delete committed before the crash: finish the cleanup.
			if err := n.removeDir(m.Dir); err != nil {
				n.log.Warn("partition cleanup still pending", "topic", m.Topic, "partition", m.Partition, "err", err)
				referenced[m.Dir] = true
				continue
			}
			if err := n.state.RemovePartition(m.Topic, m.Partition); err != nil {
				return err
			}
		default:
			referenced[m.Dir] = true
			p, err := n.openPartition(m)
			if err != nil {
				n.log.Error("partition failed to open", "topic", m.Topic, "partition", m.Partition, "err", err)
				n.failed[k] = err
				continue
			}
			n.parts[k] = p
		}
	}
	// Directories no meta points at were left by a truncate or delete that
	// crashed after its state change: remove them.
	names, err := n.fs.List(n.logsDir)
	if err != nil {
		return errcode.StorageUnavailable.New("list " + n.logsDir + ": " + err.Error())
	}
	for _, name := range names {
		if referenced[name] {
			continue
		}
		if err := n.removeDir(name); err != nil {
			n.log.Warn("orphan log directory not removed", "dir", name, "err", err)
			n.orphans[name] = true
		}
	}
	return nil
}

func (n *Node) removeDir(name string) error {
	if err := n.fs.RemoveAll(n.fs.Join(n.logsDir, name)); err != nil {
		return err
	}
	return n.fs.SyncDir(n.logsDir)
}

// ensurePartitionFile writes the directory's partition.json when it is
// missing: at creation, and once for a directory of the layout before the
// file existed (a failure there only warns: the state store, not the file,
// is what the node reads).
func (n *Node) ensurePartitionFile(dir string, m statestore.Meta) error {
	exists, err := n.fs.Exists(n.fs.Join(dir, PartitionFile))
	if err == nil && exists {
		return nil
	}
	if err == nil {
		err = writePartitionFile(n.fs, dir, m.Topic, m.Partition, m.LifecycleEpoch)
	}
	if err != nil && m.State == statestore.StateCreating {
		return err
	}
	if err != nil {
		n.log.Warn("partition.json not written", "topic", m.Topic, "partition", m.Partition, "err", err)
	}
	return nil
}

// openPartition opens (creating when the meta says so) a partition's log and
// rebuilds its producer state from the checkpoint and the log after it.
func (n *Node) openPartition(m statestore.Meta) (*Partition, error) {
	dir := n.fs.Join(n.logsDir, m.Dir)
	exists, err := n.fs.Exists(dir)
	if err != nil {
		return nil, errcode.StorageUnavailable.New("stat " + dir + ": " + err.Error())
	}
	if !exists {
		if m.State != statestore.StateCreating {
			return nil, errcode.StorageCorrupt.New("partition log directory is missing", "topic", m.Topic,
				"partition", strconv.Itoa(int(m.Partition)), "dir", m.Dir)
		}
		if err := n.fs.MkdirAll(dir); err != nil {
			return nil, errcode.StorageUnavailable.New("create " + dir + ": " + err.Error())
		}
		if err := n.fs.SyncDir(n.logsDir); err != nil {
			return nil, errcode.StorageUnavailable.New("sync " + n.logsDir + ": " + err.Error())
		}
	}
	if err := n.ensurePartitionFile(dir, m); err != nil {
		return nil, err
	}
	p := &Partition{node: n, topic: m.Topic, id: m.Partition}
	p.hwmCap.Store(NoHWMCap)
	d := n.cfg.Defaults
	l, err := seglog.Open(seglog.Config{
		Dir: dir, FS: n.fs, Clock: n.clock, Syncer: n.syncer, Cache: n.cache, Inspector: n.inspector,
		Logger:       n.log.With("topic", m.Topic, "partition", m.Partition),
		SegmentBytes: d.SegmentBytes, SegmentAge: d.SegmentAge, IndexInterval: d.IndexInterval,
		Preallocate: d.SegmentPreallocate,
		CacheWindow: d.SegmentCacheWindow,
		VerifyAll:   n.cfg.VerifyOnOpen,
		OnFence:     p.onFence,
		OnDurable:   n.durable.fire,
		OnSync:      func(d time.Duration) { n.fsync.Observe(d.Seconds()) },
		OnDrop:      n.onDrop,
	})
	if err != nil {
		return nil, withPartition(err, m.Topic, m.Partition)
	}
	p.log = l
	if m.State == statestore.StateCreating {
		m.State = statestore.StateLive
		if err := n.state.PutMeta(m, true); err != nil {
			_ = l.Close()
			return nil, err
		}
	}
	p.meta.Store(&m)
	if err := p.rebuildProducers(); err != nil {
		_ = l.Close()
		return nil, err
	}
	if err := p.rebuildTxns(); err != nil {
		_ = l.Close()
		return nil, err
	}
	p.lastProducerCkpt = p.producerCovered
	return p, nil
}

// rebuildProducers loads the producer checkpoint and replays the idempotent
// batches after it, so the dedup window (the last five batches of each
// producer) survives restarts.
func (p *Partition) rebuildProducers() error {
	n := p.node
	t := producer.NewTable(n.cfg.Defaults.ProducerStateTTL)
	covered, entries, ok, err := n.state.ProducerCheckpoint(p.topic, p.id)
	if err != nil {
		return err
	}
	from := p.log.StartOffset()
	if ok && covered <= p.log.EndOffset() {
		es := make([]producer.Entry, 0, len(entries))
		for _, e := range entries {
			s, err := producer.Decode(e.State)
			if err != nil {
				return errcode.StorageCorrupt.New("producer checkpoint does not decode: "+err.Error(), p.fields("producer", e.ID)...)
			}
			es = append(es, producer.Entry{ID: e.ID, State: s})
		}
		t.Restore(es)
		from = max(from, covered)
		p.producerCovered = covered
	}
	err = p.log.ScanBatches(from, math.MaxUint64, func(h *segment.Header, _ []byte) error {
		if h.Flags&segment.FlagIdempotent != 0 && h.BaseSequence > 0 {
			t.Record(producer.Batch{ProducerID: string(h.ProducerID), Epoch: h.ProducerEpoch,
				BaseSeq: h.BaseSequence, LastSeq: h.LastSequence}, h.BaseOffset, h.LastOffset(), h.AppendTime)
		}
		return nil
	})
	if err != nil {
		return p.storageErr(err)
	}
	t.Expire(n.clock.Now())
	p.producers = t
	return nil
}

func (p *Partition) onFence(err error) {
	p.node.storageFailures.Add(1)
	if f := p.node.cfg.OnStorageFailure; f != nil {
		f(p.topic, p.id, err)
	}
}

// PartitionSpec describes a partition to host (from metad's assignment).
type PartitionSpec struct {
	Topic          string
	Partition      int32
	LifecycleEpoch uint64
	LeaderEpoch    uint64
	Config         TopicConfig
}

// Partition returns a hosted partition. Missing partitions answer
// errcode.PartitionNotFound; a partition that failed to open answers with
// its startup error.
func (n *Node) Partition(topic string, id int32) (*Partition, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if p, ok := n.parts[key{topic, id}]; ok {
		return p, nil
	}
	if err, ok := n.failed[key{topic, id}]; ok {
		return nil, err
	}
	return nil, errcode.PartitionNotFound.New("partition is not hosted on this node", "topic", topic, "partition", strconv.Itoa(int(id)))
}

// Partitions returns every hosted (open) partition.
func (n *Node) Partitions() []*Partition {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*Partition, 0, len(n.parts))
	for _, p := range n.parts {
		out = append(out, p)
	}
	return out
}

// CreatePartition hosts a partition, or updates it when it exists: it is
// idempotent and is what the metad watcher calls for every assignment it
// sees. An existing partition under an older lifecycle epoch is truncated to
// the new epoch first; a spec with an older epoch than the local one is
// errcode.StaleLifecycleEpoch. A name whose delete cleanup is outstanding
// answers errcode.TopicCleanupPending until that cleanup succeeds.
func (n *Node) CreatePartition(ctx context.Context, spec PartitionSpec) (*Partition, error) {
	if err := checkSpec(spec.Topic, spec.Partition, spec.Config); err != nil {
		return nil, err
	}
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if err := n.checkOpen(); err != nil {
		return nil, err
	}
	k := key{spec.Topic, spec.Partition}
	n.mu.RLock()
	p := n.parts[k]
	ferr := n.failed[k]
	n.mu.RUnlock()
	if ferr != nil {
		return nil, ferr
	}
	if p != nil {
		cur := p.meta.Load()
		switch {
		case spec.LifecycleEpoch < cur.LifecycleEpoch:
			return nil, errcode.StaleLifecycleEpoch.New("assignment carries an older lifecycle epoch",
				p.fields("current", utoa(cur.LifecycleEpoch), "got", utoa(spec.LifecycleEpoch))...)
		case spec.LifecycleEpoch > cur.LifecycleEpoch:
			np, _, err := n.truncateLocked(p, spec.LifecycleEpoch)
			if err != nil {
				return nil, err
			}
			p = np
		}
		m := *p.meta.Load()
		m.Config = spec.Config
		m.LeaderEpoch = max(m.LeaderEpoch, spec.LeaderEpoch)
		if m != *p.meta.Load() {
			if err := n.state.PutMeta(m, true); err != nil {
				return nil, err
			}
			p.meta.Store(&m)
		}
		return p, nil
	}
	if old, ok, err := n.state.Meta(spec.Topic, spec.Partition); err != nil {
		return nil, err
	} else if ok && old.State == statestore.StateDeleting {
		if done, err := n.finishDelete(old); err != nil || !done {
			return nil, errcode.TopicCleanupPending.New("node-local cleanup of the deleted partition is outstanding",
				"topic", spec.Topic, "partition", strconv.Itoa(int(spec.Partition)))
		}
	}
	m := statestore.Meta{
		Topic: spec.Topic, Partition: spec.Partition, LifecycleEpoch: spec.LifecycleEpoch,
		State: statestore.StateCreating, Dir: dirName(spec.Topic, spec.Partition, spec.LifecycleEpoch, time.Now()),
		Config: spec.Config, LeaderEpoch: spec.LeaderEpoch,
	}
	if err := n.state.PutMeta(m, true); err != nil {
		return nil, err
	}
	np, err := n.openPartition(m)
	if err != nil {
		n.mu.Lock()
		n.failed[k] = err
		n.mu.Unlock()
		return nil, err
	}
	n.mu.Lock()
	n.parts[k] = np
	n.mu.Unlock()
	return np, nil
}

// SetLeaderEpoch records the partition's leader epoch (from metad); later
// appends are stored under it and start a new entry of the log's epoch
// history. Lower epochs are ignored.
func (p *Partition) SetLeaderEpoch(e uint64) error {
	p.node.lifeMu.Lock()
	defer p.node.lifeMu.Unlock()
	if err := p.checkGone(); err != nil {
		return err
	}
	m := *p.meta.Load()
	if e <= m.LeaderEpoch {
		return nil
	}
	m.LeaderEpoch = e
	if err := p.node.state.PutMeta(m, true); err != nil {
		return err
	}
	p.mu.Lock()
	p.meta.Store(&m)
	p.mu.Unlock()
	return nil
}

// retire takes p out of service for a lifecycle change: in-flight appends
// finish first, later requests see why it is gone, and the log is closed
// (syncing what was written).
func (p *Partition) retire(reason int32, newEpoch uint64) {
	p.maint.Lock()
	p.mu.Lock()
	p.goneEpoch.Store(newEpoch)
	p.gone.Store(reason)
	p.mu.Unlock()
	if err := p.log.Close(); err != nil {
		p.node.log.Warn("closing a retired partition log failed", "topic", p.topic, "partition", p.id, "err", err)
	}
	p.maint.Unlock()
}

// TruncatePartition resets a partition to leo 0 and hwm 0 under a new
// lifecycle epoch (spec 3.1, 4.4 TRUNCATE). The new epoch marker, with the
// partition's producer, HWM and other state dropped, is durable before the
// storage is replaced; requests with an older epoch are then fenced with
// errcode.StaleLifecycleEpoch. Repeating a truncate to the current epoch
// is a no-op that retries outstanding cleanup. complete is false when the
// old log directory could not be removed yet (cleanup_pending); Open and
// later calls retry it.
func (n *Node) TruncatePartition(ctx context.Context, topic string, id int32, newEpoch uint64) (complete bool, err error) {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if err := n.checkOpen(); err != nil {
		return false, err
	}
	p, err := n.Partition(topic, id)
	if err != nil {
		return false, err
	}
	cur := p.meta.Load().LifecycleEpoch
	if newEpoch < cur {
		return false, errcode.StaleLifecycleEpoch.New("truncate to an older lifecycle epoch",
			p.fields("current", utoa(cur), "got", utoa(newEpoch))...)
	}
	if newEpoch == cur {
		return n.retryOrphans(), nil
	}
	_, complete, err = n.truncateLocked(p, newEpoch)
	return complete, err
}

func (n *Node) truncateLocked(p *Partition, newEpoch uint64) (*Partition, bool, error) {
	old := *p.meta.Load()
	m := old
	m.LifecycleEpoch = newEpoch
	m.State = statestore.StateCreating
	m.Dir = dirName(p.topic, p.id, newEpoch, time.Now())
	// 1. The new epoch is durable, and the old epoch's state gone, before
	//    anything of the old storage changes.
	if err := n.state.ResetPartition(m); err != nil {
		return nil, false, err
	}
	// 2. Fence the old partition.
	p.retire(goneTruncated, newEpoch)
	k := key{p.topic, p.id}
	// 3. Fresh, empty log.
	np, err := n.openPartition(m)
	n.mu.Lock()
	if err != nil {
		delete(n.parts, k)
		n.failed[k] = err
	} else {
		n.parts[k] = np
	}
	n.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	// 4. Remove the old data.
	complete := true
	if err := n.removeDir(old.Dir); err != nil {
		n.log.Warn("truncate cleanup pending", "topic", p.topic, "partition", p.id, "dir", old.Dir, "err", err)
		n.mu.Lock()
		n.orphans[old.Dir] = true
		n.mu.Unlock()
		complete = false
	}
	return np, complete, nil
}

// retryOrphans retries the removal of old log directories; it reports
// whether none is left.
func (n *Node) retryOrphans() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for d := range n.orphans {
		if err := n.removeDir(d); err == nil {
			delete(n.orphans, d)
		}
	}
	return len(n.orphans) == 0
}

// DeletePartition stops hosting a partition and removes its data and state.
// It is safe to retry: deleting a partition that is not hosted completes
// any cleanup left from an earlier attempt and otherwise succeeds. complete
// is false when the node-local cleanup must be retried (cleanup_pending).
func (n *Node) DeletePartition(ctx context.Context, topic string, id int32) (complete bool, err error) {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if err := n.checkOpen(); err != nil {
		return false, err
	}
	k := key{topic, id}
	m, ok, err := n.state.Meta(topic, id)
	if err != nil {
		return false, err
	}
	if !ok {
		n.mu.Lock()
		delete(n.failed, k)
		n.mu.Unlock()
		return n.retryOrphans(), nil
	}
	if m.State != statestore.StateDeleting {
		m.State = statestore.StateDeleting
		if err := n.state.PutMeta(m, true); err != nil {
			return false, err
		}
	}
	n.mu.Lock()
	p := n.parts[k]
	delete(n.parts, k)
	delete(n.failed, k)
	n.mu.Unlock()
	if p != nil {
		p.retire(goneDeleted, 0)
	}
	return n.finishDelete(m)
}

func (n *Node) finishDelete(m statestore.Meta) (bool, error) {
	if err := n.removeDir(m.Dir); err != nil {
		n.log.Warn("delete cleanup pending", "topic", m.Topic, "partition", m.Partition, "err", err)
		return false, nil
	}
	if err := n.state.RemovePartition(m.Topic, m.Partition); err != nil {
		n.log.Warn("delete cleanup pending", "topic", m.Topic, "partition", m.Partition, "err", err)
		return false, nil
	}
	return true, nil
}

func (n *Node) checkOpen() error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return errcode.StorageUnavailable.New("partition storage is closed")
	}
	return nil
}

// Close checkpoints and closes every partition, then the syncer and the
// state store. Requests in flight fail or finish; later ones fail.
func (n *Node) Close() error {
	if n.loopStop != nil {
		n.loopStop()
		<-n.loopDone
		n.loopStop = nil
	}
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	parts := n.parts
	n.parts = map[key]*Partition{}
	n.mu.Unlock()
	var first error
	for _, p := range parts {
		p.maint.Lock()
		if p.gone.Load() == goneNot {
			if _, err := p.checkpointProducers(true); err != nil && first == nil && p.log.Fenced() == nil {
				first = err
			}
			_ = n.state.PutHWM(p.topic, p.id, statestore.HWM{HWM: p.highWatermark(), LeaderEpoch: p.LeaderEpoch(), LifecycleEpoch: p.LifecycleEpoch()})
		}
		p.maint.Unlock()
		p.retire(goneClosed, 0)
	}
	n.closeAll()
	return first
}

func (n *Node) closeAll() {
	if n.syncer != nil {
		n.syncer.Close()
	}
	if n.state != nil {
		_ = n.state.Close()
	}
}

// maintenanceLoop runs Maintain every interval until ctx ends; a pass
// that started finishes (it is not cancelled with the loop).
func (n *Node) maintenanceLoop(ctx context.Context, every time.Duration) {
	defer close(n.loopDone)
	pace.Every(ctx, every, func() { n.Maintain(context.Background()) })
}

// onDrop counts page-cache bytes a log gave back (seglog.Config.OnDrop).
func (n *Node) onDrop(read bool, b int64) {
	i := 0
	if read {
		i = 1
	}
	n.dropped[i].Add(uint64(b))
}
