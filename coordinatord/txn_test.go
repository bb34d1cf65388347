package coordinatord

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/strataio/strata/coordinatord/internal/txnlog"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/partitionfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

func txnRecord(t testing.TB, topic, payload string) []byte {
	t.Helper()
	r := wire.Record{Topic: topic, Payload: []byte(payload), TransactionalID: "tx", TransactionState: wire.TxnStateOpen}
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func wantTxnErr(t *testing.T, what string, err error, c errcode.Code) {
	t.Helper()
	if !errors.Is(err, c) {
		t.Fatalf("%s: got %v, want %s", what, err, c.Name())
	}
}

func markersOf(ms []partitionfake.Marker, topic string) []partitionfake.Marker {
	var out []partitionfake.Marker
	for _, m := range ms {
		if m.Topic == topic {
			out = append(out, m)
		}
	}
	return out
}

// TestTxnCommitAbortAndRecovery runs the coordinator against the fakes:
// init, begin, publish (KIP-890 add first, idempotent retries), commit with
// markers on every participant, abort, re-init fencing, and a restart that
// aborts the open transaction it finds before the shard serves.
func TestTxnCommitAbortAndRecovery(t *testing.T) {
	c, co := startSingle(t, "out", 2)
	if top, ok := c.meta.Topic(txnlog.Topic); !ok || top.GetConfig().GetPartitions() != 50 || !top.GetConfig().GetInternal() {
		t.Fatalf("transaction state topic %v", top.GetConfig())
	}
	ctx := ctxT(t)
	cl := co.client

	_, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "tx", ProducerId: "x", Epoch: 1})
	wantTxnErr(t, "begin before init", err, errcode.TransactionNotFound)
	ini, err := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "tx"})
	if err != nil {
		t.Fatal(err)
	}
	pid, ep := ini.GetProducerId(), ini.GetEpoch()
	if pid == "" || ep != 1 {
		t.Fatalf("init %v", ini)
	}
	if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep}); err != nil {
		t.Fatal(err)
	}
	pub := func(seq uint64, part int32, payload string) (*coordinatorv1.TxnPublishResponse, error) {
		return cl.TxnPublish(ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Seq: seq,
			Topic: "out", Partition: part, Records: txnRecord(t, "out", payload), RecordCount: 1})
	}
	for i, part := range []int32{0, 1, 0} {
		if _, err := pub(uint64(i+1), part, "m"); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// A retry of seq 2 appends nothing.
	r, err := pub(2, 1, "m")
	if err != nil || !r.GetDuplicate() || r.GetPartition() != 1 {
		t.Fatalf("retry %v %v", r, err)
	}
	if n := c.part.Len("out", 0) + c.part.Len("out", 1); n != 3 {
		t.Fatalf("%d records stored", n)
	}
	_, err = pub(0, 0, "m")
	wantTxnErr(t, "seq 0", err, errcode.InvalidParameter)
	_, err = cl.TxnPublish(ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Seq: 9,
		Topic: "__consumer_offsets", Partition: 0, Records: txnRecord(t, "__consumer_offsets", "m"), RecordCount: 1})
	wantTxnErr(t, "internal topic", err, errcode.InternalTopicWriteForbidden)

	st, err := cl.TxnStatus(ctx, &coordinatorv1.TxnStatusRequest{TransactionalId: "tx"})
	if err != nil || st.GetTxn().GetState() != "open" || st.GetTxn().GetMessages() != 3 || len(st.GetTxn().GetParticipants()) != 2 {
		t.Fatalf("status %v %v", st, err)
	}
	if list := co.r.listTxns(); len(list) != 1 || list[0].GetTransactionalId() != "tx" {
		t.Fatalf("list %v", list)
	}

	end, err := cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Commit: true})
	if err != nil || end.GetState() != "committed" || end.GetMessages() != 3 {
		t.Fatalf("commit %v %v", end, err)
	}
	ms := markersOf(c.part.Markers(), "out")
	if len(ms) != 2 || !ms[0].Commit || !ms[1].Commit || ms[0].Epoch != ep {
		t.Fatalf("markers %+v", ms)
	}
	// Idempotent repeat; abort after commit; begin in the same epoch.
	if end, err = cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Commit: true}); err != nil || end.GetState() != "committed" {
		t.Fatalf("repeat %v %v", end, err)
	}
	_, err = cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep})
	wantTxnErr(t, "abort after commit", err, errcode.TransactionAlreadyCommitted)
	_, err = cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep})
	wantTxnErr(t, "begin again", err, errcode.ProducerReinitializationRequired)

	// Next transaction: abort.
	ini, _ = cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "tx"})
	if ini.GetProducerId() != pid || ini.GetEpoch() != 2 {
		t.Fatalf("re-init %v", ini)
	}
	ep = 2
	if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep}); err != nil {
		t.Fatal(err)
	}
	if _, err := pub(1, 1, "a"); err != nil {
		t.Fatal(err)
	}
	end, err = cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep})
	if err != nil || end.GetState() != "aborted" {
		t.Fatalf("abort %v %v", end, err)
	}
	_, err = cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Commit: true})
	wantTxnErr(t, "commit after abort", err, errcode.TransactionAborted)
	_, err = cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: 1, Commit: true})
	wantTxnErr(t, "lower epoch", err, errcode.ProducerFenced)

	// Third transaction left open; the coordinator restarts.
	ini, _ = cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "tx"})
	ep = ini.GetEpoch()
	if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep}); err != nil {
		t.Fatal(err)
	}
	if _, err := pub(1, 0, "o"); err != nil {
		t.Fatal(err)
	}
	co.stop()
	co2 := startCoord(t, c, "c1", testConfig(c))
	co2.waitReady(t)
	ms = markersOf(c.part.Markers(), "out")
	if last := ms[len(ms)-1]; last.Commit || last.Epoch != ep || last.Partition != 0 {
		t.Fatalf("recovery did not abort the open transaction: %+v", ms)
	}
	st, err = co2.client.TxnStatus(ctx, &coordinatorv1.TxnStatusRequest{TransactionalId: "tx"})
	if err != nil || st.GetTxn().GetState() != "aborted" || st.GetTxn().GetEpoch() != ep || st.GetTxn().GetProducerId() != pid {
		t.Fatalf("status after recovery %v %v", st, err)
	}
	_, err = co2.client.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Commit: true})
	wantTxnErr(t, "commit after recovery abort", err, errcode.TransactionAborted)
}

// TestTxnTimeoutAndReinitAbort: an open transaction past
// transaction_timeout is aborted; INIT_PRODUCER_ID aborts the previous
// epoch's open work with that epoch's markers.
func TestTxnTimeoutAndReinitAbort(t *testing.T) {
	c := newCluster(t)
	c.putTopic("out", 1, 0)
	cfg := testConfig(c)
	cfg.TransactionTimeout = 200 * time.Millisecond
	co := startCoord(t, c, "c1", cfg)
	co.waitReady(t)
	ctx := ctxT(t)
	cl := co.client
	open := func(id string) (string, int64) {
		ini, err := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: id, ProducerId: ini.GetProducerId(), Epoch: ini.GetEpoch()}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.TxnPublish(ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: id, ProducerId: ini.GetProducerId(), Epoch: ini.GetEpoch(),
			Seq: 1, Topic: "out", Records: txnRecord(t, "out", id), RecordCount: 1}); err != nil {
			t.Fatal(err)
		}
		return ini.GetProducerId(), ini.GetEpoch()
	}
	pid, ep := open("slow")
	looptest.Eventually(t, "timeout abort", func() error {
		st, err := cl.TxnStatus(ctx, &coordinatorv1.TxnStatusRequest{TransactionalId: "slow"})
		if err != nil {
			return err
		}
		if st.GetTxn().GetState() != "aborted" {
			return errcode.TransactionNotFound.New("state " + st.GetTxn().GetState())
		}
		return nil
	})
	_, err := cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "slow", ProducerId: pid, Epoch: ep, Commit: true})
	wantTxnErr(t, "commit after timeout", err, errcode.TransactionAborted)

	// The rest with a timeout that never fires: a restart (the open
	// transaction "slow" is long aborted, nothing is left to recover).
	co.stop()
	cfg.TransactionTimeout = time.Hour
	co = startCoord(t, c, "c1", cfg)
	co.waitReady(t)
	cl = co.client
	pid, ep = open("reinit")
	ini, err := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "reinit"})
	if err != nil || ini.GetEpoch() != ep+1 || ini.GetProducerId() != pid {
		t.Fatalf("re-init %v %v", ini, err)
	}
	var found bool
	for _, m := range c.part.Markers() {
		if m.ProducerID == pid && m.Epoch == ep && !m.Commit {
			found = true
		}
	}
	if !found {
		t.Fatalf("no abort marker of the old epoch: %+v", c.part.Markers())
	}
	// The old epoch is fenced.
	_, err = cl.TxnPublish(ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: "reinit", ProducerId: pid, Epoch: ep,
		Seq: 2, Topic: "out", Records: txnRecord(t, "out", "late"), RecordCount: 1})
	wantTxnErr(t, "old epoch publish", err, errcode.StaleProducerEpoch)
}

// TestTxnSendOffsets: offsets staged in a transaction are validated by the
// group's coordinator, committed with the transaction and never with an
// aborted one; a stale generation is refused when staging and at commit.
func TestTxnSendOffsets(t *testing.T) {
	c, co := startTxnGroups(t)
	c.putTopic("in", 2, 0)
	ctx := ctxT(t)
	cl := co.client
	if _, err := cl.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: "copy", Topic: "in"}); err != nil {
		t.Fatal(err)
	}
	j, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "copy", Member: "m", Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(commit bool, gen uint64, list string) (*coordinatorv1.EndTxnResponse, error) {
		ini, err := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "copier"})
		if err != nil {
			t.Fatal(err)
		}
		pid, ep := ini.GetProducerId(), ini.GetEpoch()
		if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.TxnPublish(ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep, Seq: 1,
			Topic: "out", Records: txnRecord(t, "out", "x"), RecordCount: 1}); err != nil {
			t.Fatal(err)
		}
		so, err := cl.SendOffsetsToTxn(ctx, &coordinatorv1.SendOffsetsToTxnRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep,
			Topic: "in", Group: "copy", Member: j.GetMember(), Generation: gen, OffsetsList: list})
		if err != nil {
			return nil, err
		}
		if so.GetStagedOffsets() == 0 {
			t.Fatalf("staged %v", so)
		}
		return cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep, Commit: commit})
	}
	fetch := func(p int32) uint64 {
		r, err := cl.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "copy", Topic: "in", Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetOffset()
	}
	end, err := run(true, j.GetGeneration(), "P0:5,P1:7")
	if err != nil || end.GetState() != "committed" || end.GetOffsets() != 2 {
		t.Fatalf("commit %v %v", end, err)
	}
	if fetch(0) != 5 || fetch(1) != 7 {
		t.Fatalf("committed offsets %d %d", fetch(0), fetch(1))
	}
	if end, err = run(false, j.GetGeneration(), "P0:9"); err != nil || end.GetState() != "aborted" {
		t.Fatalf("abort %v %v", end, err)
	}
	if fetch(0) != 5 {
		t.Fatalf("an aborted transaction committed offsets: %d", fetch(0))
	}
	_, err = run(true, j.GetGeneration()+1, "P0:9")
	wantTxnErr(t, "stale generation", err, errcode.GenMismatch)

	// Staged under the current generation; the member leaves before the
	// commit: the re-check refuses the commit and the client aborts.
	ini, _ := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "copier"})
	pid, ep := ini.GetProducerId(), ini.GetEpoch()
	if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SendOffsetsToTxn(ctx, &coordinatorv1.SendOffsetsToTxnRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep,
		Topic: "in", Group: "copy", Member: j.GetMember(), Generation: j.GetGeneration(), OffsetsList: "P1:9"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: "copy", Member: j.GetMember(), Topic: "in"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep, Commit: true}); err == nil {
		t.Fatal("commit after the member left was accepted")
	}
	if end, err := cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "copier", ProducerId: pid, Epoch: ep}); err != nil || end.GetState() != "aborted" {
		t.Fatalf("abort after refused commit %v %v", end, err)
	}
	if fetch(1) != 7 {
		t.Fatalf("refused commit wrote offsets: %d", fetch(1))
	}
}
