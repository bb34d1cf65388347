package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/strataio/strata/libs/client"
)

const topicUsage = `usage:
  strata topic create NAME [--partitions N] [--replication-factor N] [--idempotent]
                           [--event-sourcing] [--cleanup-policy delete|compact|delete,compact]
                           [--retention-hours N] [--retention-bytes N]
                           [--partitioner hash_key|round_robin] [--min-isr N|default]
  strata topic list
  strata topic describe NAME [--json]
  strata topic delete NAME [--if-exists]

CREATE on an existing topic patches it (partitions may only grow).
`

func runTopic(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topicUsage)
		return exitUsage
	}
	sub := args[0]
	fs := newFlagSet("strata topic "+sub, topicUsage, stderr)
	cf := addConnFlags(fs)
	var cfg client.TopicConfig
	var idem, es, ifExists, asJSON bool
	switch sub {
	case "create":
		fs.IntVar(&cfg.Partitions, "partitions", 0, "partitions (server default 4)")
		fs.IntVar(&cfg.ReplicationFactor, "replication-factor", 0, "replicas (server default 3; immutable)")
		fs.BoolVar(&idem, "idempotent", false, "idempotent topic (immutable)")
		fs.BoolVar(&es, "event-sourcing", false, "event-sourcing topic (immutable)")
		fs.StringVar(&cfg.CleanupPolicy, "cleanup-policy", "", "delete, compact or delete,compact")
		fs.Int64Var(&cfg.RetentionHours, "retention-hours", 0, "retention hours (0: broker default)")
		fs.Int64Var(&cfg.RetentionBytes, "retention-bytes", 0, "retention bytes (0: broker default)")
		fs.StringVar(&cfg.Partitioner, "partitioner", "", "hash_key or round_robin")
		fs.StringVar(&cfg.MinInSyncReplicas, "min-isr", "", "min_in_sync_replicas: number or default")
	case "describe":
		fs.BoolVar(&asJSON, "json", false, "print the DESCRIBE JSON as received")
	case "delete":
		fs.BoolVar(&ifExists, "if-exists", false, "a missing topic is not an error")
	case "list":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, topicUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "strata topic: unknown subcommand %q\n\n%s", sub, topicUsage)
		return exitUsage
	}
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(pos) != want {
		return usageError(stderr, fs, "expected %d argument(s), got %d", want, len(pos))
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
		sortedPairs(stdout, r.Fields)
	case "list":
		names, err := c.ListTopics(ctx)
		if err != nil {
			return fail(stderr, "topic list", err)
		}
		for _, n := range names {
			fmt.Fprintln(stdout, n)
		}
	case "describe":
		d, err := c.Describe(ctx, pos[0])
		if err != nil {
			return fail(stderr, "topic describe", err)
		}
		if asJSON {
			var v any
			_ = json.Unmarshal(d.Raw, &v)
			out, _ := json.MarshalIndent(v, "", "  ")
			fmt.Fprintln(stdout, string(out))
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
		if deleted {
			fmt.Fprintf(stdout, "topic %s deleted\n", pos[0])
		} else {
			fmt.Fprintf(stdout, "topic %s did not exist\n", pos[0])
		}
	}
	return exitOK
}

func ids(v []string) string { return "[" + strings.Join(v, ",") + "]" }
