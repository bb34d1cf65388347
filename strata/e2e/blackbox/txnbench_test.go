package blackbox

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/load"
)

// TestBenchTxn runs `strata bench txn`'s workload (load.Run, mode txn) at a
// small count against the in-process all-in-one: every transaction it
// reports committed is in the topic, readable read_committed, and the
// report has its figures.
func TestBenchTxn(t *testing.T) {
	c := framework.Cluster(framework.StartAllInOne(t))
	ctx, cl := framework.Connect(t, c, 2*time.Minute)
	res, err := load.Run(ctx, load.Config{Mode: load.ModeTxn, Addr: c.Gateways()[0].ClientAddr, Topic: "bench-txn",
		Partitions: 3, Conns: 2, TxnSize: 3, Count: 8, RecordSize: 16, Client: client.Options{ClientID: "bench-test"}})
	if err != nil {
		t.Fatal(err)
	}
	x := res.Txn
	if x == nil || x.Transactions != 8 || x.Records != 24 || x.Errors != 0 || res.Failures() != 0 {
		t.Fatalf("report %+v", x)
	}
	if x.CommitLatency.Count != 8 || x.CommitLatency.P50 <= 0 || x.TxnLatency.P99 < x.CommitLatency.P50 {
		t.Fatalf("latencies %+v %+v", x.CommitLatency, x.TxnLatency)
	}
	var n int
	for p := range int32(3) {
		n += len(readAll(t, ctx, cl, "bench-txn", p, "read_committed"))
	}
	if n != 24 {
		t.Fatalf("%d records committed, want 24", n)
	}
	var out bytes.Buffer
	load.WriteText(&out, res)
	if !bytes.Contains(out.Bytes(), []byte("8 transactions (24 records) committed")) {
		t.Fatalf("text report:\n%s", out.String())
	}
	t.Log(out.String())
}

// TestTxnCommitFigures measures transactional producing on the in-process
// all-in-one with `strata bench txn`'s workload: one connection,
// sequential transactions of 1, 10 and 750 messages (keyless, 3
// partitions): transactions/s, messages/s and the END_TXN commit latency
// p50/p99. Off by default (a measurement, not a check):
// STRATA_TXN_FIGURES=1 go test ./strata/e2e/blackbox -run TestTxnCommitFigures -v
func TestTxnCommitFigures(t *testing.T) {
	if os.Getenv("STRATA_TXN_FIGURES") == "" {
		t.Skip("set STRATA_TXN_FIGURES=1 to measure")
	}
	c := framework.Cluster(framework.StartAllInOne(t))
	ctx, _ := framework.Connect(t, c, 5*time.Minute)
	for _, size := range []int{1, 10, 750} {
		res, err := load.Run(context.WithoutCancel(ctx), load.Config{Mode: load.ModeTxn, Addr: c.Gateways()[0].ClientAddr,
			Topic: "bench-out", Partitions: 3, Conns: 1, TxnSize: size, Duration: 10 * time.Second, RecordSize: 100})
		if err != nil || res.Failures() != 0 {
			t.Fatalf("size %d: %v %+v", size, err, res)
		}
		var out bytes.Buffer
		load.WriteText(&out, res)
		t.Log(out.String())
	}
}
