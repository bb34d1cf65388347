package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
)

const topicUsage = `usage:
  strata topic create NAME [--partitions N] [--replication-factor N] [--idempotent]
                           [--event-sourcing] [--cleanup-policy delete|compact|delete,compact]
                           [--retention-hours N] [--retention-bytes N]
                           [--partitioner hash_key|round_robin] [--min-isr N|default]
                           [--auth-policy open|deny_write|deny_read|acl]
                           [--read-acl P1,P2|*] [--write-acl P1,P2|*]
  strata topic list
  strata topic describe NAME
  strata topic delete NAME [--if-exists]

CREATE on an existing topic patches it (partitions may only grow).
`

func runTopic(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand(args, topicUsage, stdout, stderr)
	if !ok {
		return code
	}
	fs := newFlagSet("strata topic "+sub, topicUsage, stderr)
	cf := addConnFlags(fs)
	var cfg client.TopicConfig
	var idem, es, ifExists, asJSON bool
	switch sub {
	case "create":
		fs.IntVar(&cfg.Partitions, "partitions", 0, "partitions (0: the server's default, 4)")
		fs.IntVar(&cfg.ReplicationFactor, "replication-factor", 0, "replicas (0: metad's default_replication_factor, 1 unless configured; immutable)")
		fs.BoolVar(&idem, "idempotent", false, "idempotent topic (immutable)")
		fs.BoolVar(&es, "event-sourcing", false, "event-sourcing topic (immutable)")
		fs.StringVar(&cfg.CleanupPolicy, "cleanup-policy", "", "delete, compact or delete,compact")
		fs.Int64Var(&cfg.RetentionHours, "retention-hours", 0, "retention hours (0: broker default)")
		fs.Int64Var(&cfg.RetentionBytes, "retention-bytes", 0, "retention bytes (0: broker default)")
		fs.StringVar(&cfg.Partitioner, "partitioner", "", "hash_key or round_robin")
		fs.StringVar(&cfg.MinInSyncReplicas, "min-isr", "", "min_in_sync_replicas: number or default")
		fs.StringVar(&cfg.AuthPolicy, "auth-policy", "", "open, deny_write, deny_read or acl (enforced with enable_sasl)")
		fs.StringVar(&cfg.ReadACL, "read-acl", "", "principals that may read under acl (comma separated; * any authenticated)")
		fs.StringVar(&cfg.WriteACL, "write-acl", "", "principals that may write under acl (comma separated; * any authenticated)")
	case "describe":
		fs.BoolVar(&asJSON, "json", false, "same as --output json: the DESCRIBE JSON as received")
	case "delete":
		fs.BoolVar(&ifExists, "if-exists", false, "a missing topic is not an error")
	case "list":
	default:
		return unknownSubcommand(stderr, "topic", sub, topicUsage)
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	pos, err := parseCount(fs, args[1:], want)
	if err != nil {
		return parseExit(err)
	}
	if asJSON {
		stdout = withFormat(stdout, fmtJSON)
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "topic "+sub, err)
	}
	defer c.Close()
	switch sub {
	case "create":
		cfg.Name = pos[0]
		if idem {
			cfg.Idempotent = &idem
		}
		if es {
			cfg.EventSourcing = &es
		}
		r, err := c.CreateTopic(ctx, cfg)
		if err != nil {
			return fail(stderr, "topic create", err)
		}
		emit(stdout, fieldMap(r.Fields), func() { sortedPairs(stdout, r.Fields) })
	case "list":
		names, err := c.ListTopics(ctx)
		if err != nil {
			return fail(stderr, "topic list", err)
		}
		emit(stdout, nonNil(names), func() {
			for _, n := range names {
				fmt.Fprintln(stdout, n)
			}
		})
	case "describe":
		d, err := c.Describe(ctx, pos[0])
		if err != nil {
			return fail(stderr, "topic describe", err)
		}
		if outputFormat(stdout) != fmtTable {
			printJSON(stdout, d.Raw)
			return exitOK
		}
		def := d.Definition
		fmt.Fprintf(stdout, "topic %s revision %d partitions %d replication_factor %d idempotent %v event_sourcing %v\n",
			d.Topic, def.Revision, def.Partitions, def.ReplicationFactor, def.Idempotent, def.EventSourcing)
		fmt.Fprintf(stdout, "policy cleanup_policy=%s partitioner=%s auth_policy=%s\n", def.Policy.CleanupPolicy, def.Policy.Partitioner, def.Policy.AuthPolicy)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tLEADER\tREPLICAS\tISR\tLEO\tHWM")
		for _, p := range d.Partitions {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\n", p.ID, p.Leader, ids(p.Replicas), ids(p.ISR), p.LEO, p.HWM)
		}
		_ = tw.Flush()
	case "delete":
		deleted, err := c.DeleteTopic(ctx, pos[0], ifExists)
		if err != nil {
			return fail(stderr, "topic delete", err)
		}
		emit(stdout, map[string]any{"topic": pos[0], "deleted": deleted}, func() {
			if deleted {
				fmt.Fprintf(stdout, "topic %s deleted\n", pos[0])
			} else {
				fmt.Fprintf(stdout, "topic %s did not exist\n", pos[0])
			}
		})
	}
	return exitOK
}

func ids(v []string) string { return "[" + strings.Join(v, ",") + "]" }

// fieldMap is reply fields as a JSON object.
func fieldMap(fields []wire.Field) map[string]string {
	m := make(map[string]string, len(fields))
	for _, f := range fields {
		m[f.Key] = f.Value
	}
	return m
}

// nonNil makes an empty list print as [] rather than null.
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
