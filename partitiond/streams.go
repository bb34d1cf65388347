package partitiond

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/streams"
)

// Event sourcing (SERVICE-SPEC 2.5, 4.8) on partitiond: the StreamService.
// Each hosted partition of an event-sourcing topic gets, on first use, a
// stream-version index derived from its log and a snapshot store in its
// directory (partitiond/internal/streams). Appends are checked against the
// index under the partition's append lock; snapshots are replicated to the
// in-sync replicas before SAVE_SNAPSHOT succeeds, and followers catch up on
// the ones they missed (docs/event-sourcing.md).

const (
	// readStreamMaxRecords and readStreamMaxBytes bound one READ_STREAM
	// answer so its batch frame fits every public SDK (WIRE-V2 3).
	readStreamMaxRecords = 100_000
	readStreamMaxBytes   = wire.PublicMaxPayload - (2 << 20)
	// snapshotCatchUpEvery is how often a follower compares its snapshots
	// with its leader's and keeps its version index warm.
	snapshotCatchUpEvery = 3 * time.Second
	// snapshotReplicateTimeout bounds the push of one snapshot to one
	// replica.
	snapshotReplicateTimeout = 5 * time.Second
)

// errDuplicateEvent stops an aggregate replay append that repeats a stored
// event exactly; the caller answers with the stored event.
var errDuplicateEvent = errors.New("duplicate event")

// streamPart is the event-sourcing state of one partition incarnation.
type streamPart struct {
	part *partition.Partition
	idx  *streams.Index

	mu    sync.Mutex
	store *streams.Store
	// caught is how far this follower's snapshot catch-up got: the
	// leader's store incarnation and its change sequence.
	caught snapshotCursor
	// heads is how far this follower got with its leader's removed stream
	// heads (snapshotCursor's storeID and seq are the index's headsID and
	// headsSeq).
	heads snapshotCursor
}

// snapshotCursor is a position in a leader's snapshot change sequence.
type snapshotCursor struct {
	leader  string
	storeID uint64
	seq     uint64
}

// snapshots opens the partition's snapshot store on first use.
func (sp *streamPart) snapshots() (*streams.Store, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.store == nil {
		s, err := streams.OpenStore(sp.part.Dir())
		if err != nil {
			return nil, err
		}
		sp.store = s
	}
	return sp.store, nil
}

func (sp *streamPart) close() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.store != nil {
		_ = sp.store.Close()
	}
}

// streamParts is the role's registry of streamPart values, keyed by the
// partition (a truncated or re-created partition is a new *Partition, so its
// state starts afresh).
type streamParts struct {
	mu    sync.Mutex
	parts map[*partition.Partition]*streamPart
}

func (s *streamParts) get(p *partition.Partition) *streamPart {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts == nil {
		s.parts = map[*partition.Partition]*streamPart{}
	}
	sp := s.parts[p]
	if sp == nil {
		sp = &streamPart{part: p, idx: streams.NewIndex(p)}
		s.parts[p] = sp
	}
	return sp
}

// sweep drops the state of partitions that are gone.
func (s *streamParts) sweep(all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, sp := range s.parts {
		if all || p.CheckGone() != nil {
			sp.close()
			delete(s.parts, p)
		}
	}
}

// streamService implements StreamService.
type streamService struct {
	streamv1.UnimplementedStreamServiceServer
	r *Role
}

// streamPolicy adds the StreamService methods to the role policy: the
// gateway (and admin) call the client-facing methods, partition servers
// the replication ones.
func streamPolicy(p rpc.Policy) {
	svc := "/" + streamv1.StreamService_ServiceDesc.ServiceName + "/"
	clients := []pki.Role{pki.RoleGateway, pki.RoleAdmin}
	for _, m := range []string{"AppendStream", "ReadStream", "StreamVersion", "SaveSnapshot", "ReadSnapshot", "AggregateProof"} {
		p[svc+m] = clients
	}
	p[svc+"ReplicateSnapshot"] = []pki.Role{pki.RolePartitiond}
	p[svc+"ListSnapshots"] = []pki.Role{pki.RolePartitiond, pki.RoleAdmin}
}

// streamLead resolves a client-facing stream request: this node leads the
// partition and the topic is an event-sourcing topic.
func (r *Role) streamLead(ctx context.Context, ref *streamv1.StreamRef) (*route, *streamPart, error) {
	rt, err := r.lead(ctx, ref.GetTopic(), ref.GetPartition())
	if err != nil {
		return nil, nil, err
	}
	if !rt.topic.GetConfig().GetEventSourcing() {
		return nil, nil, errcode.EventSourcingNotEnabled.New("the topic was not created with event_sourcing=true", "topic", ref.GetTopic())
	}
	if err := rt.part.CheckGone(); err != nil {
		return nil, nil, err
	}
	if e := ref.GetLifecycleEpoch(); e != 0 && e != rt.part.LifecycleEpoch() {
		if e < rt.part.LifecycleEpoch() {
			return nil, nil, errcode.StaleLifecycleEpoch.New("request carries an older topic lifecycle epoch", "topic", ref.GetTopic())
		}
		return nil, nil, errcode.LifecycleEpochPending.New("this node has not applied the request's lifecycle epoch yet", "topic", ref.GetTopic())
	}
	if ref.GetKey() == "" {
		return nil, nil, errcode.MissingParameter.New("key is required", "param", "key")
	}
	return rt, r.streamParts.get(rt.part), nil
}

func utoa(v uint64) string { return strconv.FormatUint(v, 10) }

// AppendStream appends one event when its version is the stream's current
// version + 1: the check and the append are one step under the partition's
// append lock (partition.AppendRequest.Guard), acknowledged once the high
// watermark passed it (acks all).
func (s *streamService) AppendStream(ctx context.Context, req *streamv1.AppendStreamRequest) (*streamv1.AppendStreamResponse, error) {
	ref := req.GetStream()
	rt, sp, err := s.r.streamLead(ctx, ref)
	if err != nil {
		return nil, err
	}
	key, ver := ref.GetKey(), req.GetVersion()
	if ver == 0 {
		return nil, errcode.InvalidParameter.New("version must be at least 1", "param", "version", "value", "0")
	}
	view, err := wire.ParseRecord(req.GetRecord())
	if err != nil {
		return nil, err
	}
	if k, _ := view.Key(); string(k) != key {
		return nil, errcode.InvalidParameter.New("the record's key differs from the stream's", "param", "record")
	}
	if v, _ := view.AggregateVersion(); v != ver {
		return nil, errcode.InvalidParameter.New("the record's aggregate version differs from the request's", "param", "record")
	}
	eventID, _ := view.EventID()
	digest, _ := view.PayloadDigest()
	set := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(req.GetRecord())), uint32(len(req.GetRecord())))
	set = append(set, req.GetRecord()...)

	var dupOffset uint64
	guard := func() error {
		head, err := sp.idx.Head(ctx, key, "")
		if err != nil {
			return err
		}
		if ver == head+1 {
			return nil
		}
		if req.GetAggregateReplay() && ver <= head {
			if off, ok := sp.idx.OffsetOf(key, ver); ok {
				same, err := sameEvent(sp.part, off, eventID, digest)
				if err != nil {
					return err
				}
				if same {
					dupOffset = off
					return errDuplicateEvent
				}
				return errcode.VersionConflict.New("another event is stored under this version", "current", utoa(head),
					"expected", utoa(ver), "reason", "event_identity_conflict", "topic", ref.GetTopic(), "key", key)
			}
		}
		return errcode.VersionConflict.New("version must be the stream's current version + 1", "current", utoa(head),
			"expected", utoa(ver), "topic", ref.GetTopic(), "key", key)
	}
	pa, err := rt.part.AppendAsync(ctx, &partition.AppendRequest{
		LifecycleEpoch: rt.part.LifecycleEpoch(),
		Acks:           partition.AcksAll,
		Records:        set,
		RecordCount:    1,
		ISRSize:        rt.isr,
		MinISR:         rt.minISRReplicated,
		Guard:          guard,
		Appended:       func(base uint64) { sp.idx.Appended(key, ver, base, "") },
	})
	if errors.Is(err, errDuplicateEvent) {
		if err := waitCommitted(ctx, rt.part, dupOffset+1); err != nil {
			return nil, err
		}
		s.r.m.streamAppends.WithLabelValues("duplicate").Inc()
		return &streamv1.AppendStreamResponse{Version: ver, Offset: dupOffset, Duplicate: true}, nil
	}
	if err != nil {
		s.r.m.streamAppends.WithLabelValues(streamResult(err)).Inc()
		return nil, err
	}
	if err := pa.Wait(ctx); err != nil {
		s.r.m.streamAppends.WithLabelValues("error").Inc()
		return nil, err
	}
	s.r.m.streamAppends.WithLabelValues("ok").Inc()
	return &streamv1.AppendStreamResponse{Version: ver, Offset: pa.Result.BaseOffset}, nil
}

// txnEventGuard returns the version check of a transactional append to an
// event-sourcing topic (TXN_APPEND_STREAM through the transaction
// coordinator's TxnAppend): when the append is one event (a record with a
// key and an aggregate version), its version must be the stream's head + 1,
// counting the undecided events of the same transaction, under the append
// lock; a stream another transaction holds is concurrent_transactions. The
// index then counts the event as the transaction's until its marker.
// Other transactional writes (TXN_PUBLISH records) pass unchecked.
func (r *Role) txnEventGuard(ctx context.Context, rt *route, req *partitionv1.AppendRequest) (func() error, func(uint64), error) {
	set := req.GetRecords()
	var key string
	var ver uint64
	events := 0
	for len(set) > 0 {
		rec, rest, ok, bad := record.Next(set)
		if bad {
			return nil, nil, errcode.InvalidParameter.New("record set does not split into records", "param", "records")
		}
		if !ok {
			break
		}
		set = rest
		v, err := wire.ParseRecord(rec)
		if err != nil {
			return nil, nil, err
		}
		k, hasKey := v.Key()
		n, hasVer := v.AggregateVersion()
		if !hasVer {
			continue
		}
		if !hasKey || n == 0 {
			return nil, nil, errcode.InvalidParameter.New("an event needs a key and a version of at least 1", "param", "record")
		}
		key, ver = string(k), n
		events++
	}
	if events == 0 {
		return nil, nil, nil
	}
	if events > 1 || req.GetRecordCount() != 1 {
		return nil, nil, errcode.InvalidParameter.New("a transactional event append carries one event", "param", "records")
	}
	sp := r.streamParts.get(rt.part)
	producer := req.GetProducerId()
	guard := func() error {
		head, err := sp.idx.Head(ctx, key, producer)
		if err != nil {
			r.m.streamAppends.WithLabelValues(streamResult(err)).Inc()
			return err
		}
		if ver != head+1 {
			r.m.streamAppends.WithLabelValues("version_conflict").Inc()
			return errcode.VersionConflict.New("version must be the stream's current version + 1", "current", utoa(head),
				"expected", utoa(ver), "topic", rt.topic.GetConfig().GetName(), "key", key)
		}
		return nil
	}
	appended := func(base uint64) {
		sp.idx.Appended(key, ver, base, producer)
		r.m.streamAppends.WithLabelValues("ok").Inc()
	}
	return guard, appended, nil
}

func streamResult(err error) string {
	if errcode.CodeOf(err) == errcode.VersionConflict.Name() {
		return "version_conflict"
	}
	return "error"
}

// sameEvent reports whether the stored event at off carries eventID and
// digest (an aggregate replay topic's event identity).
func sameEvent(p *partition.Partition, off uint64, eventID, digest []byte) (bool, error) {
	recs, n, _, err := p.ReadLog(off, 1, 0)
	if err != nil {
		return false, err
	}
	rec, _, ok, _ := record.Next(recs)
	if n == 0 || !ok {
		return false, errcode.AggregateProofUnavailable.New("the stored event could not be read", "offset", utoa(off))
	}
	v, err := wire.ParseRecord(rec)
	if err != nil {
		return false, err
	}
	id, _ := v.EventID()
	d, _ := v.PayloadDigest()
	return bytes.Equal(id, eventID) && bytes.Equal(d, digest), nil
}

// waitCommitted waits until the high watermark reaches end.
func waitCommitted(ctx context.Context, p *partition.Partition, end uint64) error {
	for {
		logCh, hwmCh := p.Changed()
		if p.HighWatermark() >= end {
			return nil
		}
		if err := p.CheckGone(); err != nil {
			return err
		}
		if p.Follower() {
			return errcode.NotPartitionLeader.New("the partition stopped leading", "topic", p.Topic())
		}
		select {
		case <-logCh:
		case <-hwmCh:
		case <-ctx.Done():
			return errcode.From(ctx.Err())
		}
	}
}

// ReadStream reads a stream's committed events from a version, optionally
// starting after the stored snapshot.
func (s *streamService) ReadStream(ctx context.Context, req *streamv1.ReadStreamRequest) (*streamv1.ReadStreamResponse, error) {
	ref := req.GetStream()
	rt, sp, err := s.r.streamLead(ctx, ref)
	if err != nil {
		return nil, err
	}
	from := req.GetFromVersion()
	if from == 0 {
		return nil, errcode.InvalidFromVersion.New("from_version must be a positive integer", "from_version", "0")
	}
	pos, err := sp.idx.Committed(ref.GetKey(), rt.part.HighWatermark())
	if err != nil {
		return nil, err
	}
	resp := &streamv1.ReadStreamResponse{HeadVersion: pos.Head, FirstRetainedVersion: pos.First, LifecycleEpoch: rt.part.LifecycleEpoch()}
	if req.GetUseSnapshot() {
		st, err := sp.snapshots()
		if err != nil {
			return nil, err
		}
		if sn, ok := st.Get(ref.GetKey()); ok && sn.Version >= from {
			resp.Snapshot = &streamv1.Snapshot{Key: sn.Key, Version: sn.Version, Payload: sn.Payload}
			from = sn.Version + 1
		}
	}
	maxRecords, maxBytes := int(req.GetMaxRecords()), int(req.GetMaxBytes())
	if maxRecords <= 0 || maxRecords > readStreamMaxRecords {
		maxRecords = readStreamMaxRecords
	}
	if maxBytes <= 0 || maxBytes > readStreamMaxBytes {
		maxBytes = readStreamMaxBytes
	}
	recs, n, next, err := readEvents(rt.part, ref.GetKey(), pos, from, maxRecords, maxBytes)
	if err != nil {
		return nil, err
	}
	resp.Records, resp.Count, resp.NextVersion = recs, uint32(n), next
	resp.HasMore = pos.Head > 0 && next <= pos.Head
	return resp, nil
}

// readEvents returns the events of key from version from (at least the
// first retained one) up to the committed head, in version order, within
// maxRecords and about maxBytes (the first event always). It reads the log
// near each wanted offset only, so the events of other aggregates in
// between cost little.
func readEvents(p *partition.Partition, key string, pos streams.Position, from uint64, maxRecords, maxBytes int) ([]byte, int, uint64, error) {
	if pos.Head == 0 || from > pos.Head {
		return nil, 0, max(from, pos.Head+1), nil
	}
	from = max(from, pos.First)
	var out []byte
	n := 0
	want := from
	for want <= pos.Head && n < maxRecords && (n == 0 || len(out) < maxBytes) {
		i := want - pos.First
		start := pos.Offsets[i]
		// Read up to the offset of the last wanted version within a span
		// of 4,096 offsets: contiguous runs in one read, no long detours.
		j := i
		for j+1 < uint64(len(pos.Offsets)) && pos.Offsets[j+1]-start < 4096 && int(j+1-i) < maxRecords-n {
			j++
		}
		span := int(pos.Offsets[j] - start + 1)
		recs, _, _, err := p.ReadLog(start, span, 0)
		if err != nil {
			return nil, 0, want, err
		}
		progressed := false
		for len(recs) > 0 && want <= pos.Head && n < maxRecords && (n == 0 || len(out) < maxBytes) {
			rec, rest, ok, bad := record.Next(recs)
			if bad || !ok {
				break
			}
			recs = rest
			if record.OffsetOf(rec) != pos.Offsets[want-pos.First] {
				continue
			}
			v, err := wire.ParseRecord(rec)
			if err != nil {
				return nil, 0, want, err
			}
			if k, _ := v.Key(); string(k) != key {
				return nil, 0, want, errcode.StorageCorrupt.New("the stream index points at another aggregate's record", "offset", utoa(v.Offset()))
			}
			out = binary.BigEndian.AppendUint32(out, uint32(len(rec)))
			out = append(out, rec...)
			n++
			want++
			progressed = true
		}
		if !progressed {
			return nil, 0, want, errcode.AggregateProofUnavailable.New("an indexed event could not be read back", "offset", utoa(start))
		}
	}
	return out, n, want, nil
}

// StreamVersion answers the stream's committed version.
func (s *streamService) StreamVersion(ctx context.Context, req *streamv1.StreamVersionRequest) (*streamv1.StreamVersionResponse, error) {
	rt, sp, err := s.r.streamLead(ctx, req.GetStream())
	if err != nil {
		return nil, err
	}
	pos, err := sp.idx.Committed(req.GetStream().GetKey(), rt.part.HighWatermark())
	if err != nil {
		return nil, err
	}
	return &streamv1.StreamVersionResponse{Version: pos.Head}, nil
}

// SaveSnapshot stores a snapshot at a version not above the stream's
// committed version and replicates it to every other in-sync replica
// before answering.
func (s *streamService) SaveSnapshot(ctx context.Context, req *streamv1.SaveSnapshotRequest) (*streamv1.SaveSnapshotResponse, error) {
	ref := req.GetStream()
	rt, sp, err := s.r.streamLead(ctx, ref)
	if err != nil {
		return nil, err
	}
	ver := req.GetVersion()
	if ver == 0 {
		return nil, errcode.InvalidParameter.New("version must be at least 1", "param", "version", "value", "0")
	}
	pos, err := sp.idx.Committed(ref.GetKey(), rt.part.HighWatermark())
	if err != nil {
		return nil, err
	}
	if ver > pos.Head {
		return nil, errcode.SnapshotVersionExceedsStream.New("snapshot version is above the stream's current version",
			"current", utoa(pos.Head), "version", utoa(ver), "topic", ref.GetTopic(), "key", ref.GetKey())
	}
	st, err := sp.snapshots()
	if err != nil {
		return nil, err
	}
	sn := streams.Snapshot{Key: ref.GetKey(), Version: ver, Payload: req.GetPayload()}
	ok, err := st.Put(sn)
	if err != nil {
		return nil, err
	}
	if !ok {
		cur, _ := st.Get(ref.GetKey())
		return nil, errcode.VersionConflict.New("a snapshot of a later version is stored", "current", utoa(cur.Version),
			"expected", utoa(ver), "reason", "older_snapshot", "topic", ref.GetTopic(), "key", ref.GetKey())
	}
	n, err := s.r.replicateSnapshot(ctx, rt, sn)
	if err != nil {
		s.r.m.snapshotSaves.WithLabelValues("replicate_failed").Inc()
		return nil, err
	}
	s.r.m.snapshotSaves.WithLabelValues("ok").Inc()
	return &streamv1.SaveSnapshotResponse{Version: ver, Replicas: uint32(n)}, nil
}

// replicateSnapshot pushes sn to every other member of the partition's ISR
// (metad's view) and returns how many replicas hold it, this one included.
// Any failure, or an ISR below the effective minimum, is
// snapshot_replicate_failed: the leader keeps its copy, and the client's
// retry (same version) replaces it everywhere.
func (r *Role) replicateSnapshot(ctx context.Context, rt *route, sn streams.Snapshot) (int, error) {
	isr := rt.state.GetIsr()
	fields := []string{"topic", rt.part.Topic(), "partition", itoa(rt.part.ID()), "key", sn.Key, "version", utoa(sn.Version)}
	if minISR := max(rt.minISRReplicated, 1); len(isr) < minISR {
		return 1, errcode.SnapshotReplicateFailed.New("fewer in-sync replicas than the effective minimum",
			append(fields, "isr", strconv.Itoa(len(isr)), "min_in_sync_replicas", strconv.Itoa(minISR))...)
	}
	v := r.meta.Cache().View()
	req := &streamv1.ReplicateSnapshotRequest{Topic: rt.part.Topic(), Partition: rt.part.ID(), LifecycleEpoch: rt.part.LifecycleEpoch(),
		LeaderEpoch: rt.part.LeaderEpoch(), Snapshots: []*streamv1.Snapshot{{Key: sn.Key, Version: sn.Version, Payload: sn.Payload}}}
	type result struct {
		node string
		err  error
	}
	var peers []string
	for _, id := range isr {
		if id != r.env.NodeID {
			peers = append(peers, id)
		}
	}
	results := make(chan result, len(peers))
	for _, id := range peers {
		go func() {
			results <- result{id, r.pushSnapshot(ctx, v, id, req)}
		}()
	}
	stored := 1
	var failed []string
	var firstErr error
	for range peers {
		res := <-results
		if res.err != nil {
			failed = append(failed, res.node)
			if firstErr == nil {
				firstErr = res.err
			}
			continue
		}
		stored++
	}
	if firstErr != nil {
		return stored, errcode.SnapshotReplicateFailed.New("an in-sync replica did not store the snapshot: "+errcode.From(firstErr).Error(),
			append(fields, "failed", joinIDs(failed))...)
	}
	return stored, nil
}

func joinIDs(ids []string) string {
	var b bytes.Buffer
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	return b.String()
}

// pushSnapshot sends one ReplicateSnapshot to node id.
func (r *Role) pushSnapshot(ctx context.Context, v interface {
	Node(string) (*metav1.Node, bool)
}, id string, req *streamv1.ReplicateSnapshotRequest) error {
	n, ok := v.Node(id)
	if !ok || n.GetRpcAddress() == "" {
		return errcode.LeaderNotFound.New("in-sync replica has no known address", "node", id)
	}
	cc, err := r.env.Clients.Get(n.GetRpcAddress())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotReplicateTimeout)
	defer cancel()
	_, err = streamv1.NewStreamServiceClient(cc).ReplicateSnapshot(ctx, req)
	return err
}

// ReadSnapshot answers the stored snapshot of a stream, if any.
func (s *streamService) ReadSnapshot(ctx context.Context, req *streamv1.ReadSnapshotRequest) (*streamv1.ReadSnapshotResponse, error) {
	_, sp, err := s.r.streamLead(ctx, req.GetStream())
	if err != nil {
		return nil, err
	}
	st, err := sp.snapshots()
	if err != nil {
		return nil, err
	}
	sn, ok := st.Get(req.GetStream().GetKey())
	if !ok {
		return &streamv1.ReadSnapshotResponse{}, nil
	}
	return &streamv1.ReadSnapshotResponse{Snapshot: &streamv1.Snapshot{Key: sn.Key, Version: sn.Version, Payload: sn.Payload}}, nil
}

// localReplica returns this node's copy of a partition for the replication
// calls, checking the lifecycle epoch.
func (r *Role) localReplica(topic string, id int32, lifecycleEpoch uint64) (*streamPart, error) {
	p, err := r.localPartition(topic, id)
	if err != nil {
		return nil, err
	}
	if cur := p.LifecycleEpoch(); lifecycleEpoch != cur {
		if lifecycleEpoch < cur {
			return nil, errcode.StaleLifecycleEpoch.New("older topic lifecycle epoch", "topic", topic, "partition", itoa(id))
		}
		return nil, errcode.LifecycleEpochPending.New("this node has not applied the lifecycle epoch yet", "topic", topic, "partition", itoa(id))
	}
	return r.streamParts.get(p), nil
}

// ReplicateSnapshot stores snapshots pushed by the partition's leader on
// this replica. A replica that already follows a newer leader epoch refuses
// them: the sender no longer leads.
func (s *streamService) ReplicateSnapshot(ctx context.Context, req *streamv1.ReplicateSnapshotRequest) (*streamv1.ReplicateSnapshotResponse, error) {
	sp, err := s.r.localReplica(req.GetTopic(), req.GetPartition(), req.GetLifecycleEpoch())
	if err != nil {
		return nil, err
	}
	if cur := sp.part.LeaderEpoch(); req.GetLeaderEpoch() < cur {
		return nil, errcode.StaleLeaderEpoch.New("snapshot from an older leader epoch", "current", utoa(cur), "got", utoa(req.GetLeaderEpoch()))
	}
	st, err := sp.snapshots()
	if err != nil {
		return nil, err
	}
	stored := uint32(0)
	for _, sn := range req.GetSnapshots() {
		ok, err := st.Put(streams.Snapshot{Key: sn.GetKey(), Version: sn.GetVersion(), Payload: sn.GetPayload()})
		if err != nil {
			return nil, err
		}
		if ok {
			stored++
		}
	}
	return &streamv1.ReplicateSnapshotResponse{Stored: stored}, nil
}

// ListSnapshots answers this leader's snapshots: every key and version, or
// the named keys with their payloads.
func (s *streamService) ListSnapshots(ctx context.Context, req *streamv1.ListSnapshotsRequest) (*streamv1.ListSnapshotsResponse, error) {
	sp, err := s.r.localReplica(req.GetTopic(), req.GetPartition(), req.GetLifecycleEpoch())
	if err != nil {
		return nil, err
	}
	st, err := sp.snapshots()
	if err != nil {
		return nil, err
	}
	resp := &streamv1.ListSnapshotsResponse{StoreId: st.ID()}
	if len(req.GetKeys()) == 0 {
		since := uint64(0)
		if req.GetStoreId() == st.ID() {
			since, resp.Incremental = req.GetSinceSeq(), true
		}
		list, seq := st.Changes(since)
		resp.Seq = seq
		for _, sn := range list {
			resp.Snapshots = append(resp.Snapshots, &streamv1.Snapshot{Key: sn.Key, Version: sn.Version})
		}
		if req.GetWithHeads() {
			id, seq, heads, err := sp.idx.RemovedHeads()
			if err != nil {
				return nil, err
			}
			resp.HeadsId, resp.HeadsSeq = id, seq
			if id != req.GetHeadsId() || seq != req.GetHeadsSeq() {
				resp.HeadsChanged = true
				for k, h := range heads {
					resp.RemovedHeads = append(resp.RemovedHeads, &streamv1.Snapshot{Key: k, Version: h})
				}
			}
		}
		return resp, nil
	}
	for _, k := range req.GetKeys() {
		if sn, ok := st.Get(k); ok {
			resp.Snapshots = append(resp.Snapshots, &streamv1.Snapshot{Key: sn.Key, Version: sn.Version, Payload: sn.Payload})
		}
	}
	return resp, nil
}

// streamsLoop keeps the event-sourcing state of this node's partitions in
// step: every snapshotCatchUpEvery it drops the state of partitions that
// are gone, keeps the version index of every event-sourcing partition warm
// (so a follower that becomes leader answers at once), and lets each
// follower fetch the snapshots it lacks from its leader.
func (r *Role) streamsLoop(ctx context.Context) {
	defer r.streamParts.sweep(true)
	pace.Every(ctx, snapshotCatchUpEvery, func() {
		r.streamParts.sweep(false)
		st, err := r.storage()
		if err != nil {
			return
		}
		v := r.meta.Cache().View()
		if !v.Ready() {
			return
		}
		for _, p := range st.Partitions() {
			t, ps, ok := v.Partition(p.Topic(), p.ID())
			if !ok || !t.GetConfig().GetEventSourcing() || t.GetConfig().GetLifecycleEpoch() != p.LifecycleEpoch() {
				continue
			}
			sp := r.streamParts.get(p)
			if err := sp.idx.Sync(); err != nil {
				r.env.Logger.Debug("stream index sync failed", "topic", p.Topic(), "partition", p.ID(), "err", err)
			}
			if p.Follower() && ps.GetLeader() != "" && ps.GetLeader() != r.env.NodeID {
				if err := r.catchUpSnapshots(ctx, v, sp, ps.GetLeader()); err != nil {
					r.env.Logger.Debug("snapshot catch-up failed", "topic", p.Topic(), "partition", p.ID(), "err", err)
				}
			}
		}
	})
}

// beforeRetention saves the heads of the streams whose events all lie below
// the new log start of an event-sourcing partition before retention
// deletes them (streams.Index.Retain). Without metad's view it cannot tell
// an event-sourcing topic from another, so the deletion waits.
func (r *Role) beforeRetention(p *partition.Partition, newStart uint64) error {
	v := r.meta.Cache().View()
	if !v.Ready() {
		return errcode.ClusterMetadataUnavailable.New("retention waits for metad's view (event-sourcing stream heads)", "topic", p.Topic())
	}
	t, _, ok := v.Partition(p.Topic(), p.ID())
	if !ok || !t.GetConfig().GetEventSourcing() {
		return nil
	}
	if err := r.streamParts.get(p).idx.Retain(newStart); err != nil {
		r.env.Logger.Warn("retention waits: the stream heads could not be saved", "topic", p.Topic(), "partition", p.ID(), "err", err)
		return err
	}
	return nil
}

// catchUpSnapshots fetches from the leader every snapshot newer than this
// follower's copy. The listing is incremental: after a complete catch-up
// the follower asks only for the snapshots the leader's store saved since
// (its change sequence); a new leader or a reopened store (a new store id)
// lists everything once again.
func (r *Role) catchUpSnapshots(ctx context.Context, v interface {
	Node(string) (*metav1.Node, bool)
}, sp *streamPart, leader string) error {
	n, ok := v.Node(leader)
	if !ok || n.GetRpcAddress() == "" {
		return nil
	}
	cc, err := r.env.Clients.Get(n.GetRpcAddress())
	if err != nil {
		return err
	}
	c := streamv1.NewStreamServiceClient(cc)
	ctx, cancel := context.WithTimeout(ctx, snapshotReplicateTimeout)
	defer cancel()
	p := sp.part
	base := &streamv1.ListSnapshotsRequest{Topic: p.Topic(), Partition: p.ID(), LifecycleEpoch: p.LifecycleEpoch()}
	if cur := sp.cursor(); cur.leader == leader {
		base.StoreId, base.SinceSeq = cur.storeID, cur.seq
	}
	// The leader's heads of removed streams come with the listing, whole,
	// when they changed since this follower last took them.
	base.WithHeads = true
	sp.mu.Lock()
	if sp.heads.leader == leader {
		base.HeadsId, base.HeadsSeq = sp.heads.storeID, sp.heads.seq
	}
	sp.mu.Unlock()
	list, err := c.ListSnapshots(ctx, base)
	if err != nil {
		return err
	}
	if list.GetHeadsChanged() {
		heads := make(map[string]uint64, len(list.GetRemovedHeads()))
		for _, h := range list.GetRemovedHeads() {
			heads[h.GetKey()] = h.GetVersion()
		}
		if err := sp.idx.MergeHeads(heads); err != nil {
			return err
		}
	}
	if list.GetHeadsId() != 0 {
		sp.mu.Lock()
		sp.heads = snapshotCursor{leader: leader, storeID: list.GetHeadsId(), seq: list.GetHeadsSeq()}
		sp.mu.Unlock()
	}
	st, err := sp.snapshots()
	if err != nil {
		return err
	}
	var missing []string
	for _, sn := range list.GetSnapshots() {
		if cur, ok := st.Get(sn.GetKey()); !ok || cur.Version < sn.GetVersion() {
			missing = append(missing, sn.GetKey())
		}
	}
	for len(missing) > 0 {
		batch := missing[:min(len(missing), 256)]
		missing = missing[len(batch):]
		req := &streamv1.ListSnapshotsRequest{Topic: base.Topic, Partition: base.Partition, LifecycleEpoch: base.LifecycleEpoch, Keys: batch}
		got, err := c.ListSnapshots(ctx, req)
		if err != nil {
			return err
		}
		for _, sn := range got.GetSnapshots() {
			if _, err := st.Put(streams.Snapshot{Key: sn.GetKey(), Version: sn.GetVersion(), Payload: sn.GetPayload()}); err != nil {
				return err
			}
		}
	}
	// Everything listed is stored: the next listing starts after it.
	sp.mu.Lock()
	sp.caught = snapshotCursor{leader: leader, storeID: list.GetStoreId(), seq: list.GetSeq()}
	sp.mu.Unlock()
	return nil
}

// cursor returns how far the snapshot catch-up got.
func (sp *streamPart) cursor() snapshotCursor {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.caught
}
