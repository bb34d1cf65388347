package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

const txnUsage = `usage:
  strata txn list [--json]
  strata txn abort TRANSACTIONAL_ID

list prints every open or completing transaction of the cluster, oldest
first: its age, state, producer id and epoch, messages, staged offsets and
participant partitions.

abort aborts a hanging transaction (its producer's later commit gets
transaction_aborted); a commit already decided cannot be aborted
(transaction_not_abortable).
`

func runTxn(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand(args, txnUsage, stdout, stderr)
	if !ok {
		return code
	}
	fs := newFlagSet("strata txn "+sub, txnUsage, stderr)
	cf := addConnFlags(fs)
	var asJSON bool
	want := 1
	switch sub {
	case "list":
		want = 0
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	case "abort":
	default:
		return unknownSubcommand(stderr, "txn", sub, txnUsage)
	}
	pos, err := parseCount(fs, args[1:], want)
	if err != nil {
		return parseExit(err)
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "txn "+sub, err)
	}
	defer c.Close()
	if sub == "abort" {
		t, err := c.AbortTxn(ctx, pos[0])
		if err != nil {
			return fail(stderr, "txn abort", err)
		}
		fmt.Fprintf(stdout, "transaction %s %s (producer %s epoch %d)\n", t.TransactionalID, t.State, t.ProducerID, t.Epoch)
		return exitOK
	}
	txns, err := c.ListTxns(ctx)
	if err != nil {
		return fail(stderr, "txn list", err)
	}
	if asJSON {
		b, _ := json.Marshal(map[string]any{"txns": txns})
		printJSON(stdout, b)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL_ID\tAGE\tSTATE\tPRODUCER\tEPOCH\tMESSAGES\tOFFSETS\tPARTICIPANTS")
	for _, t := range txns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", t.TransactionalID, (time.Duration(t.AgeMs) * time.Millisecond).String(),
			t.State, t.ProducerID, t.Epoch, t.Messages, t.Offsets, strings.Join(t.Participants, ","))
	}
	_ = tw.Flush()
	return exitOK
}
