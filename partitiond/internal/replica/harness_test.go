package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/clock"
	"github.com/strataio/strata/partitiond/internal/partition"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// The harness: partition servers in one process, each a Manager on its own
// partition.Node (crashable in-memory storage) serving ReplicaFetch over
// loopback mTLS gRPC with its own certificate identity, and a fake metad
// that applies ALTER_ISR as metad does and hands every change to the
// managers as the reconciler's applyRoles would.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	topic     = "t"
	partID    = int32(0)
	lifecycle = uint64(1)
	// waitLimit bounds every wait of a test for a condition.
	waitLimit = 15 * time.Second
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clusterOpts configures a test cluster.
type clusterOpts struct {
	ids          []string // partition servers, replica order; the first leads at epoch 1
	minISR       int
	maxLag       time.Duration
	fetchMaxWait time.Duration
	topicConfig  partition.TopicConfig
	defaults     partition.Defaults
	// stopped lists servers whose storage exists but whose manager is not
	// started.
	stopped []string
	// partitionMaxBytes bounds a server's fetches per partition (its
	// manager's PartitionMaxBytes; 0: the default).
	partitionMaxBytes map[string]int
	// now is the managers' clock (default time.Now).
	now func() time.Time
	// diskDir, when set, puts each server's storage on disk under
	// diskDir/ID (default: crashable memory, whose files grow by copying:
	// too slow for benchmarks).
	diskDir string
}

// cluster is N partition servers replicating partition t/0.
type cluster struct {
	t    testing.TB
	opts clusterOpts
	ca   *pkitest.PKI
	meta *fakeMeta

	pubMu     sync.Mutex // orders view deliveries, as one watch stream would
	closeOnce sync.Once
	mu        sync.Mutex
	members   map[string]*member
}

// member is one partition server: storage that outlives restarts, and
// (while running) a manager with its gRPC server.
type member struct {
	id      string
	nodeCfg partition.NodeConfig
	node    *partition.Node
	gate    *sendGate
	// dialHold, when set, holds the fetchers' Dial (ignoring their
	// context) until the channel is closed; dialEntered is signalled
	// (without blocking) when a Dial is held.
	dialHold    atomic.Pointer[chan struct{}]
	dialEntered chan struct{}
	logs        *logCapture
	metrics     *Metrics

	// Running state (nil while stopped).
	mgr  *Manager
	srv  *rpc.Server
	pool *rpc.Pool
	addr string
}

func newCluster(t testing.TB, o clusterOpts) *cluster {
	t.Helper()
	if o.minISR == 0 {
		o.minISR = 1
	}
	if o.maxLag == 0 {
		o.maxLag = 10 * time.Second
	}
	if o.fetchMaxWait == 0 {
		o.fetchMaxWait = 100 * time.Millisecond
	}
	if o.defaults.SegmentBytes == 0 {
		o.defaults.SegmentBytes = 16 << 10
	}
	c := &cluster{t: t, opts: o, ca: pkitest.New(t), members: map[string]*member{}}
	c.meta = newFakeMeta(o.ids, o.minISR)
	c.meta.onChange = func() { c.publish() }
	for _, id := range o.ids {
		var fs vfs.FS = vfs.NewCrashableMem()
		dir := "/data"
		if o.diskDir != "" {
			fs, dir = vfs.Default, filepath.Join(o.diskDir, id)
		}
		m := &member{id: id, gate: newSendGate(), logs: newLogCapture(), metrics: &Metrics{}, dialEntered: make(chan struct{}, 1),
			nodeCfg: partition.NodeConfig{Dir: dir, FS: fs, Clock: clock.NewManual(t0), Defaults: o.defaults}}
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m.node = c.openNode(m)
		if _, err := m.node.CreatePartition(context.Background(), partition.PartitionSpec{Topic: topic, Partition: partID,
			LifecycleEpoch: lifecycle, LeaderEpoch: 1, Config: o.topicConfig}); err != nil {
			t.Fatal(err)
		}
		c.members[id] = m
	}
	t.Cleanup(c.close)
	for _, id := range o.ids {
		if !slices.Contains(o.stopped, id) {
			c.startManager(c.members[id])
		}
	}
	c.publish()
	return c
}

func (c *cluster) openNode(m *member) *partition.Node {
	c.t.Helper()
	n, err := partition.Open(context.Background(), m.nodeCfg)
	if err != nil {
		c.t.Fatalf("open node %s: %v", m.id, err)
	}
	return n
}

// fillReplicaPolicy lets partition servers, and only them, call
// ReplicaFetch; the service's other methods are registered but nobody may
// call them.
func fillReplicaPolicy(srv *rpc.Server, p rpc.Policy) {
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			p["/"+svc+"/"+m.Name] = nil
		}
	}
	p[partitionv1.PartitionService_ReplicaFetch_FullMethodName] = []pki.Role{pki.RolePartitiond}
}

// fetchService is the ReplicaFetch face of a partition server.
type fetchService struct {
	partitionv1.UnimplementedPartitionServiceServer
	mgr *Manager
}

func (s fetchService) ReplicaFetch(stream partitionv1.PartitionService_ReplicaFetchServer) error {
	return s.mgr.Serve(stream)
}

func (c *cluster) startManager(m *member) {
	c.t.Helper()
	src := c.ca.Source(c.t, pki.RolePartitiond, m.id)
	pool := rpc.NewPool(rpc.ClientOptions{Source: src, ServerRoles: []pki.Role{pki.RolePartitiond}})
	mgr := New(Config{
		NodeID: m.id,
		Node:   m.node,
		Meta:   c.meta,
		Dial: func(addr string) (partitionv1.PartitionServiceClient, error) {
			if h := m.dialHold.Load(); h != nil {
				select {
				case m.dialEntered <- struct{}{}:
				default:
				}
				<-*h
			}
			cc, err := pool.Get(addr)
			if err != nil {
				return nil, err
			}
			return gatedClient{PartitionServiceClient: partitionv1.NewPartitionServiceClient(cc), gate: m.gate}, nil
		},
		MaxLag:            c.opts.maxLag,
		FetchMaxWait:      c.opts.fetchMaxWait,
		PartitionMaxBytes: c.opts.partitionMaxBytes[m.id],
		RetryBackoff:      10 * time.Millisecond,
		Now:               c.opts.now,
		Logger:            slog.New(m.logs),
		Metrics:           m.metrics,
	})
	// The policy needs the registered methods; the server keeps the map,
	// so it is filled in after registration.
	policy := rpc.Policy{}
	srv, err := rpc.NewServer(rpc.ServerOptions{Source: src, Policy: policy})
	if err != nil {
		c.t.Fatal(err)
	}
	partitionv1.RegisterPartitionServiceServer(srv, fetchService{mgr: mgr})
	fillReplicaPolicy(srv, policy)
	if err := rpc.CheckPolicy(srv, policy); err != nil {
		c.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	c.mu.Lock()
	m.mgr, m.srv, m.pool, m.addr = mgr, srv, pool, lis.Addr().String()
	c.mu.Unlock()
}

// stop stops a server's manager and RPC server; its storage stays.
func (c *cluster) stop(id string) {
	c.t.Helper()
	m := c.member(id)
	c.mu.Lock()
	mgr, srv, pool := m.mgr, m.srv, m.pool
	m.mgr, m.srv, m.pool, m.addr = nil, nil, nil, ""
	c.mu.Unlock()
	if mgr == nil {
		return
	}
	mgr.Close()
	srv.Stop()
	_ = pool.Close()
}

// restart starts a stopped server again: a new manager on the same storage
// (reopened from its files when reopen is set) at a new address, with the
// current view.
func (c *cluster) restart(id string, reopen bool) {
	c.t.Helper()
	m := c.member(id)
	c.stop(id)
	if reopen {
		if err := m.node.Close(); err != nil {
			c.t.Fatal(err)
		}
		m.node = c.openNode(m)
	}
	c.startManager(m)
	c.publish()
}

// close stops every server and closes its storage (once).
func (c *cluster) close() {
	c.closeOnce.Do(func() {
		for _, id := range c.opts.ids {
			c.stop(id)
		}
		for _, id := range c.opts.ids {
			_ = c.members[id].node.Close()
		}
	})
}

func (c *cluster) member(id string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[id]
	if m == nil {
		c.t.Fatalf("no member %s", id)
	}
	return m
}

// part returns a server's local replica of t/0.
func (c *cluster) part(id string) *partition.Partition {
	c.t.Helper()
	p, err := c.member(id).node.Partition(topic, partID)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *cluster) mgr(id string) *Manager {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[id].mgr
}

// publish hands the fake metad's current view to every running server (or
// only to those listed), as applyRoles does: the partition's leader epoch
// first (the reconciler's CreatePartition), then Manager.Apply. The
// leader's address is known only while it runs (metad's liveness).
func (c *cluster) publish(only ...string) {
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	st := c.meta.state()
	c.mu.Lock()
	addr := ""
	if l := c.members[st.Leader]; l != nil && l.mgr != nil {
		addr = l.addr
	}
	type target struct {
		m   *member
		mgr *Manager
	}
	var ts []target
	for _, id := range c.opts.ids {
		m := c.members[id]
		if m.mgr != nil && (len(only) == 0 || slices.Contains(only, id)) {
			ts = append(ts, target{m, m.mgr})
		}
	}
	c.mu.Unlock()
	for _, x := range ts {
		p, err := x.m.node.Partition(topic, partID)
		if err != nil {
			c.t.Errorf("publish to %s: %v", x.m.id, err)
			continue
		}
		if err := p.SetLeaderEpoch(st.LeaderEpoch); err != nil {
			c.t.Errorf("publish to %s: %v", x.m.id, err)
			continue
		}
		x.mgr.Apply(Assignment{Part: p, Topic: topic, Partition: partID, LifecycleEpoch: lifecycle,
			LeaderEpoch: st.LeaderEpoch, Leader: st.Leader, LeaderAddr: addr,
			Replicas: st.Replicas, ISR: st.Isr, MinISR: c.meta.minISR})
	}
}

// setISR changes the ISR in metad (RECONCILE dropping dead members) and
// publishes it.
func (c *cluster) setISR(isr ...string) {
	c.meta.mu.Lock()
	c.meta.ps.Isr = slices.Clone(isr)
	c.meta.mu.Unlock()
	c.publish()
}

// elect makes id the leader at the next epoch with the given ISR (metad's
// election and RECONCILE), and publishes it to the running servers (or
// only to those listed).
func (c *cluster) elect(id string, isr []string, only ...string) uint64 {
	c.meta.mu.Lock()
	c.meta.ps.Leader = id
	c.meta.ps.LeaderEpoch++
	c.meta.ps.Isr = slices.Clone(isr)
	e := c.meta.ps.LeaderEpoch
	c.meta.mu.Unlock()
	c.publish(only...)
	return e
}

// fakeMeta is metad for one partition: ALTER_ISR is a compare-and-set on
// the leader epoch answering the new state, CHECKPOINT_HWM is fenced by
// both epochs and monotonic. Every call is recorded; alterHook injects
// faults. Liveness is not modelled: an ISR may name a stopped server.
type fakeMeta struct {
	mu        sync.Mutex
	ps        *metav1.PartitionState
	minISR    int
	alters    []alterCall
	hwms      []*metav1.CheckpointHwmRequest
	alterHook func(ctx context.Context, req *metav1.AlterIsrRequest) error
	// onChange delivers the view after an accepted change (the watch),
	// unless watchOff is set.
	onChange func()
	watchOff atomic.Bool
}

// alterCall is one ALTER_ISR seen, with its outcome.
type alterCall struct {
	req *metav1.AlterIsrRequest
	err error
}

func newFakeMeta(replicas []string, minISR int) *fakeMeta {
	return &fakeMeta{minISR: minISR, ps: &metav1.PartitionState{Id: partID, Replicas: slices.Clone(replicas),
		Isr: slices.Clone(replicas), Leader: replicas[0], LeaderEpoch: 1}}
}

func (f *fakeMeta) state() *metav1.PartitionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneState(f.ps)
}

func cloneState(p *metav1.PartitionState) *metav1.PartitionState {
	return &metav1.PartitionState{Id: p.Id, Replicas: slices.Clone(p.Replicas), Isr: slices.Clone(p.Isr),
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, CommittedHwm: p.CommittedHwm}
}

func (f *fakeMeta) isr() []string { return f.state().Isr }

func (f *fakeMeta) setAlterHook(h func(ctx context.Context, req *metav1.AlterIsrRequest) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alterHook = h
}

func (f *fakeMeta) AlterIsr(ctx context.Context, req *metav1.AlterIsrRequest) (*metav1.AlterIsrResponse, error) {
	f.mu.Lock()
	hook := f.alterHook
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, req); err != nil {
			f.mu.Lock()
			f.alters = append(f.alters, alterCall{req, err})
			f.mu.Unlock()
			return nil, err
		}
	}
	resp, changed, err := f.alterIsr(req)
	if changed && f.onChange != nil && !f.watchOff.Load() {
		f.onChange()
	}
	return resp, err
}

func (f *fakeMeta) alterIsr(req *metav1.AlterIsrRequest) (*metav1.AlterIsrResponse, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.ps
	reject := func(err error) (*metav1.AlterIsrResponse, bool, error) {
		f.alters = append(f.alters, alterCall{req, err})
		return nil, false, err
	}
	if req.GetTopic() != topic || req.GetPartition() != partID {
		return reject(errcode.PartitionNotFound.New("no such partition"))
	}
	if req.GetLeaderEpoch() != p.LeaderEpoch {
		return reject(errcode.StaleLeaderEpoch.New("ISR change with a stale leader epoch",
			"current", fmt.Sprint(p.LeaderEpoch), "requested", fmt.Sprint(req.GetLeaderEpoch())))
	}
	if p.Leader == "" || (req.GetRequestedBy() != "" && req.GetRequestedBy() != p.Leader) {
		return reject(errcode.PartitionLeaderFenced.New("only the partition leader changes its ISR"))
	}
	seen := map[string]bool{}
	for _, id := range req.GetIsr() {
		if seen[id] || !slices.Contains(p.Replicas, id) {
			return reject(errcode.InvalidParameter.New("bad ISR member", "param", "isr", "member", id))
		}
		seen[id] = true
	}
	if !seen[p.Leader] {
		return reject(errcode.InvalidParameter.New("the ISR must contain the leader", "param", "isr"))
	}
	var isr []string
	for _, r := range p.Replicas {
		if seen[r] {
			isr = append(isr, r)
		}
	}
	f.alters = append(f.alters, alterCall{req, nil})
	changed := !slices.Equal(isr, p.Isr)
	p.Isr = isr
	return &metav1.AlterIsrResponse{Partition: cloneState(p)}, changed, nil
}

func (f *fakeMeta) CheckpointHwm(_ context.Context, req *metav1.CheckpointHwmRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hwms = append(f.hwms, req)
	switch {
	case req.GetLifecycleEpoch() != lifecycle:
		return errcode.StaleLifecycleEpoch.New("stale lifecycle epoch")
	case req.GetLeaderEpoch() != f.ps.LeaderEpoch:
		return errcode.StaleLeaderEpoch.New("stale leader epoch")
	case req.GetHwm() < f.ps.CommittedHwm:
		return errcode.InvalidCommitWatermark.New("HWM regression", "reason", "regression")
	}
	f.ps.CommittedHwm = req.GetHwm()
	return nil
}

// alterCalls returns the ALTER_ISR calls seen so far.
func (f *fakeMeta) alterCalls() []alterCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.alters)
}

func (f *fakeMeta) checkpoints() []*metav1.CheckpointHwmRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hwms)
}

// sendGate holds a follower's fetch requests: while closed, a fetcher's
// next request waits before it is sent (its session stays open). It can
// also let a given number of requests through and then close.
type sendGate struct {
	mu      sync.Mutex
	budget  int // requests still allowed; < 0: unlimited
	changed chan struct{}
}

func newSendGate() *sendGate { return &sendGate{budget: -1, changed: make(chan struct{})} }

func (g *sendGate) set(budget int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.budget = budget
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *sendGate) close()      { g.set(0) }
func (g *sendGate) open()       { g.set(-1) }
func (g *sendGate) allow(n int) { g.set(n) }

func (g *sendGate) pass(ctx context.Context) error {
	for {
		g.mu.Lock()
		if g.budget != 0 {
			if g.budget > 0 {
				g.budget--
			}
			g.mu.Unlock()
			return nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type gatedClient struct {
	partitionv1.PartitionServiceClient
	gate *sendGate
}

func (c gatedClient) ReplicaFetch(ctx context.Context, opts ...grpc.CallOption) (partitionv1.PartitionService_ReplicaFetchClient, error) {
	s, err := c.PartitionServiceClient.ReplicaFetch(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return gatedStream{PartitionService_ReplicaFetchClient: s, gate: c.gate}, nil
}

type gatedStream struct {
	partitionv1.PartitionService_ReplicaFetchClient
	gate *sendGate
}

func (s gatedStream) Send(req *partitionv1.ReplicaFetchRequest) error {
	if err := s.gate.pass(s.Context()); err != nil {
		return err
	}
	return s.PartitionService_ReplicaFetchClient.Send(req)
}

// logCapture keeps a manager's log records (every level) for assertions on
// what it did (truncations, failed fetches). Handlers made by WithAttrs
// share their parent's store.
type logCapture struct {
	store *logStore
	with  []slog.Attr
}

type logStore struct {
	mu   sync.Mutex
	recs []capturedLog
}

type capturedLog struct {
	msg   string
	attrs map[string]slog.Value
}

func newLogCapture() *logCapture { return &logCapture{store: &logStore{}} }

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	c := capturedLog{msg: r.Message, attrs: map[string]slog.Value{}}
	for _, a := range l.with {
		c.attrs[a.Key] = a.Value
	}
	r.Attrs(func(a slog.Attr) bool {
		c.attrs[a.Key] = a.Value
		return true
	})
	l.store.mu.Lock()
	l.store.recs = append(l.store.recs, c)
	l.store.mu.Unlock()
	return nil
}

func (l *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	return &logCapture{store: l.store, with: append(slices.Clone(l.with), as...)}
}

func (l *logCapture) WithGroup(string) slog.Handler { return l }

// find returns the records with message msg.
func (l *logCapture) find(msg string) []capturedLog {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	var out []capturedLog
	for _, r := range l.store.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// uint returns a numeric attribute.
func (c capturedLog) uint(key string) uint64 {
	v := c.attrs[key].Resolve()
	switch v.Kind() {
	case slog.KindUint64:
		return v.Uint64()
	case slog.KindInt64:
		return uint64(v.Int64())
	}
	return 0
}

// err returns the "err" attribute.
func (c capturedLog) err() error {
	e, _ := c.attrs["err"].Any().(error)
	return e
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recordSet encodes payloads as a Wire v2 record set.
func recordSet(t testing.TB, ps ...string) []byte {
	t.Helper()
	var set []byte
	for _, p := range ps {
		b, err := (&wire.Record{Topic: topic, Payload: []byte(p), Partition: partID}).AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		set = binary.BigEndian.AppendUint32(set, uint32(len(b)))
		set = append(set, b...)
	}
	return set
}

// producerID is the idempotent producer of the tests' acks=all appends.
const producerID = "prod-1"

// appendAll appends an idempotent acks=all batch on id's replica, with the
// ISR facts the role takes from Manager.Leading. It waits at most
// waitLimit for the commit.
func (c *cluster) appendAll(ctx context.Context, id string, seq uint64, ps ...string) (partition.AppendResult, error) {
	ctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	isr, minISR, _ := c.mgr(id).Leading(topic, partID)
	return c.part(id).Append(ctx, &partition.AppendRequest{LifecycleEpoch: lifecycle, Acks: partition.AcksAll,
		Records: recordSet(c.t, ps...), RecordCount: uint32(len(ps)), ProducerID: producerID, ProducerEpoch: 1,
		BaseSequence: seq, Idempotent: true, ISRSize: isr, MinISR: minISR})
}

// appendAllAsync runs appendAll in the background; its outcome arrives on
// the channel.
func (c *cluster) appendAllAsync(id string, seq uint64, ps ...string) <-chan error {
	res := make(chan error, 1)
	go func() {
		_, err := c.appendAll(context.Background(), id, seq, ps...)
		res <- err
	}()
	return res
}

// stillWaiting fails if the append answered within d.
func stillWaiting(t testing.TB, res <-chan error, d time.Duration, why string) {
	t.Helper()
	select {
	case err := <-res:
		t.Fatalf("acks=all answered (%v) %s", err, why)
	case <-time.After(d):
	}
}

// acknowledged fails unless the append is acknowledged within waitLimit.
func acknowledged(t testing.TB, res <-chan error, why string) {
	t.Helper()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("acks=all %s: %v", why, err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("acks=all not acknowledged %s", why)
	}
}

// appendOne appends with acks=1 (durable on the leader only).
func (c *cluster) appendOne(id string, ps ...string) partition.AppendResult {
	c.t.Helper()
	res, err := c.part(id).Append(context.Background(), &partition.AppendRequest{LifecycleEpoch: lifecycle,
		Acks: partition.AcksLeader, Records: recordSet(c.t, ps...), RecordCount: uint32(len(ps))})
	if err != nil {
		c.t.Fatalf("acks=1 append on %s: %v", id, err)
	}
	return res
}

// storedBatch is one batch of a log: its header and its records.
type storedBatch struct {
	h       segment.Header
	records []byte
}

// batchesOf reads a replica's durable log from offset from as stored
// batches.
func batchesOf(t testing.TB, p *partition.Partition, from uint64) []storedBatch {
	t.Helper()
	var out []storedBatch
	for {
		raw, next, err := p.ReadBatches(lifecycle, from, 1<<20)
		if err != nil {
			t.Fatalf("read batches from %d: %v", from, err)
		}
		if len(raw) == 0 {
			return out
		}
		err = seglog.SplitBatches(raw, func(h *segment.Header, b []byte) error {
			hc := *h
			hc.ProducerID = slices.Clone(h.ProducerID)
			out = append(out, storedBatch{h: hc, records: slices.Clone(b[h.Len():])})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		from = next
	}
}

// sameLog reports how a follower's log differs from its leader's from the
// leader's log start on ("" when they hold the same batches): headers equal
// except for the durable watermark and the CRC (each replica's own),
// records byte-identical, and the same log end.
func sameLog(t testing.TB, want, got *partition.Partition) string {
	t.Helper()
	if w, g := want.LogEndOffset(), got.LogEndOffset(); w != g {
		return fmt.Sprintf("log end %d, want %d", g, w)
	}
	start := want.LogStartOffset()
	a, b := batchesOf(t, want, start), batchesOf(t, got, start)
	if len(a) != len(b) {
		return fmt.Sprintf("%d batches, want %d", len(b), len(a))
	}
	for i := range a {
		ha, hb := a[i].h, b[i].h
		ha.DurableWatermark, hb.DurableWatermark, ha.CRC, hb.CRC = 0, 0, 0, 0
		if !headersEqual(ha, hb) {
			return fmt.Sprintf("batch %d header %+v, want %+v", i, hb, ha)
		}
		if !bytes.Equal(a[i].records, b[i].records) {
			return fmt.Sprintf("batch %d (offset %d) records differ", i, ha.BaseOffset)
		}
	}
	return ""
}

// headersEqual compares batch headers, producer ids by content.
func headersEqual(a, b segment.Header) bool {
	if len(a.ProducerID) == 0 && len(b.ProducerID) == 0 {
		a.ProducerID, b.ProducerID = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// payloadsOf returns the payloads of a replica's log, by offset.
func payloadsOf(t testing.TB, p *partition.Partition) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for _, b := range batchesOf(t, p, p.LogStartOffset()) {
		set := b.records
		for len(set) > 0 {
			n := binary.BigEndian.Uint32(set)
			r, err := wire.ParseRecord(set[4 : 4+n])
			if err != nil {
				t.Fatal(err)
			}
			out[r.Offset()] = string(r.Payload())
			set = set[4+n:]
		}
	}
	return out
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code errcode.Code) {
	t.Helper()
	if err == nil || !errors.Is(err, code) {
		t.Fatalf("got %v, want %s", err, code.Name())
	}
}
