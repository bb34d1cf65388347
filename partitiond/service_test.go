package partitiond

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus/testutil"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/telemetry"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

func TestAppendUnaryAndProduceStream(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("orders", 2, 1, "p1", "p1"))
	c.waitServing(t, "orders", 0)

	resp, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "orders", Partition: 0, LifecycleEpoch: 1, Acks: 1,
		Records: recordSet(t, "orders", "a", "b"), RecordCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetBaseOffset() != 0 || resp.GetLastOffset() != 1 || resp.GetLeader() != "p1" || resp.GetLeaderEpoch() != 1 {
		t.Fatalf("append response %v", resp)
	}

	// Pipelined stream: every request is sent before any response is read.
	stream, err := c.client.Produce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 0; i < n; i++ {
		acks := int32(1)
		if i%10 == 0 {
			acks = 0
		}
		err := stream.Send(&partitionv1.ProduceRequest{CorrelationId: uint64(1000 + i), Append: &partitionv1.AppendRequest{
			Topic: "orders", Partition: 0, LifecycleEpoch: 1, Acks: acks,
			Records: recordSet(t, "orders", "s"+strconv.Itoa(i)), RecordCount: 1}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A failing request answers in-band and the stream goes on.
	if err := stream.Send(&partitionv1.ProduceRequest{CorrelationId: 7, Append: &partitionv1.AppendRequest{
		Topic: "nope", Partition: 0, Acks: 1, Records: recordSet(t, "nope", "x"), RecordCount: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	offsets := map[uint64]uint64{}
	var sawErr bool
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCorrelationId() == 7 {
			if r.GetAppend().GetError().GetCode() != errcode.TopicNotFound.Name() {
				t.Fatalf("unknown topic answered %v", r)
			}
			sawErr = true
			continue
		}
		if e := r.GetAppend().GetError(); e != nil {
			t.Fatalf("request %d failed: %v", r.GetCorrelationId(), e)
		}
		offsets[r.GetCorrelationId()] = r.GetAppend().GetBaseOffset()
	}
	if len(offsets) != n || !sawErr {
		t.Fatalf("got %d responses (error seen %v), want %d", len(offsets), sawErr, n)
	}
	// Requests are written in arrival order: request i got offset i+2.
	for i := 0; i < n; i++ {
		if got := offsets[uint64(1000+i)]; got != uint64(i+2) {
			t.Fatalf("request %d got offset %d, want %d", i, got, i+2)
		}
	}
	recs := c.fetchAll(t, "orders", 0)
	if len(recs) != n+2 {
		t.Fatalf("fetched %d records, want %d", len(recs), n+2)
	}
	for i, r := range recs {
		want := "s" + strconv.Itoa(i-2)
		if i < 2 {
			want = []string{"a", "b"}[i]
		}
		if r.offset != uint64(i) || r.payload != want {
			t.Fatalf("record %d = %+v, want payload %q", i, r, want)
		}
	}
}

func TestFetchLongPollWakesOnAppend(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("events", 1, 1, "p1", "p1"))
	c.waitServing(t, "events", 0)

	type result struct {
		resp *partitionv1.FetchResponse
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		resp, err := c.client.Fetch(context.Background(), &partitionv1.FetchRequest{Topic: "events", Partition: 0, Offset: 0, WaitMs: 5000})
		done <- result{resp, err, time.Since(start)}
	}()
	time.Sleep(150 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("fetch returned before any append: %+v", r)
	default:
	}
	if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "events", Partition: 0, LifecycleEpoch: 1, Acks: 1,
		Records: recordSet(t, "events", "wake"), RecordCount: 1}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.took > 3*time.Second || r.resp.GetRecordCount() != 1 || r.resp.GetNextOffset() != 1 {
		t.Fatalf("long poll: %v after %v", r.resp, r.took)
	}
	if got := decodeSet(t, r.resp.GetRecords()); got[0].payload != "wake" {
		t.Fatalf("fetched %+v", got)
	}

	// An empty long poll times out with an empty answer.
	start := time.Now()
	resp, err := c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "events", Partition: 0, Offset: 1, WaitMs: 100})
	if err != nil || resp.GetRecordCount() != 0 || resp.GetNextOffset() != 1 || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("empty poll: %v %v after %v", resp, err, time.Since(start))
	}
	// max_records bounds the answer.
	for i := 0; i < 5; i++ {
		c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "events", Partition: 0, Acks: 1, Records: recordSet(t, "events", "m"), RecordCount: 1})
	}
	resp, err = c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "events", Partition: 0, Offset: 1, MaxRecords: 2})
	if err != nil || resp.GetRecordCount() != 2 || resp.GetNextOffset() != 3 {
		t.Fatalf("max_records: %v %v", resp, err)
	}
}

func TestIdempotentRetryAndAcksAll(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	topic := metadfake.NewTopic("pay", 1, 1, "p1", "p1")
	topic.Config.Idempotent = true
	c.metad.PutTopic(topic)
	c.waitServing(t, "pay", 0)

	req := &partitionv1.AppendRequest{Topic: "pay", Partition: 0, LifecycleEpoch: 1, Acks: -1, Idempotent: true,
		ProducerId: "prod-1", ProducerEpoch: 1, BaseSequence: 1, Records: recordSet(t, "pay", "x", "y"), RecordCount: 2}
	first, err := c.client.Append(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	req.Records = recordSet(t, "pay", "x", "y")
	retry, err := c.client.Append(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if !retry.GetDuplicate() || retry.GetBaseOffset() != first.GetBaseOffset() || retry.GetLastOffset() != first.GetLastOffset() {
		t.Fatalf("retry %v, first %v", retry, first)
	}
	// A gap is rejected.
	gap := &partitionv1.AppendRequest{Topic: "pay", Partition: 0, LifecycleEpoch: 1, Acks: -1, Idempotent: true,
		ProducerId: "prod-1", ProducerEpoch: 1, BaseSequence: 9, Records: recordSet(t, "pay", "z"), RecordCount: 1}
	_, err = c.client.Append(ctx(t), gap)
	wantCode(t, err, errcode.OutOfOrderSequence)
	// Idempotence requires acks all.
	_, err = c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "pay", Partition: 0, Acks: 1, Idempotent: true,
		ProducerId: "prod-1", ProducerEpoch: 1, BaseSequence: 3, Records: recordSet(t, "pay", "z"), RecordCount: 1})
	wantCode(t, err, errcode.IdempotenceRequiresAcksAll)
	if d, g := testutil.ToFloat64(c.role.m.seqDup.WithLabelValues("pay", "0")), testutil.ToFloat64(c.role.m.seqGap.WithLabelValues("pay", "0")); d != 1 || g != 1 {
		t.Fatalf("seqnum metrics: duplicate %v gap %v", d, g)
	}
	if got := c.fetchAll(t, "pay", 0); len(got) != 2 {
		t.Fatalf("log holds %d records, want 2", len(got))
	}

	// acks all with an effective min ISR above 1 is refused before append.
	two := int32(2)
	topic.Config.MinInSyncReplicas = &two
	c.metad.PutTopic(topic)
	looptest.Eventually(t, "min ISR override visible", func() bool {
		tt, _ := c.role.meta.Cache().View().Topic("pay")
		return tt.GetConfig().MinInSyncReplicas != nil
	})
	_, err = c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "pay", Partition: 0, Acks: -1,
		Records: recordSet(t, "pay", "w"), RecordCount: 1})
	wantCode(t, err, errcode.InsufficientInSyncReplicas)
	if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "pay", Partition: 0, Acks: 1,
		Records: recordSet(t, "pay", "w"), RecordCount: 1}); err != nil {
		t.Fatalf("acks=1 with min ISR 2: %v", err)
	}
}

func TestFetchErrorsAndRouting(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutNode(&metav1.Node{Id: "p2", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:19999", Live: true})
	c.metad.PutTopic(metadfake.NewTopic("logs", 1, 1, "p1", "p1"))
	c.metad.PutTopic(metadfake.NewTopic("elsewhere", 1, 1, "p2", "p2"))
	c.waitServing(t, "logs", 0)
	for i := 0; i < 3; i++ {
		if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "logs", Partition: 0, Acks: 1,
			Records: recordSet(t, "logs", fmt.Sprint(i)), RecordCount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "logs", Partition: 0, Offset: 1000})
	e := wantCode(t, err, errcode.OffsetOutOfRange)
	if e.Field("requested") != "1000" || e.Field("earliest") != "0" || e.Field("latest") != "3" {
		t.Fatalf("OFFSET_OUT_OF_RANGE fields %v", e.Fields)
	}
	// Exactly the end is not out of range: an empty answer.
	if resp, err := c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "logs", Partition: 0, Offset: 3}); err != nil || resp.GetRecordCount() != 0 {
		t.Fatalf("fetch at end: %v %v", resp, err)
	}

	_, err = c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "elsewhere", Partition: 0})
	e = wantCode(t, err, errcode.NotLeader)
	if e.Field("leader") != "127.0.0.1:19999" {
		t.Fatalf("NOT_LEADER fields %v", e.Fields)
	}
	_, err = c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "elsewhere", Partition: 0, Acks: 1,
		Records: recordSet(t, "elsewhere", "x"), RecordCount: 1})
	wantCode(t, err, errcode.NotLeader)
	_, err = c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "missing", Partition: 0})
	wantCode(t, err, errcode.TopicNotFound)
	_, err = c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "logs", Partition: 5})
	wantCode(t, err, errcode.PartitionNotFound)
	_, err = c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "logs", Partition: 0, LifecycleEpoch: 2})
	wantCode(t, err, errcode.LifecycleEpochPending)

	lo, err := c.client.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: "logs"})
	if err != nil || len(lo.GetPartitions()) != 1 {
		t.Fatalf("list offsets: %v %v", lo, err)
	}
	if p := lo.GetPartitions()[0]; p.GetEarliest() != 0 || p.GetLatest() != 3 || p.GetLeo() != 3 || p.GetHwm() != 3 {
		t.Fatalf("offsets %v", p)
	}
	lo, err = c.client.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: "elsewhere", Partitions: []int32{0}})
	if err != nil || lo.GetPartitions()[0].GetError().GetCode() != errcode.NotLeader.Name() {
		t.Fatalf("list offsets elsewhere: %v %v", lo, err)
	}
}

func TestRolePolicy(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("t", 1, 1, "p1", "p1"))
	c.waitServing(t, "t", 0)

	// A partition server may read but not write; metad may do neither.
	pd := partitionv1.NewPartitionServiceClient(c.dial(t, pki.RolePartitiond, "p9"))
	_, err := pd.Append(ctx(t), &partitionv1.AppendRequest{Topic: "t", Partition: 0, Acks: 1, Records: recordSet(t, "t", "x"), RecordCount: 1})
	wantCode(t, err, errcode.PeerRoleForbidden)
	if _, err := pd.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "t", Partition: 0}); err != nil {
		t.Fatalf("partitiond fetch: %v", err)
	}
	md := partitionv1.NewPartitionServiceClient(c.dial(t, pki.RoleMetad, "m9"))
	_, err = md.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "t", Partition: 0})
	wantCode(t, err, errcode.PeerRoleForbidden)
	co := partitionv1.NewPartitionServiceClient(c.dial(t, pki.RoleCoordinatord, "c1"))
	if _, err := co.Append(ctx(t), &partitionv1.AppendRequest{Topic: "t", Partition: 0, Acks: 1, Records: recordSet(t, "t", "x"), RecordCount: 1}); err != nil {
		t.Fatalf("coordinatord append: %v", err)
	}
}

func TestAppendAndFetchSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing := telemetry.WithProcessor(rec)
	defer tracing.Shutdown(context.Background())
	c := startClusterTraced(t, tracing, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("tr", 1, 1, "p1", "p1"))
	c.waitServing(t, "tr", 0)
	if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "tr", Partition: 0, Acks: 1,
		Records: recordSet(t, "tr", "x"), RecordCount: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "tr", Partition: 0, Offset: 99})
	wantCode(t, err, errcode.OffsetOutOfRange)
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	a, f := spans["partitiond.Append"], spans["partitiond.Fetch"]
	if a == nil || f == nil {
		t.Fatalf("spans %v", spans)
	}
	if !a.Parent().IsValid() {
		t.Fatal("Append span has no parent (the otelgrpc server span)")
	}
	if f.Status().Description != errcode.OffsetOutOfRange.Name() {
		t.Fatalf("Fetch span status %+v", f.Status())
	}
}

// gatedFS holds, once armed, every fdatasync of segment files whose path
// contains "slow" until the gate opens.
type gatedFS struct {
	vfs.FS
	armed *atomic.Bool
	gate  chan struct{}
}

type gatedFile struct {
	vfs.File
	g gatedFS
}

func (f gatedFile) SyncData() error {
	if f.g.armed.Load() {
		<-f.g.gate
	}
	return f.File.SyncData()
}

func (g gatedFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.Contains(name, "slow") || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return gatedFile{f, g}, nil
}

func (g gatedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(name, f, err)
}

func (g gatedFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, c, opts...)
	return g.wrap(name, f, err)
}

// While one request waits for its fdatasync, the stream keeps reading and
// answering later requests; the held acknowledgement comes after the sync.
func TestProduceAckWaitDoesNotBlockStream(t *testing.T) {
	gate := make(chan struct{})
	var armed atomic.Bool
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open()
	c := startCluster(t, nil, nil, "", func(cfg *Config) {
		cfg.storageHook = func(n *partition.NodeConfig) { n.FS = gatedFS{vfs.Default, &armed, gate} }
	})
	c.metad.PutTopic(metadfake.NewTopic("slow", 1, 1, "p1", "p1"))
	c.metad.PutTopic(metadfake.NewTopic("fast", 1, 1, "p1", "p1"))
	c.waitServing(t, "slow", 0)
	c.waitServing(t, "fast", 0)
	// The first append of a leader epoch also writes the epoch history.
	if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "slow", Partition: 0, Acks: 1,
		Records: recordSet(t, "slow", "warm"), RecordCount: 1}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)

	stream, err := c.client.Produce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	send := func(id uint64, topic string, acks int32) {
		if err := stream.Send(&partitionv1.ProduceRequest{CorrelationId: id, Append: &partitionv1.AppendRequest{
			Topic: topic, Partition: 0, Acks: acks, Records: recordSet(t, topic, "x"), RecordCount: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	send(1, "slow", 1) // held by the gated fdatasync
	send(2, "fast", 0) // answered once written
	send(3, "slow", 0)
	for _, want := range []uint64{2, 3} {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCorrelationId() != want || r.GetAppend().GetError() != nil {
			t.Fatalf("got %v, want correlation %d", r, want)
		}
	}
	open()
	r, err := stream.Recv()
	if err != nil || r.GetCorrelationId() != 1 || r.GetAppend().GetBaseOffset() != 1 || r.GetAppend().GetError() != nil {
		t.Fatalf("held ack: %v %v", r, err)
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("stream end: %v", err)
	}
}

// Shutdown does not wait for long polls to run out.
func TestStopEndsLongPoll(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("lp", 1, 1, "p1", "p1"))
	c.waitServing(t, "lp", 0)
	// Its own connection: stop closes the cluster's client connection.
	poller := partitionv1.NewPartitionServiceClient(c.dial(t, pki.RoleGateway, "g2"))
	done := make(chan error, 1)
	go func() {
		_, err := poller.Fetch(context.Background(), &partitionv1.FetchRequest{Topic: "lp", Partition: 0, WaitMs: 20000})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	c.stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stop took %v with a long poll open", took)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("long poll still open after stop")
	}
}

// A request for a topic this node's view does not list yet waits briefly
// for the view (the caller routed by a newer one) instead of answering the
// final topic_not_found; with view_catch_up 0 it answers at once.
func TestUnknownTopicWaitsForView(t *testing.T) {
	c := startCluster(t, nil, nil, "", func(cfg *Config) { cfg.ViewCatchUp = 5 * time.Second })
	// A served topic proves the first metad view arrived: before it, every
	// request answers the retryable cluster_metadata_unavailable.
	c.metad.PutTopic(metadfake.NewTopic("known", 1, 1, "p1", "p1"))
	c.waitServing(t, "known", 0)
	go func() {
		time.Sleep(200 * time.Millisecond)
		c.metad.PutTopic(metadfake.NewTopic("late", 1, 1, "p1", "p1"))
	}()
	start := time.Now()
	_, err := c.client.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: "late"})
	if err != nil {
		t.Fatalf("list offsets of a topic the view lists %v later: %v", time.Since(start), err)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("waited %v, want the wait to end when the view lists the topic", time.Since(start))
	}

	c2 := startCluster(t, nil, nil, "", func(cfg *Config) { cfg.ViewCatchUp = 0 })
	// Until the first metad view arrives every request answers the
	// retryable cluster_metadata_unavailable; the timing below is about an
	// unknown topic in a synced view.
	looptest.Eventually(t, "metadata view synced", func() bool {
		_, err := c2.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "missing", Partition: 0})
		return !errors.Is(err, errcode.ClusterMetadataUnavailable)
	})
	start = time.Now()
	_, err = c2.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "missing", Partition: 0})
	wantCode(t, err, errcode.TopicNotFound)
	if time.Since(start) > time.Second {
		t.Fatalf("view_catch_up 0 waited %v", time.Since(start))
	}
}

// TestProduceStreamLargeBatches: batches large enough for rpc's codec to
// decode them into transport pool buffers, which Produce gives back once
// written and the next requests reuse, are stored as sent (nothing of
// partitiond keeps the released bytes).
func TestProduceStreamLargeBatches(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("big", 1, 1, "p1", "p1"))
	c.waitServing(t, "big", 0)
	stream, err := c.client.Produce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	const n, per, size = 30, 4, 40 << 10 // about 160 KiB per request
	var want []string
	for i := range n {
		payloads := make([]string, per)
		for j := range payloads {
			payloads[j] = strings.Repeat(string(rune('a'+(i*per+j)%26)), size) + strconv.Itoa(i*per+j)
		}
		want = append(want, payloads...)
		if err := stream.Send(&partitionv1.ProduceRequest{CorrelationId: uint64(i), Append: &partitionv1.AppendRequest{
			Topic: "big", Partition: 0, LifecycleEpoch: 1, Acks: 1,
			Records: recordSet(t, "big", payloads...), RecordCount: per}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e := r.GetAppend().GetError(); e != nil {
			t.Fatalf("request %d failed: %v", r.GetCorrelationId(), e)
		}
	}
	got := c.fetchAll(t, "big", 0)
	if len(got) != len(want) {
		t.Fatalf("fetched %d records, want %d", len(got), len(want))
	}
	for i, g := range got {
		if g.offset != uint64(i) || g.payload != want[i] {
			t.Fatalf("record %d (offset %d) differs from what was sent", i, g.offset)
		}
	}
}
