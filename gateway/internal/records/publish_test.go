package records

import (
	"context"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// batchOf encodes records r into a CBV2 batch for topic t, partition 0.
func batchOf(t *testing.T, acks string, rs ...wire.Record) []byte {
	t.Helper()
	var bb wire.BatchBuilder
	if err := bb.Reset(nil, wire.BatchHeader{Topic: "t", Partition: 0, Acks: acks}); err != nil {
		t.Fatal(err)
	}
	for i := range rs {
		rs[i].Topic = "t"
		if err := bb.Add(&rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bb.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPublishBatchChecksBeforeRouting: the one pass over a batch's records
// answers as separate validation and inspection passes did: a malformed
// record anywhere wins over transaction metadata on an earlier record, which
// is refused otherwise; both before the topic is looked up (h has no router).
func TestPublishBatchChecksBeforeRouting(t *testing.T) {
	h := &Handlers{}
	txn := wire.Record{Payload: []byte("x"), TransactionalID: "tx"}
	plain := wire.Record{Payload: []byte("y")}

	_, err := h.publishBatch(context.Background(), nil, batchOf(t, "1", txn, plain))
	if got := errcode.CodeOf(err); got != errcode.TransactionMetadataForbidden.Name() {
		t.Fatalf("transactional record: got %v, want %s", err, errcode.TransactionMetadataForbidden.Name())
	}

	b := batchOf(t, "1", txn, plain)
	b = b[:len(b)-1] // the last record is cut short
	_, err = h.publishBatch(context.Background(), nil, b)
	if got := errcode.CodeOf(err); got != errcode.DecodeFailed.Name() {
		t.Fatalf("transactional record then a truncated one: got %v, want %s", err, errcode.DecodeFailed.Name())
	}
	_, err = h.publishBatch(context.Background(), nil, append(batchOf(t, "1", plain), 0))
	if got := errcode.CodeOf(err); got != errcode.DecodeFailed.Name() {
		t.Fatalf("trailing byte: got %v, want %s", err, errcode.DecodeFailed.Name())
	}
}
