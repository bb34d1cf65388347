package coordinatord

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/coordinatord/internal/txnlog"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// adminClient dials co as an operator, the other caller the internal
// transaction RPCs allow besides coordinatord.
func adminClient(t *testing.T, c *cluster, co *coord) coordinatorv1.CoordinatorServiceClient {
	t.Helper()
	conn, err := rpc.Dial(co.env.AdvertiseRPC, rpc.ClientOptions{Source: c.ca.Source(t, pki.RoleAdmin, "admin"),
		ServerRoles: []pki.Role{pki.RoleCoordinatord}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return coordinatorv1.NewCoordinatorServiceClient(conn)
}

// txnCopier drives one transactional_id against a coordinator the way a
// consume-process-produce loop does.
type txnCopier struct {
	t   *testing.T
	ctx context.Context
	cl  coordinatorv1.CoordinatorServiceClient
	id  string
	pid string
	ep  int64
}

// stage begins a transaction (a fresh epoch), writes one output record and
// stages list for member of group copy on topic in.
func (x *txnCopier) stage(member string, gen uint64, list string) {
	x.t.Helper()
	ini, err := x.cl.InitProducerId(x.ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: x.id})
	if err != nil {
		x.t.Fatal(err)
	}
	x.pid, x.ep = ini.GetProducerId(), ini.GetEpoch()
	if _, err := x.cl.BeginTxn(x.ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: x.id, ProducerId: x.pid, Epoch: x.ep}); err != nil {
		x.t.Fatal(err)
	}
	if _, err := x.cl.TxnPublish(x.ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: x.id, ProducerId: x.pid, Epoch: x.ep, Seq: 1,
		Topic: "out", Records: txnRecord(x.t, "out", "x"), RecordCount: 1}); err != nil {
		x.t.Fatal(err)
	}
	if _, err := x.cl.SendOffsetsToTxn(x.ctx, &coordinatorv1.SendOffsetsToTxnRequest{TransactionalId: x.id, ProducerId: x.pid, Epoch: x.ep,
		Topic: "in", Group: "copy", Member: member, Generation: gen, OffsetsList: list}); err != nil {
		x.t.Fatal(err)
	}
}

func (x *txnCopier) end(commit bool) *coordinatorv1.EndTxnResponse {
	x.t.Helper()
	r, err := x.cl.EndTxn(x.ctx, &coordinatorv1.EndTxnRequest{TransactionalId: x.id, ProducerId: x.pid, Epoch: x.ep, Commit: commit})
	if err != nil {
		x.t.Fatal(err)
	}
	return r
}

// wantUnstable checks that FetchOffset answers unstable_offset_commit for
// partition p, naming the transaction.
func wantUnstable(t *testing.T, ctx context.Context, cl coordinatorv1.CoordinatorServiceClient, p int32, txnID string) {
	t.Helper()
	_, err := cl.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "copy", Topic: "in", Partition: p})
	e := errcode.From(err)
	if e.Code != errcode.UnstableOffsetCommit.Name() || !e.Retryable || e.Field("transactional_id") != txnID ||
		e.Field("partition") != itoa(p) || e.Field("group") != "copy" || e.Field("topic") != "in" {
		t.Fatalf("FetchOffset P%d: %v, want retryable unstable_offset_commit of %s", p, err, txnID)
	}
}

func wantFetched(t *testing.T, ctx context.Context, cl coordinatorv1.CoordinatorServiceClient, p int32, want uint64, found bool) {
	t.Helper()
	r, err := cl.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "copy", Topic: "in", Partition: p})
	if err != nil || r.GetOffset() != want || r.GetFound() != found {
		t.Fatalf("FetchOffset P%d = %v %v, want %d found=%v", p, r, err, want, found)
	}
}

// startTxnGroups runs the fakes with topic out and one coordinatord whose
// members' sessions outlast a test on a loaded machine (a transaction's
// staging is checked against the member, which sends no heartbeats here).
func startTxnGroups(t *testing.T) (*cluster, *coord) {
	t.Helper()
	c := newCluster(t)
	c.putTopic("out", 1, 0)
	cfg := testConfig(c)
	cfg.SessionTimeout = time.Minute
	co := startCoord(t, c, "c1", cfg)
	co.waitReady(t)
	return c, co
}

// startCopyGroup registers group copy on topic in (2 partitions) and joins
// one member, which holds both partitions.
func startCopyGroup(t *testing.T, ctx context.Context, c *cluster, cl coordinatorv1.CoordinatorServiceClient) *coordinatorv1.JoinGroupResponse {
	t.Helper()
	c.putTopic("in", 2, 0)
	if _, err := cl.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: "copy", Topic: "in"}); err != nil {
		t.Fatal(err)
	}
	j, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "copy", Member: "m", Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestTxnOffsetMarks: offsets staged in a transaction make FetchOffset of
// their partitions answer unstable_offset_commit until the transaction
// ends; the commit shows the new offsets, an abort (END_TXN, or the abort
// of the previous epoch by INIT_PRODUCER_ID) the old ones. Partitions the
// transaction did not stage stay readable throughout.
func TestTxnOffsetMarks(t *testing.T) {
	c, co := startTxnGroups(t)
	ctx := ctxT(t)
	cl := co.client
	j := startCopyGroup(t, ctx, c, cl)
	x := &txnCopier{t: t, ctx: ctx, cl: cl, id: "copier"}
	admin := adminClient(t, c, co)
	pending := func() bool {
		r, err := admin.TxnOffsetsPending(ctx, &coordinatorv1.TxnOffsetsPendingRequest{
			Txn: &coordinatorv1.TxnRef{TransactionalId: x.id, ProducerId: x.pid, Epoch: x.ep}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetPending()
	}
	for _, tc := range []struct {
		name  string
		list  string
		part  int32 // the staged partition; the other one is not staged
		end   func()
		want  uint64
		found bool
	}{
		{"commit shows the new offset", "P0:5", 0, func() { x.end(true) }, 5, true},
		{"abort shows the old offset", "P0:9", 0, func() { x.end(false) }, 5, true},
		{"abort by re-init shows the old offset", "P1:4", 1, func() {
			if _, err := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: x.id}); err != nil {
				t.Fatal(err)
			}
		}, 0, false},
		{"commit of a second partition", "P1:7", 1, func() { x.end(true) }, 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x.t = t
			other := 1 - tc.part
			before, err := cl.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "copy", Topic: "in", Partition: other})
			if err != nil {
				t.Fatal(err)
			}
			x.stage(j.GetMember(), j.GetGeneration(), tc.list)
			wantUnstable(t, ctx, cl, tc.part, x.id)
			wantFetched(t, ctx, cl, other, before.GetOffset(), before.GetFound())
			if !pending() {
				t.Fatal("the open transaction is not pending at its coordinator")
			}
			tc.end()
			wantFetched(t, ctx, cl, tc.part, tc.want, tc.found)
			if pending() {
				t.Fatal("the ended transaction is still pending at its coordinator")
			}
		})
	}
}

// TestTxnOffsetMarkReplayAndResolution: a mark is durable before the
// staging call is answered, so a new owner's replay keeps the partition
// unstable; a mark whose transaction is not pending at its coordinator
// (here: one the transaction coordinator never heard of) is resolved —
// cleared, durably — once it is older than twice transaction_timeout.
func TestTxnOffsetMarkReplayAndResolution(t *testing.T) {
	c, co := startTxnGroups(t)
	ctx := ctxT(t)
	j := startCopyGroup(t, ctx, c, co.client)
	if _, err := co.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "copy", Topic: "in", Partition: 1, Offset: 3,
		Member: j.GetMember(), Generation: u64(j.GetGeneration())}); err != nil {
		t.Fatal(err)
	}
	admin := adminClient(t, c, co)
	ghost := &coordinatorv1.TxnRef{TransactionalId: "ghost", ProducerId: "txn-ghost", Epoch: 4}
	_, err := admin.ValidateTxnOffsets(ctx, &coordinatorv1.ValidateTxnOffsetsRequest{Group: "copy", Topic: "in",
		Member: j.GetMember(), Generation: j.GetGeneration(), OffsetsList: "P1:8"})
	if e := errcode.From(err); e.Code != errcode.MissingParameter.Name() {
		t.Fatalf("staging without a transaction: %v", err)
	}
	if _, err := admin.ValidateTxnOffsets(ctx, &coordinatorv1.ValidateTxnOffsetsRequest{Group: "copy", Topic: "in",
		Member: j.GetMember(), Generation: j.GetGeneration(), OffsetsList: "P1:8", Txn: ghost}); err != nil {
		t.Fatal(err)
	}
	// An earlier epoch of the same producer cannot stage over it.
	older := proto.Clone(ghost).(*coordinatorv1.TxnRef)
	older.Epoch = 3
	_, err = admin.ValidateTxnOffsets(ctx, &coordinatorv1.ValidateTxnOffsetsRequest{Group: "copy", Topic: "in",
		Member: j.GetMember(), Generation: j.GetGeneration(), OffsetsList: "P0:1", Txn: older})
	wantTxnErr(t, "older epoch stages", err, errcode.ProducerFenced)
	// Nor clear it.
	if r, err := admin.AbortTxnOffsets(ctx, &coordinatorv1.AbortTxnOffsetsRequest{Group: "copy", Txn: older}); err != nil || r.GetCleared() {
		t.Fatalf("an older epoch's abort: %v %v", r, err)
	}
	wantUnstable(t, ctx, co.client, 1, "ghost")
	wantFetched(t, ctx, co.client, 0, 0, false)

	// A new owner (transaction_timeout 1 h: nothing is resolved) replays
	// the mark.
	co.stop()
	co2 := startCoord(t, c, "c1", testConfig(c))
	co2.waitReady(t)
	wantUnstable(t, ctx, co2.client, 1, "ghost")
	co2.stop()

	// With transaction_timeout 100 ms the mark is old enough to be asked
	// about; the transaction coordinator does not know "ghost", so the
	// mark is cleared and the committed offset shows again.
	cfg := testConfig(c)
	cfg.TransactionTimeout = 100 * time.Millisecond
	co3 := startCoord(t, c, "c1", cfg)
	co3.waitReady(t)
	looptest.Eventually(t, "mark resolved", func() error {
		_, err := co3.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "copy", Topic: "in", Partition: 1})
		return err
	})
	wantFetched(t, ctx, co3.client, 1, 3, true)
	co3.stop()
	// The clear is durable.
	co4 := startCoord(t, c, "c1", testConfig(c))
	co4.waitReady(t)
	wantFetched(t, ctx, co4.client, 1, 3, true)
}

// TestTxnOffsetWindowHeld forces the window of a commit in flight: the
// transaction state write of END_TXN commit is held at the partition
// server; meanwhile a reader of the group's offsets gets
// unstable_offset_commit (never the old offset), and once the write goes
// through it reads the committed one.
func TestTxnOffsetWindowHeld(t *testing.T) {
	c, co := startTxnGroups(t)
	ctx := ctxT(t)
	j := startCopyGroup(t, ctx, c, co.client)
	x := &txnCopier{t: t, ctx: ctx, cl: co.client, id: "copier"}
	x.stage(j.GetMember(), j.GetGeneration(), "P0:4")
	x.end(true)
	x.stage(j.GetMember(), j.GetGeneration(), "P0:10")

	var armed atomic.Bool
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	remove := c.part.On("Append", 0, func(ctx context.Context, req proto.Message, next fakerpc.Next) (proto.Message, error) {
		if r, ok := req.(*partitionv1.AppendRequest); ok && r.GetTopic() == txnlog.Topic && armed.Load() {
			once.Do(func() { close(holding) })
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return next()
	})
	defer remove()
	armed.Store(true)
	done := make(chan *coordinatorv1.EndTxnResponse, 1)
	go func() {
		r, _ := co.client.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: x.id, ProducerId: x.pid, Epoch: x.ep, Commit: true})
		done <- r
	}()
	<-holding
	// Another client (a gateway of another consumer) reads the offset.
	reader := adminClient(t, c, co)
	wantUnstable(t, ctx, reader, 0, x.id)
	wantUnstable(t, ctx, co.client, 0, x.id)
	close(release)
	if r := <-done; r.GetState() != "committed" {
		t.Fatalf("commit %v", r)
	}
	wantFetched(t, ctx, reader, 0, 10, true)
}
