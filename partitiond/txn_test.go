package partitiond

import (
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/recordtest"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// TestTxnRPCs: the coordinator adds a partition, writes transactional
// records and a marker; read_committed fetches stop at the LSO and skip
// aborted data; the gateway may call none of the transaction methods and
// its Append refuses transaction metadata.
func TestTxnRPCs(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("out", 1, 1, "p1", "p1"))
	c.waitServing(t, "out", 0)
	coord := partitionv1.NewPartitionServiceClient(c.dial(t, pki.RoleCoordinatord, "c1"))
	gw := c.client

	txnRecs := func(ps ...string) []byte {
		ws := make([]wire.Record, len(ps))
		for i, p := range ps {
			ws[i] = wire.Record{Topic: "out", Payload: []byte(p), TransactionalID: "tx", TransactionState: wire.TxnStateOpen}
		}
		return recordtest.Set(t, ws...)
	}
	txnAppend := func(cl partitionv1.PartitionServiceClient, pid string, epoch int64, seq uint64, ps ...string) (*partitionv1.TxnAppendResponse, error) {
		return cl.TxnAppend(ctx(t), &partitionv1.TxnAppendRequest{Append: &partitionv1.AppendRequest{Topic: "out", Partition: 0, Acks: -1,
			Records: txnRecs(ps...), RecordCount: uint32(len(ps)), ProducerId: pid, ProducerEpoch: epoch, BaseSequence: seq}})
	}
	add := &partitionv1.AddTxnPartitionRequest{Topic: "out", Partition: 0, ProducerId: "p", ProducerEpoch: 1, CoordinatorEpoch: 1}

	// The gateway is refused every transaction method.
	_, err := gw.AddTxnPartition(ctx(t), add)
	wantCode(t, err, errcode.PeerRoleForbidden)
	_, err = txnAppend(gw, "p", 1, 1, "x")
	wantCode(t, err, errcode.PeerRoleForbidden)
	_, err = gw.WriteTxnMarker(ctx(t), &partitionv1.WriteTxnMarkerRequest{Topic: "out", ProducerId: "p", ProducerEpoch: 1})
	wantCode(t, err, errcode.PeerRoleForbidden)
	_, err = gw.Append(ctx(t), &partitionv1.AppendRequest{Topic: "out", Acks: 1, Records: txnRecs("x"), RecordCount: 1})
	wantCode(t, err, errcode.TransactionMetadataForbidden)

	// Not added yet: refused (KIP-890).
	_, err = txnAppend(coord, "p", 1, 1, "x")
	wantCode(t, err, errcode.TransactionPartitionNotAdded)
	if _, err := coord.AddTxnPartition(ctx(t), add); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Append(ctx(t), &partitionv1.AppendRequest{Topic: "out", Acks: 1, Records: recordSet(t, "out", "plain"), RecordCount: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := txnAppend(coord, "p", 1, 1, "x", "y")
	if err != nil {
		t.Fatal(err)
	}
	if r.GetAppend().GetBaseOffset() != 1 {
		t.Fatalf("txn append %v", r)
	}
	offs, err := gw.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: "out", Partitions: []int32{0}})
	if err != nil {
		t.Fatal(err)
	}
	if po := offs.GetPartitions()[0]; po.GetLso() != 1 || po.GetHwm() != 3 {
		t.Fatalf("offsets %v", po)
	}
	rc, err := gw.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "out", Isolation: partitionv1.Isolation_ISOLATION_READ_COMMITTED})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeSet(t, rc.GetRecords()); len(got) != 1 || got[0].payload != "plain" || rc.GetLastStableOffset() != 1 {
		t.Fatalf("read_committed %v lso %d", got, rc.GetLastStableOffset())
	}
	m, err := coord.WriteTxnMarker(ctx(t), &partitionv1.WriteTxnMarkerRequest{Topic: "out", ProducerId: "p", ProducerEpoch: 1,
		CoordinatorEpoch: 1, TransactionalId: "tx", Commit: false})
	if err != nil {
		t.Fatal(err)
	}
	if m.GetOffset() != 3 || m.GetDuplicate() {
		t.Fatalf("marker %v", m)
	}
	m, err = coord.WriteTxnMarker(ctx(t), &partitionv1.WriteTxnMarkerRequest{Topic: "out", ProducerId: "p", ProducerEpoch: 1,
		CoordinatorEpoch: 1, TransactionalId: "tx", Commit: false})
	if err != nil || !m.GetDuplicate() {
		t.Fatalf("repeat marker %v %v", m, err)
	}
	rc, err = gw.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "out", Offset: 1, Isolation: partitionv1.Isolation_ISOLATION_READ_COMMITTED})
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.GetRecords()) != 0 || rc.GetNextOffset() != 4 || rc.GetLastStableOffset() != 4 {
		t.Fatalf("read_committed after abort: %d bytes next %d lso %d", len(rc.GetRecords()), rc.GetNextOffset(), rc.GetLastStableOffset())
	}
	ru, err := gw.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "out", Offset: 1, Isolation: partitionv1.Isolation_ISOLATION_READ_UNCOMMITTED})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeSet(t, ru.GetRecords()); len(got) != 3 || got[2].payload != wire.TxnMarkerPayload {
		t.Fatalf("read_uncommitted %v", got)
	}
	// The delayed retry of the aborted epoch is fenced.
	_, err = txnAppend(coord, "p", 1, 1, "x", "y")
	wantCode(t, err, errcode.StaleProducerEpoch)
}
