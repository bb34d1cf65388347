package coordinatord

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/coordinatord/internal/txn"
	"github.com/strataio/strata/coordinatord/internal/txnlog"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/ring"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// The transaction coordinator (docs/transactions.md). A transactional_id
// belongs to shard placement.TxnShard(id, shards); shard s is partition s
// of __transaction_state and is owned by the coordinatord that owns ring key
// ring.TxnShardKey(s) (the ring of groups). Taking a shard over fences the
// previous owner, replays the log, aborts the transactions it found open
// (their publish bookkeeping lived in the previous owner's memory) and
// finishes every prepared commit or abort before the shard serves.

// txnShard is one owned transaction coordinator shard.
type txnShard struct {
	id     uint32
	cancel context.CancelFunc
	done   chan struct{}
	// coordEpoch is the coordinator epoch markers carry (the metadata
	// revision at takeover, within int32).
	coordEpoch int64

	mu    sync.Mutex
	state shardState
	err   error
	log   *txnlog.Log
	txns  map[string]*txnEntry
}

// txnEntry serialises the commands of one transactional_id.
type txnEntry struct {
	mu sync.Mutex
	t  *txn.Txn // nil until INIT_PRODUCER_ID
	// Bookkeeping of the open transaction, in memory only (a new owner
	// aborts open transactions): the answer per client seqNum, the next
	// sequence per partition, the partitions registered on their leaders.
	seqs    map[uint64]*coordinatorv1.TxnPublishResponse
	partSeq map[txn.TP]uint64
	added   map[txn.TP]bool
}

func (e *txnEntry) resetTxn() {
	e.seqs = map[uint64]*coordinatorv1.TxnPublishResponse{}
	e.partSeq = map[txn.TP]uint64{}
	e.added = map[txn.TP]bool{}
}

func (s *txnShard) readyErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := strconv.Itoa(int(s.id))
	switch s.state {
	case shardReady:
		return nil
	case shardLoading:
		return errcode.CoordinatorNotAvailable.New("transaction shard is being recovered", "shard", p, "reason", "loading")
	case shardCorrupt:
		return errcode.CoordinatorNotAvailable.New("transaction log replay failed: "+s.err.Error(), "shard", p, "reason", "corrupt")
	}
	return errcode.CoordinatorNotAvailable.New("transaction shard fenced or being taken over again", "shard", p, "reason", "fenced")
}

func (s *txnShard) entry(id string) *txnEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.txns[id]
	if e == nil {
		e = &txnEntry{}
		e.resetTxn()
		s.txns[id] = e
	}
	return e
}

func (s *txnShard) entries() map[string]*txnEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != shardReady {
		return nil
	}
	return maps.Clone(s.txns)
}

// txnShards is the cluster's transaction_coordinator_shards.
func (r *Role) txnShards(v *metaclient.View) uint32 {
	if v.TxnShards > 0 {
		return v.TxnShards
	}
	return r.cfg.TransactionCoordinatorShards
}

// ownedTxnShards returns the shards this node owns in v.
func (r *Role) ownedTxnShards(v *metaclient.View) []uint32 {
	if !r.registered(v) {
		return nil
	}
	rg := r.ring(v)
	var out []uint32
	for s := range r.txnShards(v) {
		if rg.Owner(ring.TxnShardKey(s)) == r.env.NodeID {
			out = append(out, s)
		}
	}
	return out
}

// reconcileTxn creates __transaction_state when missing and takes over or
// releases shards as the ring says.
func (r *Role) reconcileTxn(ctx context.Context, v *metaclient.View) {
	if !v.Ready() {
		return
	}
	if _, ok := v.Topic(txnlog.Topic); !ok {
		if r.offsetsPlaceable(v) == nil {
			r.ensureTxnTopic(ctx, int32(r.txnShards(v)))
		}
		return
	}
	owned := map[uint32]bool{}
	for _, s := range r.ownedTxnShards(v) {
		owned[s] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	for id, s := range r.txnShardMap {
		s.mu.Lock()
		fenced := s.state == shardFenced
		s.mu.Unlock()
		if !owned[id] || fenced {
			s.cancel()
			delete(r.txnShardMap, id)
			s.mu.Lock()
			if s.state == shardReady {
				s.state = shardFenced
			}
			s.txns = nil
			s.mu.Unlock()
			r.env.Logger.Info("released transaction shard", "shard", id)
		}
	}
	for id := range owned {
		if _, ok := r.txnShardMap[id]; !ok {
			sctx, cancel := context.WithCancel(ctx)
			s := &txnShard{id: id, cancel: cancel, done: make(chan struct{}), txns: map[string]*txnEntry{},
				coordEpoch: min(int64(v.Revision), math.MaxInt32)}
			r.txnShardMap[id] = s
			rev := int64(v.Revision)
			r.Go(func(context.Context) {
				defer close(s.done)
				r.runTxnTakeover(sctx, s, rev)
			})
		}
	}
}

func (r *Role) ensureTxnTopic(ctx context.Context, shards int32) {
	r.mu.Lock()
	if r.creatingTxn {
		r.mu.Unlock()
		return
	}
	r.creatingTxn = true
	r.mu.Unlock()
	r.Go(func(context.Context) {
		defer func() {
			r.mu.Lock()
			r.creatingTxn = false
			r.mu.Unlock()
		}()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		policy := "compact"
		rf := r.cfg.OffsetsReplicationFactor
		_, err := r.meta.CreateTopic(cctx, &metav1.CreateTopicRequest{Name: txnlog.Topic, Partitions: &shards,
			ReplicationFactor: &rf, CleanupPolicy: &policy, Internal: true})
		if err != nil && ctx.Err() == nil {
			r.env.Logger.Warn("create __transaction_state failed; will retry", "err", err)
		}
	})
}

func (r *Role) txnLifecycle() func() uint64 {
	return func() uint64 {
		if t, ok := r.meta.Cache().View().Topic(txnlog.Topic); ok {
			return t.GetConfig().GetLifecycleEpoch()
		}
		return 0
	}
}

// runTxnTakeover fences, replays and recovers shard s, retrying until it
// serves or ctx ends. The producer epoch of the log grows with every
// attempt: revision<<16 + attempt, above every epoch of an earlier revision.
func (r *Role) runTxnTakeover(ctx context.Context, s *txnShard, rev int64) {
	backoff := pace.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	for attempt := int64(0); ctx.Err() == nil; attempt++ {
		release, ok := r.takeoverSlot(ctx) // shared with the offsets partitions' takeovers
		if !ok {
			return
		}
		rev = max(rev, int64(r.meta.Cache().View().Revision))
		epoch := rev<<16 + min(attempt, 1<<16-1)
		log, rep, err := txnlog.Takeover(ctx, r.txnLogClient(int32(s.id)), txnlog.Options{
			Partition: int32(s.id), Epoch: epoch, Node: r.env.NodeID, Now: r.now, LifecycleEpoch: r.txnLifecycle(),
		})
		if err == nil {
			err = r.recoverTxns(ctx, s, log, rep)
		}
		release()
		if err == nil {
			r.m.txnRecoveries.Inc()
			r.env.Logger.Info("transaction shard recovered", "shard", s.id, "txns", len(rep.Txns), "records", rep.Records)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if e := errcode.From(err); e.Code == errcode.StorageCorrupt.Name() {
			s.mu.Lock()
			s.state, s.err = shardCorrupt, e
			s.mu.Unlock()
			r.env.Logger.Error("transaction log replay found a corrupt record; readiness stays false", "shard", s.id, "err", e)
			return
		}
		r.env.Logger.Warn("transaction shard takeover failed; retrying", "shard", s.id, "err", err)
		if !backoff.Wait(ctx) {
			return
		}
	}
}

// recoverTxns installs the replayed state: open transactions are aborted,
// prepared ones completed (markers, then the durable outcome), and only
// then does the shard serve.
func (r *Role) recoverTxns(ctx context.Context, s *txnShard, log *txnlog.Log, rep *txnlog.Replayed) error {
	entries := make(map[string]*txnEntry, len(rep.Txns))
	for id, t := range rep.Txns {
		e := &txnEntry{t: t}
		e.resetTxn()
		entries[id] = e
	}
	s.mu.Lock()
	s.log, s.txns = log, entries
	s.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(entries)) {
		e := entries[id]
		if next := e.t.ForceAbort(r.now()); next != nil {
			if err := r.persistTxn(ctx, s, e, next); err != nil {
				return err
			}
		}
		if err := r.completeTxn(ctx, s, e); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.state, s.err = shardReady, nil
	s.mu.Unlock()
	return nil
}

// txnShardFor returns the ready shard owning transactional_id id, or
// NOT_COORDINATOR naming the owner.
func (r *Role) txnShardFor(id string) (*txnShard, error) {
	if id == "" {
		return nil, errcode.MissingParameter.New("transactional_id is required", "param", "transactional_id")
	}
	v := r.meta.Cache().View()
	if !v.Ready() {
		return nil, errcode.CoordinatorNotAvailable.New("metadata cache not synced with metad yet", "reason", "metadata")
	}
	sh := placement.TxnShard(id, r.txnShards(v))
	owner := r.ring(v).Owner(ring.TxnShardKey(sh))
	if owner != r.env.NodeID {
		if owner == "" {
			return nil, errcode.CoordinatorNotAvailable.New("no live coordinator", "transactional_id", id, "reason", "no_coordinator")
		}
		addr := ""
		if n, ok := v.Node(owner); ok {
			addr = n.GetRpcAddress()
		}
		return nil, errcode.NotCoordinator.New("transactional_id is coordinated by another node", "coordinator_id", owner,
			"coordinator_address", addr, "transactional_id", id)
	}
	r.mu.Lock()
	s := r.txnShardMap[sh]
	r.mu.Unlock()
	if s == nil {
		return nil, errcode.CoordinatorNotAvailable.New("transaction shard not taken over yet", "shard", strconv.Itoa(int(sh)), "reason", "loading")
	}
	if err := s.readyErr(); err != nil {
		return nil, err
	}
	return s, nil
}

// persistTxn makes next durable, then installs it. A failed write breaks
// the shard: it is released and taken over again (the replay says whether
// the write happened). Caller holds e.mu.
func (r *Role) persistTxn(ctx context.Context, s *txnShard, e *txnEntry, next *txn.Txn) error {
	if next == e.t {
		return nil
	}
	s.mu.Lock()
	log := s.log
	s.mu.Unlock()
	if log == nil {
		return s.readyErr()
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.AppendTimeout)
	defer cancel()
	start := time.Now()
	err := log.Append(wctx, next)
	r.m.txnWriteDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.mu.Lock()
		if s.state == shardReady || s.state == shardLoading {
			s.state, s.err = shardFenced, err
		}
		s.mu.Unlock()
		r.env.Logger.Warn("transaction log write failed; shard will be taken over again", "shard", s.id, "err", err)
		return errcode.CoordinatorNotAvailable.New("transaction state write failed: "+errcode.From(err).Error(),
			"shard", strconv.Itoa(int(s.id)), "reason", "write_failed")
	}
	e.t = next
	return nil
}

// completeTxn writes the markers of a prepared transaction on every
// participant, then makes the outcome durable. Anything not prepared is
// left alone. Caller holds e.mu (or owns e exclusively during recovery).
func (r *Role) completeTxn(ctx context.Context, s *txnShard, e *txnEntry) error {
	t := e.t
	if t == nil || (t.State != txn.PrepareCommit && t.State != txn.PrepareAbort) {
		return nil
	}
	commit := t.State == txn.PrepareCommit
	start := time.Now()
	// The staged offsets first, then the output's markers: a consumer that
	// restarts in between resumes after the input already processed, and
	// the output it produced becomes visible with the markers that follow
	// (the commit is decided; recovery redoes both).
	// An abort clears the pending mark of the staged offsets first too, so
	// the group's consumers read the old committed offsets again at once.
	if commit {
		if err := r.commitStaged(ctx, t); err != nil {
			return errcode.TransactionCommitFailed.New("staged offsets not committed yet (the commit is decided and is retried): "+errcode.From(err).Error(),
				"transactional_id", t.ID)
		}
	} else if err := r.abortStaged(ctx, t); err != nil {
		return errcode.TransactionAbortMarkerFailed.New("staged offsets' pending mark not cleared yet (retried): "+errcode.From(err).Error(),
			"transactional_id", t.ID)
	}
	if err := r.writeMarkers(ctx, s, t, commit); err != nil {
		if commit {
			return errcode.TransactionCommitFailed.New("commit markers not written yet (the commit is decided and is retried): "+errcode.From(err).Error(),
				"transactional_id", t.ID)
		}
		return errcode.TransactionAbortMarkerFailed.New("abort markers not written yet (retried): "+errcode.From(err).Error(),
			"transactional_id", t.ID)
	}
	if err := r.persistTxn(ctx, s, e, t.Complete(r.now())); err != nil {
		return err
	}
	r.m.txnCompletion.WithLabelValues(string(e.t.State)).Observe(time.Since(start).Seconds())
	return nil
}

// markerTimeout bounds the marker round of one completion attempt; a
// prepared transaction left over is resumed by the next END_TXN or the
// maintenance loop.
const markerTimeout = 10 * time.Second

// writeMarkers writes t's marker on every participant in parallel,
// following leader changes, until all are written or the round times out.
func (r *Role) writeMarkers(ctx context.Context, s *txnShard, t *txn.Txn, commit bool) error {
	mctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	errs := make([]error, len(t.Participants))
	var wg sync.WaitGroup
	for i, tp := range t.Participants {
		wg.Go(func() {
			backoff := pace.Backoff{Initial: 20 * time.Millisecond, Max: time.Second}
			for {
				err := r.writeMarker(mctx, s, t, tp, commit)
				if err == nil {
					return
				}
				errs[i] = err
				if !errcode.IsRetryable(err) || !backoff.Wait(mctx) {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !markerDone(err) {
			return err
		}
	}
	return nil
}

// markerDone says whether a marker error still means the partition is
// settled: its topic is gone, or a later epoch already ended the
// producer's transaction there.
func markerDone(err error) bool {
	switch errcode.CodeOf(err) {
	case errcode.TopicNotFound.Name(), errcode.PartitionNotFound.Name(), errcode.StaleProducerEpoch.Name():
		return true
	}
	return false
}

func (r *Role) writeMarker(ctx context.Context, s *txnShard, t *txn.Txn, tp txn.TP, commit bool) error {
	c, err := r.partitionLeader(tp.Topic, tp.Partition)
	if err != nil {
		return err
	}
	_, err = c.WriteTxnMarker(ctx, &partitionv1.WriteTxnMarkerRequest{Topic: tp.Topic, Partition: tp.Partition,
		ProducerId: t.ProducerID, ProducerEpoch: t.MarkerEpoch(), CoordinatorEpoch: s.coordEpoch,
		TransactionalId: t.ID, Commit: commit})
	if err == nil || markerDone(err) {
		return nil
	}
	return err
}

// partitionLeader returns a client of the current leader of topic/p.
func (r *Role) partitionLeader(topic string, p int32) (partitionv1.PartitionServiceClient, error) {
	return leaderClient{r: r, topic: topic, p: p}.client()
}

func newProducerID() string {
	return fmt.Sprintf("txn-%x-%08x", time.Now().UnixNano(), rand.Uint32())
}

func txnInfo(t *txn.Txn) *coordinatorv1.TxnInfo {
	info := &coordinatorv1.TxnInfo{TransactionalId: t.ID, ProducerId: t.ProducerID, Epoch: t.Epoch,
		State: t.State.Status(), Messages: t.Messages, Offsets: uint32(len(t.Offsets)), StartUnixMs: t.StartMs}
	if t.State == txn.Empty {
		info.State = ""
	}
	for _, tp := range t.Participants {
		info.Participants = append(info.Participants, &coordinatorv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return info
}

// txnCall resolves the shard and the entry of id and runs fn under the
// entry's lock.
func (r *Role) txnCall(id string, fn func(s *txnShard, e *txnEntry) error) error {
	s, err := r.txnShardFor(id)
	if err != nil {
		return err
	}
	e := s.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.readyErr(); err != nil {
		return err
	}
	return fn(s, e)
}

func (r *Role) initProducerID(ctx context.Context, req *coordinatorv1.InitProducerIdRequest) (*coordinatorv1.InitProducerIdResponse, error) {
	var resp *coordinatorv1.InitProducerIdResponse
	err := r.txnCall(req.GetTransactionalId(), func(s *txnShard, e *txnEntry) error {
		// A prepared transaction is finished first when its markers can be
		// written now; otherwise Init refuses (concurrent_transactions).
		_ = r.completeTxn(ctx, s, e)
		next, err := txn.Init(e.t, req.GetTransactionalId(), r.now(), newProducerID)
		if err != nil {
			return err
		}
		if err := r.persistTxn(ctx, s, e, next); err != nil {
			return err
		}
		e.resetTxn()
		// The previous epoch's open work is aborted now when possible; a
		// failure leaves it to the maintenance loop (BEGIN_TXN answers
		// concurrent_transactions until then).
		if err := r.completeTxn(ctx, s, e); err != nil {
			r.env.Logger.Warn("abort of the previous epoch's transaction not finished yet", "transactional_id", e.t.ID, "err", err)
		}
		resp = &coordinatorv1.InitProducerIdResponse{TransactionalId: e.t.ID, ProducerId: e.t.ProducerID, Epoch: e.t.Epoch}
		return nil
	})
	return resp, err
}

func noSession(id string) error {
	return errcode.TransactionNotFound.New("no producer session for this transactional_id; INIT_PRODUCER_ID first", "transactional_id", id)
}

func (r *Role) beginTxn(ctx context.Context, req *coordinatorv1.BeginTxnRequest) (*coordinatorv1.BeginTxnResponse, error) {
	var resp *coordinatorv1.BeginTxnResponse
	err := r.txnCall(req.GetTransactionalId(), func(s *txnShard, e *txnEntry) error {
		if e.t == nil {
			return noSession(req.GetTransactionalId())
		}
		_ = r.completeTxn(ctx, s, e)
		next, err := e.t.Begin(req.GetProducerId(), req.GetEpoch(), r.now(), r.cfg.TransactionTimeout)
		if err != nil {
			return err
		}
		if next != e.t {
			if err := r.persistTxn(ctx, s, e, next); err != nil {
				return err
			}
			e.resetTxn()
		}
		resp = &coordinatorv1.BeginTxnResponse{TransactionalId: e.t.ID, State: string(txn.Open), ProducerId: e.t.ProducerID, Epoch: e.t.Epoch}
		return nil
	})
	return resp, err
}

// txnPublishRetries bounds the attempts of one transactional append (leader
// changes are followed between them); when they are spent the outcome is
// unknown and the transaction is aborted.
const txnPublishRetries = 8

func (r *Role) txnPublish(ctx context.Context, req *coordinatorv1.TxnPublishRequest) (*coordinatorv1.TxnPublishResponse, error) {
	var resp *coordinatorv1.TxnPublishResponse
	err := r.txnCall(req.GetTransactionalId(), func(s *txnShard, e *txnEntry) error {
		if e.t == nil {
			return noSession(req.GetTransactionalId())
		}
		if err := e.t.CheckPublish(req.GetProducerId(), req.GetEpoch(), req.GetSeq()); err != nil {
			return err
		}
		if prev := e.seqs[req.GetSeq()]; prev != nil {
			resp = &coordinatorv1.TxnPublishResponse{TransactionalId: prev.GetTransactionalId(), Topic: prev.GetTopic(),
				Partition: prev.GetPartition(), Offset: prev.GetOffset(), Duplicate: true}
			return nil
		}
		tp := txn.TP{Topic: req.GetTopic(), Partition: req.GetPartition()}
		if err := r.checkTxnTopic(tp); err != nil {
			return err
		}
		next, err := e.t.AddParticipant(req.GetProducerId(), req.GetEpoch(), tp, r.now())
		if err != nil {
			return err
		}
		if err := r.persistTxn(ctx, s, e, next); err != nil {
			return err
		}
		seq := e.partSeq[tp] + 1
		ar, err := r.txnAppend(ctx, s, e, tp, seq, req)
		if err != nil {
			if (errcode.IsRetryable(err) || errcode.CodeOf(err) == errcode.RequestTimeout.Name()) && !refusedBeforeWrite(err) {
				// The append may or may not be stored: abort rather than
				// risk a sequence the partition would take as a repeat.
				if ab := e.t.ForceAbort(r.now()); ab != nil && r.persistTxn(ctx, s, e, ab) == nil {
					_ = r.completeTxn(ctx, s, e)
				}
				return errcode.TransactionAborted.New("a transactional write failed and the transaction was aborted: "+errcode.From(err).Error(),
					"transactional_id", e.t.ID)
			}
			return err
		}
		e.partSeq[tp] = seq
		if !ar.GetDuplicate() {
			e.t.Published(uint64(req.GetRecordCount()))
		}
		resp = &coordinatorv1.TxnPublishResponse{TransactionalId: e.t.ID, Topic: tp.Topic, Partition: tp.Partition, Offset: ar.GetBaseOffset()}
		e.seqs[req.GetSeq()] = resp
		return nil
	})
	return resp, err
}

// refusedBeforeWrite reports a retryable TxnAppend refusal that certainly
// stored nothing: partitiond's event version check found the aggregate held
// by another transaction (TXN_APPEND_STREAM; checked under the append lock,
// after the dedup check, so no earlier attempt of this append is stored).
// The transaction stays open and the client may retry.
func refusedBeforeWrite(err error) bool {
	return errcode.CodeOf(err) == errcode.ConcurrentTransactions.Name() &&
		errcode.From(err).Field("reason") == "aggregate_in_transaction"
}

// checkTxnTopic refuses internal topics and unknown partitions.
func (r *Role) checkTxnTopic(tp txn.TP) error {
	v := r.meta.Cache().View()
	t, ok := v.Topic(tp.Topic)
	if !ok {
		return errcode.TopicNotFound.New("unknown topic", "topic", tp.Topic)
	}
	if t.GetConfig().GetInternal() {
		return errcode.InternalTopicWriteForbidden.New("internal topics are not written by TXN_PUBLISH", "topic", tp.Topic)
	}
	if tp.Partition < 0 || tp.Partition >= t.GetConfig().GetPartitions() {
		return errcode.PartitionNotFound.New("partition does not exist", "topic", tp.Topic, "partition", strconv.Itoa(int(tp.Partition)))
	}
	return nil
}

// txnAppend registers tp with its leader when needed (KIP-890) and appends
// the records with the partition sequence seq, following leader changes.
func (r *Role) txnAppend(ctx context.Context, s *txnShard, e *txnEntry, tp txn.TP, seq uint64, req *coordinatorv1.TxnPublishRequest) (*partitionv1.AppendResponse, error) {
	backoff := pace.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}
	actx, cancel := context.WithTimeout(ctx, r.cfg.AppendTimeout)
	defer cancel()
	var last error
	for range txnPublishRetries {
		c, err := r.partitionLeader(tp.Topic, tp.Partition)
		if err == nil && !e.added[tp] {
			_, err = c.AddTxnPartition(actx, &partitionv1.AddTxnPartitionRequest{Topic: tp.Topic, Partition: tp.Partition,
				ProducerId: e.t.ProducerID, ProducerEpoch: e.t.TxnEpoch, CoordinatorEpoch: s.coordEpoch})
			if err == nil {
				e.added[tp] = true
			}
		}
		if err == nil {
			var resp *partitionv1.TxnAppendResponse
			resp, err = c.TxnAppend(actx, &partitionv1.TxnAppendRequest{Append: &partitionv1.AppendRequest{
				Topic: tp.Topic, Partition: tp.Partition, Acks: -1, Records: req.GetRecords(), RecordCount: req.GetRecordCount(),
				ProducerId: e.t.ProducerID, ProducerEpoch: e.t.TxnEpoch, BaseSequence: seq}})
			if err == nil {
				return resp.GetAppend(), nil
			}
		}
		last = err
		switch {
		case errcode.CodeOf(err) == errcode.TransactionPartitionNotAdded.Name():
			e.added[tp] = false // a new leader: add again
		case !errcode.IsRetryable(err):
			return nil, err
		}
		if !backoff.Wait(actx) {
			break
		}
	}
	if last == nil {
		last = errcode.RequestTimeout.New("transactional append did not finish")
	}
	return nil, last
}

func (r *Role) endTxn(ctx context.Context, req *coordinatorv1.EndTxnRequest) (*coordinatorv1.EndTxnResponse, error) {
	var resp *coordinatorv1.EndTxnResponse
	err := r.txnCall(req.GetTransactionalId(), func(s *txnShard, e *txnEntry) error {
		if e.t == nil {
			return noSession(req.GetTransactionalId())
		}
		next, err := e.t.End(req.GetProducerId(), req.GetEpoch(), req.GetCommit(), r.now())
		if err != nil {
			return err
		}
		if req.GetCommit() && e.t.State == txn.Open {
			// Staged offsets are checked again before the decision; a
			// failure leaves the transaction open (the client aborts).
			if err := r.revalidateStaged(ctx, e.t); err != nil {
				return err
			}
		}
		if err := r.persistTxn(ctx, s, e, next); err != nil {
			return err
		}
		if err := r.completeTxn(ctx, s, e); err != nil {
			return err
		}
		resp = &coordinatorv1.EndTxnResponse{TransactionalId: e.t.ID, State: e.t.State.Status(), Messages: e.t.Messages,
			Offsets: uint32(len(e.t.Offsets))}
		return nil
	})
	return resp, err
}

func (r *Role) txnStatus(req *coordinatorv1.TxnStatusRequest) (*coordinatorv1.TxnStatusResponse, error) {
	var resp *coordinatorv1.TxnStatusResponse
	err := r.txnCall(req.GetTransactionalId(), func(_ *txnShard, e *txnEntry) error {
		if e.t == nil {
			return errcode.TransactionNotFound.New("unknown transactional_id", "transactional_id", req.GetTransactionalId())
		}
		resp = &coordinatorv1.TxnStatusResponse{Txn: txnInfo(e.t)}
		return nil
	})
	return resp, err
}

func (r *Role) readyTxnShards() []*txnShard {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*txnShard, 0, len(r.txnShardMap))
	for _, id := range slices.Sorted(maps.Keys(r.txnShardMap)) {
		out = append(out, r.txnShardMap[id])
	}
	return out
}

// listTxns returns the active transactions of the shards this node serves.
func (r *Role) listTxns() []*coordinatorv1.TxnInfo {
	var out []*coordinatorv1.TxnInfo
	for _, s := range r.readyTxnShards() {
		for _, e := range s.entries() {
			e.mu.Lock()
			if e.t != nil && e.t.State.Active() {
				out = append(out, txnInfo(e.t))
			}
			e.mu.Unlock()
		}
	}
	slices.SortFunc(out, func(a, b *coordinatorv1.TxnInfo) int {
		return cmp.Or(cmp.Compare(a.GetStartUnixMs(), b.GetStartUnixMs()), cmp.Compare(a.GetTransactionalId(), b.GetTransactionalId()))
	})
	return out
}

// abortTxn is the operator's abort of a hanging transaction.
func (r *Role) abortTxn(ctx context.Context, req *coordinatorv1.AbortTxnRequest) (*coordinatorv1.AbortTxnResponse, error) {
	var resp *coordinatorv1.AbortTxnResponse
	err := r.txnCall(req.GetTransactionalId(), func(s *txnShard, e *txnEntry) error {
		if e.t == nil {
			return errcode.TransactionNotFound.New("unknown transactional_id", "transactional_id", req.GetTransactionalId())
		}
		if e.t.State == txn.PrepareCommit {
			return errcode.TransactionNotAbortable.New("the commit is decided and being completed", "transactional_id", e.t.ID)
		}
		if next := e.t.ForceAbort(r.now()); next != nil {
			if err := r.persistTxn(ctx, s, e, next); err != nil {
				return err
			}
		}
		if err := r.completeTxn(ctx, s, e); err != nil {
			return err
		}
		resp = &coordinatorv1.AbortTxnResponse{Txn: txnInfo(e.t)}
		return nil
	})
	return resp, err
}

// maintainTxns times out open transactions (transaction_timeout_ms),
// resumes prepared ones and expires idle completed sessions
// (transactional_id_expiration_ms).
func (r *Role) maintainTxns(ctx context.Context) {
	for _, s := range r.readyTxnShards() {
		for _, id := range slices.Sorted(maps.Keys(s.entries())) {
			e := s.entry(id)
			e.mu.Lock()
			if s.readyErr() == nil && e.t != nil {
				now := r.now()
				if next := e.t.TimedOut(now); next != nil {
					if err := r.persistTxn(ctx, s, e, next); err == nil {
						r.m.txnTimeouts.Inc()
						r.env.Logger.Info("transaction timed out; aborting", "transactional_id", id)
					}
				}
				if err := r.completeTxn(ctx, s, e); err != nil {
					r.env.Logger.Warn("completing a prepared transaction failed; retrying", "transactional_id", id, "err", err)
				}
				if next := e.t.Expire(now, r.cfg.TransactionalIDExpiration); next != nil {
					_ = r.persistTxn(ctx, s, e, next)
				}
			}
			e.mu.Unlock()
		}
	}
}

// txnStats is what the transaction metrics report at a scrape.
type txnStats struct {
	byState      map[string]int
	expired      int
	oldestActive float64
	ready        bool
}

func (r *Role) txnStatsNow() txnStats {
	st := txnStats{byState: map[string]int{}, ready: true}
	now := r.now().UnixMilli()
	v := r.meta.Cache().View()
	r.mu.Lock()
	for _, id := range r.ownedTxnShards(v) {
		s := r.txnShardMap[id]
		if s == nil || s.readyErr() != nil {
			st.ready = false
		}
	}
	r.mu.Unlock()
	for _, s := range r.readyTxnShards() {
		for _, e := range s.entries() {
			e.mu.Lock()
			if t := e.t; t != nil {
				switch {
				case t.Expired:
					st.expired++
				case t.State != txn.Empty:
					st.byState[string(t.State)]++
				}
				if t.State.Active() && t.StartMs > 0 {
					st.oldestActive = max(st.oldestActive, float64(now-t.StartMs)/1000)
				}
			}
			e.mu.Unlock()
		}
	}
	return st
}

// checkTxnReady is part of the ready check: every owned transaction shard
// recovered (prepared work finished) before this node serves.
func (r *Role) checkTxnReady(v *metaclient.View) error {
	if _, ok := v.Topic(txnlog.Topic); !ok {
		return errcode.CoordinatorNotAvailable.New("__transaction_state does not exist yet")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.ownedTxnShards(v) {
		s := r.txnShardMap[id]
		if s == nil {
			return errcode.CoordinatorNotAvailable.New("owned transaction shard not taken over yet", "shard", strconv.Itoa(int(id)))
		}
		if err := s.readyErr(); err != nil {
			return err
		}
	}
	return nil
}

// groupCoordinator returns a client of the coordinatord owning group.
func (r *Role) groupCoordinator(name string) (coordinatorv1.CoordinatorServiceClient, error) {
	v := r.meta.Cache().View()
	p := groups.Partition(name, groups.OffsetsPartitions(v, r.cfg.OffsetsPartitions))
	return r.coordinatorClient(v, groups.PartitionOwner(r.ring(v), p), "the group's coordinator", "group", name)
}

// txnCoordinator returns a client of the coordinatord owning the
// transaction shard of transactional_id id.
func (r *Role) txnCoordinator(id string) (coordinatorv1.CoordinatorServiceClient, error) {
	v := r.meta.Cache().View()
	owner := r.ring(v).Owner(ring.TxnShardKey(placement.TxnShard(id, r.txnShards(v))))
	return r.coordinatorClient(v, owner, "the transaction coordinator", "transactional_id", id)
}

// coordinatorClient returns a client of coordinatord node owner (what, key
// and name describe it in errors).
func (r *Role) coordinatorClient(v *metaclient.View, owner, what, key, name string) (coordinatorv1.CoordinatorServiceClient, error) {
	n, ok := v.Node(owner)
	if owner == "" || !ok || n.GetRpcAddress() == "" {
		return nil, errcode.CoordinatorNotAvailable.New(what+" is unknown", key, name, "reason", "no_coordinator")
	}
	conn, err := r.env.Clients.Get(n.GetRpcAddress())
	if err != nil {
		return nil, errcode.CoordinatorNotAvailable.New("dial "+what+": "+err.Error(), key, name)
	}
	return coordinatorv1.NewCoordinatorServiceClient(conn), nil
}

// onGroupCoordinator runs fn on the group's coordinator, retrying while it
// answers NOT_COORDINATOR or is unavailable (ownership moving).
func (r *Role) onGroupCoordinator(ctx context.Context, name string, fn func(coordinatorv1.CoordinatorServiceClient) error) error {
	return r.onCoordinator(ctx, func() (coordinatorv1.CoordinatorServiceClient, error) { return r.groupCoordinator(name) }, fn)
}

// onCoordinator runs fn on the coordinator resolve names, retrying while
// it answers NOT_COORDINATOR or is unavailable, within the append timeout.
func (r *Role) onCoordinator(ctx context.Context, resolve func() (coordinatorv1.CoordinatorServiceClient, error), fn func(coordinatorv1.CoordinatorServiceClient) error) error {
	backoff := pace.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.AppendTimeout)
	defer cancel()
	for {
		c, err := resolve()
		if err == nil {
			err = fn(c)
		}
		if err == nil || !errcode.IsRetryable(err) || !backoff.Wait(cctx) {
			return err
		}
	}
}

// txnRef names t's current transaction to a group's coordinator.
func txnRef(t *txn.Txn) *coordinatorv1.TxnRef {
	return &coordinatorv1.TxnRef{TransactionalId: t.ID, ProducerId: t.ProducerID, Epoch: t.TxnEpoch}
}

// validateStaged asks the group's coordinator to check offsets of topic
// for session s (member, generation, ownership) and to mark them pending
// for t's transaction; it returns the parsed entries and the group's
// incarnation.
func (r *Role) validateStaged(ctx context.Context, t *txn.Txn, s txn.Session, topic string, offs []*coordinatorv1.PartitionOffset, raw string) (*coordinatorv1.ValidateTxnOffsetsResponse, error) {
	var resp *coordinatorv1.ValidateTxnOffsetsResponse
	err := r.onGroupCoordinator(ctx, s.Group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = c.ValidateTxnOffsets(ctx, &coordinatorv1.ValidateTxnOffsetsRequest{Group: s.Group, Topic: topic,
			Member: s.Member, Generation: s.Generation, Offsets: offs, OffsetsList: raw, Txn: txnRef(t)})
		return err
	})
	return resp, err
}

// sendOffsetsToTxn is SEND_OFFSETS_TO_TXN: validated by the group's
// coordinator, then staged durably in the transaction.
func (r *Role) sendOffsetsToTxn(ctx context.Context, req *coordinatorv1.SendOffsetsToTxnRequest) (*coordinatorv1.SendOffsetsToTxnResponse, error) {
	var resp *coordinatorv1.SendOffsetsToTxnResponse
	err := r.txnCall(req.GetTransactionalId(), func(s *txnShard, e *txnEntry) error {
		if e.t == nil {
			return noSession(req.GetTransactionalId())
		}
		if err := e.t.CheckPublish(req.GetProducerId(), req.GetEpoch(), 1); err != nil {
			return err
		}
		if req.GetGroup() == "" {
			return errcode.MissingGroup.New("group is required", "param", "group")
		}
		sess := txn.Session{Group: req.GetGroup(), Member: req.GetMember(), Generation: req.GetGeneration()}
		v, err := r.validateStaged(ctx, e.t, sess, req.GetTopic(), nil, req.GetOffsetsList())
		if err != nil {
			return err
		}
		sess.RegistrationEpoch = v.GetIncarnation()
		offs := make([]txn.StagedOffset, 0, len(v.GetOffsets()))
		for _, o := range v.GetOffsets() {
			offs = append(offs, txn.StagedOffset{TP: txn.TP{Topic: req.GetTopic(), Partition: o.GetPartition()}, Next: o.GetOffset()})
		}
		next, err := e.t.StageOffsets(req.GetProducerId(), req.GetEpoch(), sess, offs, r.now())
		if err != nil {
			return err
		}
		if err := r.persistTxn(ctx, s, e, next); err != nil {
			return err
		}
		resp = &coordinatorv1.SendOffsetsToTxnResponse{TransactionalId: e.t.ID, StagedOffsets: uint32(len(e.t.Offsets))}
		return nil
	})
	return resp, err
}

// revalidateStaged re-checks every staged offset with the group's
// coordinator right before a commit is decided (spec 4.7: "re-checks at
// commit"); the group must still be the same incarnation.
func (r *Role) revalidateStaged(ctx context.Context, t *txn.Txn) error {
	if t.Session == nil || len(t.Offsets) == 0 {
		return nil
	}
	for topic, offs := range t.OffsetsByTopic() {
		po := make([]*coordinatorv1.PartitionOffset, 0, len(offs))
		for _, o := range offs {
			po = append(po, &coordinatorv1.PartitionOffset{Partition: o.Partition, Offset: o.Next})
		}
		v, err := r.validateStaged(ctx, t, *t.Session, topic, po, "")
		if err != nil {
			return err
		}
		if v.GetIncarnation() != t.Session.RegistrationEpoch {
			return errcode.GenMismatch.New("the group was registered again since the offsets were staged",
				"group", t.Session.Group, "transactional_id", t.ID)
		}
	}
	return nil
}

// commitStaged writes a decided commit's staged offsets through the
// group's coordinator (idempotent: only raising offsets are written).
func (r *Role) commitStaged(ctx context.Context, t *txn.Txn) error {
	if t.Session == nil || len(t.Offsets) == 0 {
		return nil
	}
	req := &coordinatorv1.CommitTxnOffsetsRequest{Group: t.Session.Group, Incarnation: t.Session.RegistrationEpoch, Txn: txnRef(t)}
	for _, o := range t.Offsets {
		req.Offsets = append(req.Offsets, &coordinatorv1.TopicPartitionOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Next})
	}
	return r.onGroupCoordinator(ctx, t.Session.Group, func(c coordinatorv1.CoordinatorServiceClient) error {
		resp, err := c.CommitTxnOffsets(ctx, req)
		if err == nil {
			r.env.Logger.Debug("transaction offsets committed", "transactional_id", t.ID, "group", t.Session.Group,
				"staged", len(req.GetOffsets()), "written", resp.GetWritten())
		}
		return err
	})
}

// abortStaged clears the pending mark an aborted transaction's staged
// offsets left on its group (idempotent: a mark already cleared, or a
// group gone, answers cleared=false).
func (r *Role) abortStaged(ctx context.Context, t *txn.Txn) error {
	if t.Session == nil {
		return nil
	}
	req := &coordinatorv1.AbortTxnOffsetsRequest{Group: t.Session.Group, Txn: txnRef(t)}
	return r.onGroupCoordinator(ctx, t.Session.Group, func(c coordinatorv1.CoordinatorServiceClient) error {
		_, err := c.AbortTxnOffsets(ctx, req)
		return err
	})
}

// askTxnOffsetsPending asks the transaction coordinator of id whether the
// transaction of mark m may still commit offsets (resolveTxnMarks).
func (r *Role) askTxnOffsetsPending(ctx context.Context, id string, m group.TxnMark) (bool, error) {
	var pending bool
	req := &coordinatorv1.TxnOffsetsPendingRequest{Txn: &coordinatorv1.TxnRef{TransactionalId: id, ProducerId: m.ProducerID, Epoch: m.Epoch}}
	err := r.onCoordinator(ctx, func() (coordinatorv1.CoordinatorServiceClient, error) { return r.txnCoordinator(id) },
		func(c coordinatorv1.CoordinatorServiceClient) error {
			resp, err := c.TxnOffsetsPending(ctx, req)
			pending = resp.GetPending()
			return err
		})
	return pending, err
}

// txnOffsetsPending is TxnOffsetsPending: the transaction may still write
// its staged offsets while it is open or prepare_commit in that epoch of
// that producer session. Anything else — committed (its offsets were
// written before it completed), aborting or aborted, a later epoch, an
// unknown or expired transactional_id — can never write them.
func (r *Role) txnOffsetsPending(req *coordinatorv1.TxnOffsetsPendingRequest) (*coordinatorv1.TxnOffsetsPendingResponse, error) {
	ref := req.GetTxn()
	var pending bool
	err := r.txnCall(ref.GetTransactionalId(), func(_ *txnShard, e *txnEntry) error {
		t := e.t
		pending = t != nil && t.ProducerID == ref.GetProducerId() && t.TxnEpoch == ref.GetEpoch() &&
			(t.State == txn.Open || t.State == txn.PrepareCommit)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.TxnOffsetsPendingResponse{Pending: pending}, nil
}

// txnsOnTopic returns the active transactions (open or completing) that
// write to topic or stage offsets of it, sorted: DELETE and TRUNCATE are
// blocked while any exists (spec 3.1).
func (r *Role) txnsOnTopic(topic string) []string {
	var out []string
	for _, s := range r.readyTxnShards() {
		for id, e := range s.entries() {
			e.mu.Lock()
			if t := e.t; t != nil && t.State.Active() &&
				(slices.ContainsFunc(t.Participants, func(tp txn.TP) bool { return tp.Topic == topic }) ||
					slices.ContainsFunc(t.Offsets, func(o txn.StagedOffset) bool { return o.Topic == topic })) {
				out = append(out, id)
			}
			e.mu.Unlock()
		}
	}
	slices.Sort(out)
	return out
}
