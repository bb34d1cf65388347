package partitiond

import (
	"fmt"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/recordtest"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"
)

// TestTxnAppendStream: TXN_APPEND_STREAM's partition side. A transaction's
// events are checked against the stream's head counting its own open
// events (v3, v4, v5 in one transaction), a retry is answered as the
// duplicate it is, other writers are refused while it is open, readers see
// the events only after the commit marker, an abort gives the versions
// back for reuse, and a restart rebuilds all of it from the log.
func TestTxnAppendStream(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(esTopic("orders"))
	c.waitServing(t, "orders", 0)
	coord := partitionv1.NewPartitionServiceClient(c.dial(t, pki.RoleCoordinatord, "c1"))
	sc := c.streams(t)

	event := func(pid, key string, ver uint64) []byte {
		return recordtest.Set(t, wire.Record{Topic: "orders", Key: key, AggregateVersion: ver, SchemaVersion: 1,
			Payload: []byte(fmt.Sprintf("%s-%d", pid, ver)), ProducerID: pid, SeqNum: 1, Epoch: 1,
			TransactionalID: "tx-" + pid, TransactionState: wire.TxnStateOpen})
	}
	txnAppend := func(pid string, epoch int64, seq uint64, key string, ver uint64) (*partitionv1.TxnAppendResponse, error) {
		return coord.TxnAppend(ctx(t), &partitionv1.TxnAppendRequest{Append: &partitionv1.AppendRequest{Topic: "orders", Acks: -1,
			Records: event(pid, key, ver), RecordCount: 1, ProducerId: pid, ProducerEpoch: epoch, BaseSequence: seq}})
	}
	add := func(pid string, epoch int64) {
		t.Helper()
		if _, err := coord.AddTxnPartition(ctx(t), &partitionv1.AddTxnPartitionRequest{Topic: "orders", ProducerId: pid,
			ProducerEpoch: epoch, CoordinatorEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid string, epoch int64, commit bool) {
		t.Helper()
		if _, err := coord.WriteTxnMarker(ctx(t), &partitionv1.WriteTxnMarkerRequest{Topic: "orders", ProducerId: pid,
			ProducerEpoch: epoch, CoordinatorEpoch: 1, TransactionalId: "tx-" + pid, Commit: commit}); err != nil {
			t.Fatal(err)
		}
	}
	version := func(key string) uint64 {
		t.Helper()
		v, err := sc.StreamVersion(ctx(t), &streamv1.StreamVersionRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: key}})
		if err != nil {
			t.Fatal(err)
		}
		return v.GetVersion()
	}
	readVersions := func(key string) []uint64 {
		t.Helper()
		resp, err := sc.ReadStream(ctx(t), &streamv1.ReadStreamRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: key}, FromVersion: 1})
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, v := range recordtest.Records(t, resp.GetRecords()) {
			n, _ := v.AggregateVersion()
			out = append(out, n)
		}
		return out
	}

	appendEvents(t, sc, "orders", "agg", 2, "plain")
	// KIP-890: not added yet.
	_, err := txnAppend("p1", 1, 1, "agg", 3)
	wantCode(t, err, errcode.TransactionPartitionNotAdded)
	add("p1", 1)
	_, err = txnAppend("p1", 1, 1, "agg", 2)
	if e := wantCode(t, err, errcode.VersionConflict); e.Field("current") != "2" {
		t.Fatalf("conflict %v", e)
	}
	first, err := txnAppend("p1", 1, 1, "agg", 3)
	if err != nil {
		t.Fatal(err)
	}
	// The same sequence again: the stored append's answer, not a conflict.
	again, err := txnAppend("p1", 1, 1, "agg", 3)
	if err != nil || !again.GetAppend().GetDuplicate() || again.GetAppend().GetBaseOffset() != first.GetAppend().GetBaseOffset() {
		t.Fatalf("retry %v %v", again, err)
	}
	for i, v := range []uint64{4, 5} {
		if _, err := txnAppend("p1", 1, uint64(2+i), "agg", v); err != nil {
			t.Fatalf("txn v%d: %v", v, err)
		}
	}
	_, err = txnAppend("p1", 1, 4, "agg", 7)
	wantCode(t, err, errcode.VersionConflict)
	// Held: a plain append and another transaction are refused (retryable).
	_, err = appendEvent(t, sc, "orders", "agg", 6, "racer")
	if e := wantCode(t, err, errcode.ConcurrentTransactions); !errcode.IsRetryable(err) || e.Field("current") != "2" {
		t.Fatalf("plain append on a held aggregate: %v", err)
	}
	add("p2", 1)
	_, err = txnAppend("p2", 1, 1, "agg", 6)
	wantCode(t, err, errcode.ConcurrentTransactions)
	if v := version("agg"); v != 2 {
		t.Fatalf("version while open = %d", v)
	}
	if got := readVersions("agg"); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("read while open %v", got)
	}

	// Abort: versions 3..5 go back and are reused.
	marker("p1", 1, false)
	if v := version("agg"); v != 2 {
		t.Fatalf("version after abort = %d", v)
	}
	if _, err := appendEvent(t, sc, "orders", "agg", 3, "plain"); err != nil {
		t.Fatalf("reuse after abort: %v", err)
	}

	// p2 now gets v4 and v5 and commits; then a transaction left open
	// (p3, v6) across a restart.
	for i, v := range []uint64{4, 5} {
		if _, err := txnAppend("p2", 1, uint64(1+i), "agg", v); err != nil {
			t.Fatalf("p2 v%d: %v", v, err)
		}
	}
	marker("p2", 1, true)
	if got := readVersions("agg"); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("read after commit %v", got)
	}
	add("p3", 1)
	if _, err := txnAppend("p3", 1, 1, "agg", 6); err != nil {
		t.Fatal(err)
	}
	if _, err := txnAppend("p3", 1, 2, "new", 1); err != nil {
		t.Fatal(err)
	}

	dir := c.dataDir
	md, ca := c.metad, c.ca
	c.stop()
	c = startCluster(t, ca, md, dir)
	c.waitServing(t, "orders", 0)
	coord = partitionv1.NewPartitionServiceClient(c.dial(t, pki.RoleCoordinatord, "c1"))
	sc = c.streams(t)
	if v := version("agg"); v != 5 {
		t.Fatalf("version after restart = %d", v)
	}
	_, err = appendEvent(t, sc, "orders", "agg", 7, "racer")
	wantCode(t, err, errcode.ConcurrentTransactions)
	_, err = appendEvent(t, sc, "orders", "new", 1, "racer")
	wantCode(t, err, errcode.ConcurrentTransactions)
	// The coordinator's recovery aborts it: both streams go back.
	marker("p3", 1, false)
	if got := readVersions("agg"); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("read after recovery abort %v", got)
	}
	if _, err := appendEvent(t, sc, "orders", "agg", 6, "plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := appendEvent(t, sc, "orders", "new", 1, "plain"); err != nil {
		t.Fatal(err)
	}
	c.stop()
}
