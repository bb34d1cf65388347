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

const groupUsage = `usage:
  strata group status GROUP [--json]
  strata group describe GROUP
  strata group list

describe adds, per partition of the group's topic, the committed offset
(CURRENT-OFFSET), the high watermark (LOG-END-OFFSET), LAG = max(HWM -
committed, 0), the owning member, and TOTAL-LAG.
`

func runGroup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, groupUsage)
		return exitUsage
	}
	sub := args[0]
	fs := newFlagSet("strata group "+sub, groupUsage, stderr)
	cf := addConnFlags(fs)
	asJSON := fs.Bool("json", false, "print the GROUP_STATUS JSON (status)")
	want := 0
	switch sub {
	case "status", "describe":
		want = 1
	case "list":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, groupUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "strata group: unknown subcommand %q\n\n%s", sub, groupUsage)
		return exitUsage
	}
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != want {
		return usageError(stderr, fs, "expected %d argument(s), got %d", want, len(pos))
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "group "+sub, err)
	}
	defer c.Close()
	if sub == "list" {
		r, err := c.ListGroups(ctx)
		if err != nil {
			return fail(stderr, "group list", err)
		}
		if v, ok := r.Get("groups"); ok {
			for _, g := range splitList(strings.Trim(v, "[]")) {
				fmt.Fprintln(stdout, g)
			}
			return exitOK
		}
		sortedPairs(stdout, r.Fields)
		return exitOK
	}
	st, err := c.GroupStatus(ctx, pos[0])
	if err != nil {
		return fail(stderr, "group status", err)
	}
	if *asJSON {
		var v any
		_ = json.Unmarshal(st.Raw, &v)
		out, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(stdout, string(out))
		return exitOK
	}
	fmt.Fprintf(stdout, "group %s topic %s state %s generation %d members %d partitions %d last_rebalance %s\n",
		st.GroupName, st.TopicName, st.State, st.Generation, st.MemberCount, st.PartitionCount, strings.Trim(string(st.LastRebalance), `"`))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tLAST_HEARTBEAT\tASSIGNMENTS")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%v\n", m.MemberID, strings.Trim(string(m.LastHeartbeat), `"`), m.Assignments)
	}
	_ = tw.Flush()
	if sub == "describe" {
		return describeOffsets(ctx, c, st, stdout, stderr)
	}
	return exitOK
}

// describeOffsets prints the per-partition offsets and lag table of a group,
// as Kafka's and rpk's group describe do.
func describeOffsets(ctx context.Context, c *client.Client, st *client.GroupStatus, stdout, stderr io.Writer) int {
	if st.TopicName == "" {
		return exitOK
	}
	offs, err := c.ListOffsets(ctx, st.TopicName, -1)
	if err != nil {
		return fail(stderr, "group describe", err)
	}
	owner := map[int32]string{}
	for _, m := range st.Members {
		for _, p := range m.Assignments {
			owner[p] = m.MemberID
		}
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER")
	var total uint64
	for _, o := range offs {
		committed, err := c.FetchOffset(ctx, st.TopicName, o.Partition, st.GroupName)
		if err != nil {
			return fail(stderr, "group describe", err)
		}
		var lag uint64
		if o.HWM > committed {
			lag = o.HWM - committed
		}
		total += lag
		member := owner[o.Partition]
		if member == "" {
			member = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", st.TopicName, o.Partition, committed, o.HWM, lag, member)
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "TOTAL-LAG %d\n", total)
	return exitOK
}

const clusterUsage = `usage:
  strata cluster status

Prints the CLUSTER_STATUS JSON document (brokers, Raft leader, partition
leaders, leaderless and under-replicated counts).
`

func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "status" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, clusterUsage)
			return exitOK
		}
		fmt.Fprint(stderr, clusterUsage)
		return exitUsage
	}
	fs := newFlagSet("strata cluster status", clusterUsage, stderr)
	cf := addConnFlags(fs)
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != 0 {
		return usageError(stderr, fs, "unexpected argument %q", pos[0])
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "cluster status", err)
	}
	defer c.Close()
	raw, err := c.ClusterStatus(ctx)
	if err != nil {
		return fail(stderr, "cluster status", err)
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(stdout, string(out))
	return exitOK
}
