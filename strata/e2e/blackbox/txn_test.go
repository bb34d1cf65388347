package blackbox

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// readAll reads one partition from 0 with isolation iso (payloads, in
// order; markers as COMMIT/ABORT).
func readAll(t *testing.T, ctx context.Context, cl *client.Client, topic string, part int32, iso string) []string {
	t.Helper()
	var out []string
	var next uint64
	for range 1000 {
		b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: part, Offset: next, Member: "e2e",
			Group: "e2e-txn-" + iso, Isolation: iso, MaxRecords: 100})
		if err != nil {
			t.Fatalf("consume %s/%d@%d %s: %v", topic, part, next, iso, err)
		}
		if len(b.Records) == 0 {
			return out
		}
		for _, r := range b.Records {
			s := string(r.Payload)
			if r.ControlType == wire.ControlTypeTransaction {
				s = "ABORT"
				if r.TransactionMarker == wire.TxnMarkerCommit {
					s = "COMMIT"
				}
			}
			out = append(out, s)
			next = r.Offset + 1
		}
	}
	t.Fatal("partition never ended")
	return nil
}

// transactions: a committed transaction becomes visible to read_committed
// at once and whole, an aborted one never; read_uncommitted sees the raw log
// with its markers; the spec's errors reach the client.
func transactions(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 120*time.Second)
	framework.CreateTopics(t, ctx, cl, "topic=txn-out partitions=1")

	s, err := cl.InitProducerID(ctx, "e2e-copier")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.BeginTxn(ctx, s); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := cl.TxnPublish(ctx, s, "txn-out", 0, "", uint64(i), "c"+strconv.Itoa(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// A retry of seqNum 2 appends nothing.
	if _, err := cl.TxnPublish(ctx, s, "txn-out", 0, "", 2, "c2"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctx, cl, "txn-out", 0, "read_committed"); len(got) != 0 {
		t.Fatalf("open transaction visible to read_committed: %q", got)
	}
	if got := readAll(t, ctx, cl, "txn-out", 0, "read_uncommitted"); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("read_uncommitted while open: %q", got)
	}
	st, err := cl.TxnStatus(ctx, "e2e-copier")
	if err != nil || st.Value("state") != "open" || st.Value("messages") != "3" {
		t.Fatalf("status %v %v", st, err)
	}
	// The open transaction holds the LSO at its first offset: LIST_OFFSETS
	// isolation=read_committed and the lag of group describe say so.
	if _, err := cl.RegisterGroup(ctx, "txn-lag", "txn-out", "", ""); err != nil {
		t.Fatal(err)
	}
	checkLSO(t, ctx, cl, c, 0, 3)
	end, err := cl.EndTxn(ctx, s, true)
	if err != nil || end.Value("state") != "committed" || end.Value("messages") != "3" {
		t.Fatalf("commit %v %v", end, err)
	}
	checkLSO(t, ctx, cl, c, 4, 4) // 3 records and the marker
	framework.RunCases(t, ctx, cl, []framework.Case{
		{Cmd: "END_TXN transactional_id=e2e-copier producerId=" + s.ProducerID + " epoch=" + strconv.FormatInt(s.Epoch, 10) + " result=abort",
			Err: framework.Want("transaction_already_committed", cConflict, false)},
		{Cmd: "BEGIN_TXN transactional_id=e2e-copier producerId=" + s.ProducerID + " epoch=" + strconv.FormatInt(s.Epoch, 10),
			Err: framework.Want("producer_reinitialization_required", cConflict, false)},
		{Cmd: "TXN_PUBLISH transactional_id=e2e-copier producerId=" + s.ProducerID + " epoch=" + strconv.FormatInt(s.Epoch, 10) + " topic=txn-out message=x",
			Err: framework.Want("invalid_parameter", cValidation, false)},
	})

	// The next transaction aborts.
	s2, err := cl.InitProducerID(ctx, "e2e-copier")
	if err != nil || s2.ProducerID != s.ProducerID || s2.Epoch != s.Epoch+1 {
		t.Fatalf("re-init %+v %v", s2, err)
	}
	if _, err := cl.BeginTxn(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.TxnPublish(ctx, s2, "txn-out", 0, "", 1, "a1"); err != nil {
		t.Fatal(err)
	}
	if end, err := cl.EndTxn(ctx, s2, false); err != nil || end.Value("state") != "aborted" {
		t.Fatalf("abort %v %v", end, err)
	}
	// A plain record after both.
	if _, err := cl.Publish(ctx, client.PublishRequest{Topic: "txn-out", Partition: 0, Acks: client.AcksAll, ProducerID: "plain", Message: "p1"}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctx, cl, "txn-out", 0, "read_committed"); !slices.Equal(got, []string{"c1", "c2", "c3", "p1"}) {
		t.Fatalf("read_committed: %q", got)
	}
	if got := readAll(t, ctx, cl, "txn-out", 0, "read_uncommitted"); !slices.Equal(got, []string{"c1", "c2", "c3", "COMMIT", "a1", "ABORT", "p1"}) {
		t.Fatalf("read_uncommitted: %q", got)
	}
	// The fenced epoch cannot end anything.
	if _, err := cl.EndTxn(ctx, s, true); err == nil {
		t.Fatal("old epoch ended a transaction")
	}

	// Consume-process-produce: the input offsets commit with the output.
	framework.CreateTopics(t, ctx, cl, "topic=txn-in partitions=1")
	for i := range 3 {
		if _, err := cl.Publish(ctx, client.PublishRequest{Topic: "txn-in", Partition: 0, Acks: client.AcksAll, ProducerID: "src", Message: "in" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	framework.OK(t, ctx, cl, "REGISTER_GROUP group=txn-copy topic=txn-in")
	j := framework.OK(t, ctx, cl, "JOIN_GROUP group=txn-copy member=copier topic=txn-in")
	gen, _ := strconv.ParseInt(j["generation"], 10, 64)
	s3, err := cl.InitProducerID(ctx, "e2e-cpp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.BeginTxn(ctx, s3); err != nil {
		t.Fatal(err)
	}
	in := readAll(t, ctx, cl, "txn-in", 0, "read_committed")
	for i, v := range in {
		if _, err := cl.TxnPublish(ctx, s3, "txn-out", 0, "", uint64(i+1), "copy-"+v); err != nil {
			t.Fatal(err)
		}
	}
	so, err := cl.SendOffsetsToTxn(ctx, s3, "txn-in", "txn-copy", j["member"], gen, []wire.PartitionOffset{{Partition: 0, Offset: uint64(len(in))}})
	if err != nil || so.Value("staged_offsets") != "1" {
		t.Fatalf("send offsets %v %v", so, err)
	}
	// The staged offset is pending (KIP-447): another consumer's client
	// (through the last gateway) reading the group's offset now is held by
	// the gateway, which waits out unstable_offset_commit, and gets the
	// committed offset once the transaction commits — never the old one,
	// which would make it process the batch again.
	other := framework.Dial(t, ctx, c.Gateways()[len(c.Gateways())-1].ClientAddr)
	type fetched struct {
		off uint64
		err error
	}
	read := make(chan fetched, 1)
	go func() {
		off, err := other.FetchOffset(ctx, "txn-in", 0, "txn-copy")
		read <- fetched{off, err}
	}()
	select {
	case r := <-read:
		t.Fatalf("FETCH_OFFSET answered %d, %v while the staged offset was pending", r.off, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if end, err := cl.EndTxn(ctx, s3, true); err != nil || end.Value("offsets") != "1" {
		t.Fatalf("commit %v %v", end, err)
	}
	if r := <-read; r.err != nil || r.off != 3 {
		t.Fatalf("FETCH_OFFSET waiting out the commit: %d, %v", r.off, r.err)
	}
	if o := framework.OK(t, ctx, cl, "FETCH_OFFSET group=txn-copy topic=txn-in partition=0"); o["offset"] != "3" {
		t.Fatalf("offsets after the commit: %v", o)
	}
	if got := readAll(t, ctx, cl, "txn-out", 0, "read_committed"); !slices.Equal(got, []string{"c1", "c2", "c3", "p1", "copy-in0", "copy-in1", "copy-in2"}) {
		t.Fatalf("read_committed after the copy: %q", got)
	}

	// The client's transactional producer: a new epoch per transaction.
	tp := cl.NewTxnProducer("e2e-helper")
	for round, commit := range []bool{true, false, true} {
		if err := tp.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := tp.Send(ctx, "txn-out", 0, "", "h"+strconv.Itoa(round)+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if commit {
			err = tp.Commit(ctx)
		} else {
			err = tp.Abort(ctx)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	got := readAll(t, ctx, cl, "txn-out", 0, "read_committed")
	if tail := got[len(got)-4:]; !slices.Equal(tail, []string{"h00", "h01", "h20", "h21"}) {
		t.Fatalf("helper transactions: %q", got)
	}

	// A hanging transaction: listed (LIST_TXNS), aborted by the operator
	// (ABORT_TXN); its producer's commit then fails.
	s4, err := cl.InitProducerID(ctx, "e2e-hang")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.BeginTxn(ctx, s4); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.TxnPublish(ctx, s4, "txn-out", 0, "", 1, "hang"); err != nil {
		t.Fatal(err)
	}
	txns, err := cl.ListTxns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idx := slices.IndexFunc(txns, func(x client.Txn) bool { return x.TransactionalID == "e2e-hang" })
	if idx < 0 || txns[idx].State != "open" || !slices.Equal(txns[idx].Participants, []string{"txn-out/0"}) {
		t.Fatalf("list %+v", txns)
	}
	// An open transaction blocks DELETE of a topic it writes to.
	framework.RunCases(t, ctx, cl, []framework.Case{
		{Cmd: "DELETE topic=txn-out", Err: framework.Want("topic_delete_blocked", cConflict, false, "transactions", "[e2e-hang]")},
	})
	if a, err := cl.AbortTxn(ctx, "e2e-hang"); err != nil || a.State != "aborted" {
		t.Fatalf("abort %+v %v", a, err)
	}
	framework.CheckErr(t, "commit after operator abort", func() error { _, err := cl.EndTxn(ctx, s4, true); return err }(),
		*framework.Want("transaction_aborted", cConflict, false))
	if got := readAll(t, ctx, cl, "txn-out", 0, "read_committed"); slices.Contains(got, "hang") {
		t.Fatalf("aborted record visible: %q", got)
	}
}

// checkLSO checks txn-out/0's last stable offset and HWM through
// LIST_OFFSETS and `strata group describe txn-lag`, whose lag (nothing
// committed) is the LSO.
func checkLSO(t *testing.T, ctx context.Context, cl *client.Client, c framework.Cluster, lso, hwm uint64) {
	t.Helper()
	offs, err := cl.ListOffsetsCommitted(ctx, "txn-out", 0)
	if err != nil || len(offs) != 1 || offs[0].LSO != lso || offs[0].HWM != hwm {
		t.Fatalf("list offsets read_committed: %+v %v, want lso %d hwm %d", offs, err, lso, hwm)
	}
	code, out, errs := strataCLI(ctx, c.Gateways()[0].ClientAddr, "group", "describe", "txn-lag", "--output", "json")
	if code != 0 {
		t.Fatalf("group describe: exit %d: %s", code, errs)
	}
	var doc struct {
		Offsets []struct {
			LogEnd uint64 `json:"log_end_offset"`
			LSO    uint64 `json:"last_stable_offset"`
			Lag    uint64 `json:"lag"`
		} `json:"offsets"`
		TotalLag uint64 `json:"total_lag"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Offsets) != 1 {
		t.Fatalf("group describe: %v\n%s", err, out)
	}
	if o := doc.Offsets[0]; o.LSO != lso || o.LogEnd != hwm || o.Lag != lso || doc.TotalLag != lso {
		t.Fatalf("group describe: %+v total %d, want lso %d hwm %d lag %d", o, doc.TotalLag, lso, hwm, lso)
	}
}
