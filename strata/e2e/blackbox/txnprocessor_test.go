package blackbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// txnProcessorExactlyOnce: client.TxnProcessor copies a 2-partition input
// to a 3-partition output in transactions of 25. A processing failure in
// the middle of a batch aborts it and the batch is copied again; an
// instance abandoned with a transaction open is fenced by its successor
// (same transactional_id), whose first transaction aborts the open one,
// and the zombie's later send and commit are refused with fencing errors.
// A read_committed reader finds every input record exactly once.
func txnProcessorExactlyOnce(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 3*time.Minute)
	const in, out, group, n, batch = "tp-in", "tp-out", "tp-copy", 300, 25
	framework.CreateTopics(t, ctx, cl, "topic="+in+" partitions=2", "topic="+out+" partitions=3")
	acked := framework.PublishAcked(t, ctx, cl, in, n)
	var want []string
	ends := map[int32]uint64{}
	for p, vs := range acked {
		want = append(want, vs...)
		ends[p] = uint64(len(vs))
	}
	done := func() bool {
		for p, e := range ends {
			if framework.Committed(t, ctx, cl, in, p, group) < e {
				return false
			}
		}
		return true
	}
	newProc := func(cl *client.Client) *client.TxnProcessor {
		return client.NewTxnProcessor(cl, client.TxnProcessorOptions{TransactionalID: "tp-copier",
			Consumer: client.ConsumerOptions{Group: group, Topic: in, Member: "copier", MaxRecords: batch, WaitMS: 50}})
	}
	copyRec := func(r wire.Record) ([]client.Output, error) {
		return []client.Output{{Topic: out, Partition: -1, Message: string(r.Payload)}}, nil
	}

	// Instance 1: a few batches, one of them failing half way.
	c1 := framework.Dial(t, ctx, c.Gateways()[0].ClientAddr)
	p1 := newProc(c1)
	failed := false
	errBoom := errors.New("boom")
	for steps := 0; steps < 4; {
		k, err := p1.Step(ctx, func(r wire.Record) ([]client.Output, error) {
			if !failed && steps == 2 && r.Offset%batch == batch/2 {
				failed = true
				return nil, errBoom
			}
			return copyRec(r)
		})
		if errors.Is(err, errBoom) {
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", steps, err)
		}
		if k > 0 {
			steps++
		}
	}
	if !failed {
		t.Fatal("the failing batch never ran")
	}
	// Leave a transaction open (two sends, no commit), then abandon the
	// instance: it leaves the group, its transaction stays open.
	zombie := p1.Producer()
	if err := zombie.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := zombie.Send(ctx, out, -1, "", fmt.Sprintf("zombie-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Instance 2 finishes the copy.
	c2 := framework.Dial(t, ctx, c.Gateways()[len(c.Gateways())-1].ClientAddr)
	p2 := newProc(c2)
	defer p2.Close(context.WithoutCancel(ctx))
	if err := p2.Run(ctx, copyRec, done, func(err error) { t.Logf("step: %v", err) }); err != nil {
		t.Fatal(err)
	}
	if p2.Producer().Session().Epoch <= zombie.Session().Epoch {
		t.Fatalf("successor epoch %d, zombie %d", p2.Producer().Session().Epoch, zombie.Session().Epoch)
	}
	// The zombie is fenced: its send and its commit are refused.
	if _, err := cl.TxnPublish(ctx, zombie.Session(), out, 0, "", 99, "zombie-late"); !isFencing(err) {
		t.Fatalf("zombie send: %v, want a fencing error", err)
	}
	if _, err := cl.EndTxn(ctx, zombie.Session(), true); !isFencing(err) {
		t.Fatalf("zombie commit: %v, want a fencing error", err)
	}

	var got []string
	for p := range int32(3) {
		got = append(got, readAll(t, ctx, cl, out, p, "read_committed")...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("output (%d records) is not the input (%d): %v", len(got), len(want), diff(got, want))
	}
	txns, err := cl.ListTxns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range txns {
		if x.TransactionalID == "tp-copier" {
			t.Fatalf("transaction left hanging: %+v", x)
		}
	}
}

func isFencing(err error) bool {
	e, ok := errcode.As(err)
	return ok && e.Class == errcode.ClassFencing
}

// diff names a few records that are missing or repeated.
func diff(got, want []string) string {
	count := map[string]int{}
	for _, v := range got {
		count[v]++
	}
	var out []string
	for _, v := range want {
		if count[v] != 1 && len(out) < 5 {
			out = append(out, fmt.Sprintf("%s×%d", v, count[v]))
		}
		delete(count, v)
	}
	for v := range count {
		if len(out) < 10 {
			out = append(out, "extra "+v)
		}
	}
	return fmt.Sprint(out)
}
