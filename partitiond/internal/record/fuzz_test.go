package record

import (
	"reflect"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

func encode(t testing.TB, r wire.Record) []byte {
	t.Helper()
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzInspect checks the one-pass reader of common records against the full
// wire decoder: whatever inspectCommon accepts, wire.ParseRecord accepts
// with the same Info; a record it leaves alone, Inspect still reads or
// refuses with a typed error exactly as inspectFull does.
func FuzzInspect(f *testing.F) {
	seeds := []wire.Record{
		{Topic: "t", Payload: []byte("p")},
		{Topic: "orders", Partition: 3, Offset: 9, Payload: make([]byte, 100), Timestamp: 1700000000000},
		{Topic: "t", Payload: []byte("p"), Timestamp: -1, ProducerID: "prod", SeqNum: 7, Epoch: -3, Key: "k"},
		{Topic: "t", Payload: nil, Key: "tombstone"},
		{Topic: "t", Payload: []byte("p"), Key: "k", Metadata: "m"},
		{Topic: "t", Payload: []byte("p"), TransactionalID: "tx", TransactionState: wire.TxnStateOpen},
		{Topic: "t", Payload: []byte("p"), EventID: "e"},
	}
	for _, r := range seeds {
		b := encode(f, r)
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(b, 0))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		full, ferr := inspectFull(rec)
		var in Info
		if inspectCommon(rec, &in) {
			if ferr != nil {
				t.Fatalf("inspectCommon accepted a record wire refuses: %v", ferr)
			}
			if !reflect.DeepEqual(in, full) {
				t.Fatalf("inspectCommon read\n%+v\nwire reads\n%+v", in, full)
			}
		}
		got, err := Wire{}.Inspect(rec)
		if (err == nil) != (ferr == nil) || (err == nil && !reflect.DeepEqual(got, full)) {
			t.Fatalf("Inspect = %+v, %v; inspectFull = %+v, %v", got, err, full, ferr)
		}
		if _, ok := errcode.As(err); err != nil && !ok {
			t.Fatalf("untyped error %T: %v", err, err)
		}
	})
}
