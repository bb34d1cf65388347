package coordinatord

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// TestTxnAppendRefusedBeforeWriteKeepsTheTransaction: partitiond refuses a
// transactional event append because another transaction holds the
// aggregate (TXN_APPEND_STREAM). Nothing was written, so the coordinator
// answers the retryable refusal and keeps the transaction open; the same
// seqNum then goes through.
func TestTxnAppendRefusedBeforeWriteKeepsTheTransaction(t *testing.T) {
	c, co := startSingle(t, "out", 1)
	ctx := ctxT(t)
	cl := co.client
	ini, err := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "tx"})
	if err != nil {
		t.Fatal(err)
	}
	pid, ep := ini.GetProducerId(), ini.GetEpoch()
	if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep}); err != nil {
		t.Fatal(err)
	}
	pub := func(seq uint64) (*coordinatorv1.TxnPublishResponse, error) {
		return cl.TxnPublish(ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Seq: seq,
			Topic: "out", Partition: 0, Records: txnRecord(t, "out", "event"), RecordCount: 1})
	}
	remove := c.part.On("TxnAppend", 1000, func(context.Context, proto.Message, fakerpc.Next) (proto.Message, error) {
		return nil, errcode.ConcurrentTransactions.New("held", "reason", "aggregate_in_transaction", "key", "k", "current", "1")
	})
	_, err = pub(1)
	if errcode.CodeOf(err) != errcode.ConcurrentTransactions.Name() || !errcode.IsRetryable(err) {
		t.Fatalf("held aggregate: %v", err)
	}
	st, err := cl.TxnStatus(ctx, &coordinatorv1.TxnStatusRequest{TransactionalId: "tx"})
	if err != nil || st.GetTxn().GetState() != "open" || st.GetTxn().GetMessages() != 0 {
		t.Fatalf("status after the refusal %v %v", st, err)
	}
	remove()
	if r, err := pub(1); err != nil || r.GetDuplicate() {
		t.Fatalf("publish after the aggregate is free: %v %v", r, err)
	}
	end, err := cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "tx", ProducerId: pid, Epoch: ep, Commit: true})
	if err != nil || end.GetState() != "committed" || end.GetMessages() != 1 {
		t.Fatalf("commit %v %v", end, err)
	}
}
