package faults

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// copier is a consume-process-produce loop: it copies the input topic to
// the output topic in transactions that also stage the group's offsets, so
// every input record lands in the output exactly once whatever stops it.
type copier struct {
	cl      *client.Client
	tp      *client.TxnProducer
	in, out string
	group   string
	member  string
	gen     int64
	parts   int32
}

const txnCopyGroup = "txn-copy"

func newCopier(cl *client.Client, in, out string, parts int32) *copier {
	return &copier{cl: cl, tp: cl.NewTxnProducer("txn-copier"), in: in, out: out, group: txnCopyGroup, parts: parts}
}

func (c *copier) join(ctx context.Context) error {
	j, err := c.cl.JoinGroup(ctx, c.group, "copier", c.in)
	if err != nil {
		return err
	}
	c.member, c.gen = j.Member, j.Generation
	return nil
}

// step copies up to batch records of one partition in one transaction;
// commit false leaves the transaction open (a crash in the middle). It
// returns how many records the transaction held.
func (c *copier) step(ctx context.Context, part int32, batch int, commit bool) (int, error) {
	from, err := c.cl.FetchOffset(ctx, c.in, part, c.group)
	if err != nil {
		return 0, err
	}
	b, err := c.cl.Consume(ctx, client.ConsumeRequest{Topic: c.in, Partition: part, Offset: from, Member: "reader",
		Group: "txn-copy-reader", MaxRecords: batch})
	if err != nil || len(b.Records) == 0 {
		return 0, err
	}
	if err := c.tp.Begin(ctx); err != nil {
		return 0, err
	}
	for _, r := range b.Records {
		if _, err := c.tp.Send(ctx, c.out, -1, "", string(r.Payload)); err != nil {
			return 0, err
		}
	}
	next := b.Records[len(b.Records)-1].Offset + 1
	if err := c.tp.SendOffsets(ctx, c.in, c.group, c.member, c.gen, []wire.PartitionOffset{{Partition: part, Offset: next}}); err != nil {
		return 0, err
	}
	if !commit {
		return len(b.Records), nil
	}
	return len(b.Records), c.tp.Commit(ctx)
}

// done says whether the group's offsets reached the end of every input
// partition.
func (c *copier) done(t testing.TB, ctx context.Context, ends map[int32]uint64) bool {
	for p := range c.parts {
		if framework.Committed(t, ctx, c.cl, c.in, p, c.group) < ends[p] {
			return false
		}
	}
	return true
}

// transactionsSurviveKill9 copies input to output with transactions,
// kills the whole deployment while a transaction is open (and after several
// committed), restarts it and finishes the copy with a new producer
// instance: a read_committed reader sees every input record exactly once
// in the output, nothing of the open transaction, and no transaction hangs.
func transactionsSurviveKill9(t *testing.T, c framework.Killable) {
	ctx, cl := framework.Connect(t, c, 3*time.Minute)
	const in, out, n, batch = "txn-in", "txn-out", 240, 20
	const inParts, outParts int32 = 2, 3
	for _, tc := range []client.TopicConfig{{Name: in, Partitions: int(inParts)}, {Name: out, Partitions: int(outParts)}} {
		if _, err := cl.CreateTopic(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
	acked := framework.PublishAcked(t, ctx, cl, in, n)
	ends := map[int32]uint64{}
	var want []string
	for p, vs := range acked {
		ends[p] = uint64(len(vs))
		want = append(want, vs...)
	}
	if _, err := cl.RegisterGroup(ctx, txnCopyGroup, in, "", ""); err != nil {
		t.Fatal(err)
	}
	cp := newCopier(cl, in, out, inParts)
	framework.Retry(t, ctx, func() error { return cp.join(ctx) })
	// Copy about half, then leave one transaction open and kill everything.
	copied := 0
	for copied < n/2 {
		k, err := cp.step(ctx, int32(copied/batch)%inParts, batch, true)
		if err != nil {
			t.Fatalf("copy: %v", err)
		}
		copied += k
	}
	if _, err := cp.step(ctx, 0, batch, false); err != nil {
		t.Fatalf("open transaction: %v", err)
	}
	cl.Close()
	c.Kill()
	c.Start()

	cl = framework.Dial(t, ctx, c.Gateways()[0].ClientAddr)
	cp = newCopier(cl, in, out, inParts)
	framework.Retry(t, ctx, func() error { return cp.join(ctx) })
	for i := 0; !cp.done(t, ctx, ends); i++ {
		if _, err := cp.step(ctx, int32(i)%inParts, batch, true); err != nil {
			// Coordinators and leaders settle after the restart: a failed
			// transaction is aborted and the step is tried again.
			_ = cp.tp.Abort(ctx)
			if ctx.Err() != nil {
				t.Fatalf("copy after restart: %v", err)
			}
			_ = cp.join(ctx)
			time.Sleep(100 * time.Millisecond)
		}
	}

	var got []string
	for p := range outParts {
		var next uint64
		for {
			b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: out, Partition: p, Offset: next, Member: "check",
				Group: "txn-check", MaxRecords: 500})
			if err != nil {
				t.Fatalf("read output %d: %v", p, err)
			}
			if len(b.Records) == 0 {
				break
			}
			for _, r := range b.Records {
				if r.ControlType != "" {
					t.Fatalf("read_committed returned a marker at %d/%d", p, r.Offset)
				}
				got = append(got, string(r.Payload))
				next = r.Offset + 1
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		dups := 0
		for i := 1; i < len(got); i++ {
			if got[i] == got[i-1] {
				dups++
			}
		}
		t.Fatalf("output has %d records (%d duplicates), input %d", len(got), dups, len(want))
	}
	txns, err := cl.ListTxns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range txns {
		if x.TransactionalID == "txn-copier" {
			t.Fatalf("transaction left hanging: %+v", x)
		}
	}
	t.Log(fmt.Sprintf("copied %d records exactly once across a kill -9 of the deployment", len(got)) + " (" + strconv.Itoa(n) + " in)")
}
