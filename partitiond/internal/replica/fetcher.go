package replica

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/rpc"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// follow is one partition this node follows.
type follow struct {
	key       key
	part      *partition.Partition
	leader    string
	addr      string
	lifecycle uint64
	epoch     atomic.Uint64

	// mu is held while the fetcher applies an answer to this partition;
	// removal takes it, so a role change never races an append.
	mu      sync.Mutex
	removed bool

	retryAt time.Time // fetcher goroutine only
}

func (f *follow) leaderEpoch() uint64 { return f.epoch.Load() }

// fetcher is the fetch session of this node with one leader: one goroutine,
// one stream, every partition this node follows on that leader.
type fetcher struct {
	m      *Manager
	leader string
	addr   string

	mu    sync.Mutex
	parts map[key]*follow
	wake  chan struct{}
	// While a request is out (between Send and the answer), asking holds
	// its partitions and endRequest ends the session: a partition added
	// then does not wait out the leader's long poll (up to FetchMaxWait)
	// before its first fetch: the session restarts at once (restart set)
	// and asks for it.
	asking     map[key]bool
	endRequest context.CancelFunc
	restart    bool

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newFetcher(m *Manager, leader, addr string) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	fe := &fetcher{m: m, leader: leader, addr: addr, parts: map[key]*follow{}, wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go fe.run()
	return fe
}

func (fe *fetcher) add(f *follow) {
	fe.mu.Lock()
	fe.parts[f.key] = f
	if fe.asking != nil && !fe.asking[f.key] && fe.endRequest != nil {
		fe.restart = true
		fe.endRequest()
	}
	fe.mu.Unlock()
	fe.poke()
}

// remove takes a partition out, waiting until an answer being applied to
// it is done, and returns how many partitions remain.
func (fe *fetcher) remove(k key) int {
	fe.mu.Lock()
	f := fe.parts[k]
	delete(fe.parts, k)
	n := len(fe.parts)
	fe.mu.Unlock()
	if f != nil {
		f.mu.Lock()
		f.removed = true
		f.mu.Unlock()
	}
	return n
}

func (fe *fetcher) poke() {
	select {
	case fe.wake <- struct{}{}:
	default:
	}
}

func (fe *fetcher) stop() {
	fe.cancel()
	<-fe.done
}

func (fe *fetcher) snapshot() []*follow {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	out := make([]*follow, 0, len(fe.parts))
	for _, f := range fe.parts {
		out = append(out, f)
	}
	return out
}

// topics returns the distinct topics of the followed partitions.
func (fe *fetcher) topics() []string {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	var out []string
	for k := range fe.parts {
		if !slices.Contains(out, k.topic) {
			out = append(out, k.topic)
		}
	}
	return out
}

func (fe *fetcher) run() {
	defer close(fe.done)
	cfg := &fe.m.cfg
	backoff := pace.Backoff{Initial: cfg.RetryBackoff, Max: 2 * time.Second}
	for fe.ctx.Err() == nil {
		if len(fe.snapshot()) == 0 {
			select {
			case <-fe.wake:
				continue
			case <-fe.ctx.Done():
				return
			}
		}
		progressed, err := fe.session()
		if fe.ctx.Err() != nil {
			return
		}
		fe.mu.Lock()
		restart := fe.restart
		fe.restart = false
		fe.mu.Unlock()
		if restart {
			continue // a partition was added: ask for it now
		}
		if progressed {
			backoff.Reset() // a healthy session ended: start the backoff afresh
		}
		cfg.Metrics.sessionFailed(fe.topics(), err)
		cfg.Logger.Debug("replica fetch session ended", "leader", fe.leader, "addr", fe.addr, "err", err)
		if !backoff.Wait(fe.ctx) {
			return
		}
	}
}

// session runs one stream until it fails or add restarts it; progressed
// reports that at least one answer arrived.
func (fe *fetcher) session() (progressed bool, err error) {
	cfg := &fe.m.cfg
	client, err := cfg.Dial(fe.addr)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(fe.ctx)
	defer cancel()
	stream, err := client.ReplicaFetch(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = stream.CloseSend() }()
	for {
		parts := fe.snapshot()
		now := cfg.Now()
		req := &partitionv1.ReplicaFetchRequest{ReplicaId: cfg.NodeID, MaxWaitMs: uint32(cfg.FetchMaxWait / time.Millisecond),
			MaxBytes: uint32(cfg.FetchMaxBytes), PartitionMaxBytes: uint32(cfg.PartitionMaxBytes)}
		var next time.Time
		sent := map[key]*follow{}
		for _, f := range parts {
			if now.Before(f.retryAt) {
				if next.IsZero() || f.retryAt.Before(next) {
					next = f.retryAt
				}
				continue
			}
			rp := &partitionv1.ReplicaFetchPartition{Topic: f.key.topic, Partition: f.key.id, LifecycleEpoch: f.lifecycle,
				LeaderEpoch: f.leaderEpoch(), FetchOffset: f.part.LogEndOffset()}
			if e, ok := f.part.LastBatchEpoch(); ok {
				rp.LastFetchedEpoch = &e
			}
			req.Partitions = append(req.Partitions, rp)
			sent[f.key] = f
		}
		if len(req.Partitions) == 0 {
			wait := time.Until(next)
			if next.IsZero() {
				wait = cfg.FetchMaxWait
			}
			select {
			case <-time.After(wait):
			case <-fe.wake:
			case <-ctx.Done():
				return progressed, ctx.Err()
			}
			continue
		}
		fe.mu.Lock()
		fe.asking, fe.endRequest = map[key]bool{}, cancel
		for k := range sent {
			fe.asking[k] = true
		}
		fe.mu.Unlock()
		err := stream.Send(req)
		// A large answer's batches alias a transport pool buffer the
		// session gives back once they are applied.
		resp := &rpc.Pooled[*partitionv1.ReplicaFetchResponse]{Msg: &partitionv1.ReplicaFetchResponse{}}
		if err == nil {
			err = stream.RecvMsg(resp)
		}
		fe.mu.Lock()
		fe.asking, fe.endRequest = nil, nil
		fe.mu.Unlock()
		if err != nil {
			return progressed, err
		}
		progressed = true
		cfg.Metrics.FetchesMade.Add(1)
		type written struct {
			f   *follow
			end uint64
		}
		var ws []written
		for _, d := range resp.Msg.GetPartitions() {
			f := sent[key{d.GetTopic(), d.GetPartition()}]
			if f == nil {
				continue
			}
			f.mu.Lock()
			if !f.removed {
				if end, ok := fe.apply(f, d); ok {
					ws = append(ws, written{f, end})
				}
			}
			f.mu.Unlock()
		}
		// Every batch is in the log (written, not referenced: the
		// producer table and the transaction index copy what they keep),
		// so the answer's buffer can serve the next one.
		resp.Buf.Release()
		// The next request reports durable ends: wait for the group commit
		// (on the fetcher's context: a session restart must not leave a
		// log end that is not durable to be reported next).
		for _, w := range ws {
			if err := w.f.part.WaitDurable(fe.ctx, w.end); err != nil {
				return progressed, err
			}
		}
	}
}

// apply applies one partition's answer; ok reports batches appended up to
// end. f.mu is held.
func (fe *fetcher) apply(f *follow, d *partitionv1.ReplicaFetchPartitionData) (end uint64, ok bool) {
	cfg := &fe.m.cfg
	// The logger is built only when something is logged: apply runs for
	// every partition of every answer, and Logger.With (a handler clone
	// and its attributes) was 2-4 % of a follower's CPU at 100 B records.
	log := func() *slog.Logger {
		return cfg.Logger.With("topic", f.key.topic, "partition", f.key.id, "leader", fe.leader)
	}
	retry := func(err error) {
		cfg.Metrics.fetchFailed(f.key.topic, err)
		f.retryAt = cfg.Now().Add(cfg.RetryBackoff)
		log().Debug("replica fetch of a partition failed", "err", err)
	}
	if d.GetError() != nil {
		e := errcode.FromProto(d.GetError())
		if errors.Is(e, errcode.OffsetOutOfRange) {
			leo := f.part.LogEndOffset()
			var err error
			switch {
			case leo < d.GetLogStartOffset():
				_, err = f.part.SkipTo(f.lifecycle, d.GetLogStartOffset())
				log().Info("follower log ends below the leader's start: skipping ahead", "from", leo, "to", d.GetLogStartOffset())
			case leo > d.GetLogEndOffset():
				_, err = f.part.TruncateTo(f.lifecycle, d.GetLogEndOffset())
				log().Info("follower log ends past the leader's: truncating", "from", leo, "to", d.GetLogEndOffset())
			}
			if err != nil {
				retry(err)
			}
			cfg.Metrics.Truncations.Add(1)
			return 0, false
		}
		retry(e)
		return 0, false
	}
	if dv := d.GetDiverging(); dv != nil {
		to := dv.GetEndOffset()
		if _, own, ok := f.part.EndOffsetForEpoch(dv.GetEpoch()); !ok {
			to = 0 // every batch here is from a later epoch than the leader knows
		} else {
			// The smaller of the two ends (KIP-279), also when this log
			// lacks the leader's epoch itself: its largest epoch below it
			// ends here at own, and every batch after own is from an
			// epoch the leader never had. Taking the leader's end alone
			// (when it lies past this log's end) cut nothing, and the
			// follower asked again with the same epoch forever.
			to = min(to, own)
		}
		leo := f.part.LogEndOffset()
		newEnd, err := f.part.TruncateTo(f.lifecycle, to)
		if err != nil {
			retry(err)
			return 0, false
		}
		cfg.Metrics.Truncations.Add(1)
		log().Info("follower log diverged from the leader's: truncated", "leader_epoch_end", dv.GetEpoch(),
			"leader_end_offset", dv.GetEndOffset(), "from", leo, "to", newEnd)
		if newEnd >= leo {
			// Nothing was cut, so the next fetch would diverge the same
			// way: back off rather than spin against the leader.
			retry(errcode.Internal.New("divergence truncation cut nothing", "log_end_offset", utoa(leo),
				"leader_epoch_end", utoa(dv.GetEpoch()), "leader_end_offset", utoa(dv.GetEndOffset())))
		}
		return 0, false
	}
	// The leader's HWM, as far as this log reaches (min with the durable
	// end is the partition's own rule).
	f.part.SetHWMCap(d.GetHighWatermark())
	if len(d.GetBatches()) == 0 {
		return 0, false
	}
	end, err := f.part.AppendReplica(f.lifecycle, d.GetBatches())
	if err != nil {
		retry(err)
		return 0, false
	}
	cfg.Metrics.BytesReplicated.Add(uint64(len(d.GetBatches())))
	return end, true
}
