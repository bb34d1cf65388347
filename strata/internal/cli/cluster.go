package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/strataio/strata/libs/client"
)

const clusterUsage = `usage:
  strata cluster status [--internal] [--partitions] [--output table|json|yaml]
  strata cluster list [--output table|json|yaml]

status summarises CLUSTER_STATUS on one screen: nodes by role with
liveness, the Raft leader and voters, topic counts, and the partitions that
are leaderless or under-replicated. --partitions adds every partition with
its leader, epoch and HWM (the partition leader's, as LIST_OFFSETS reports
it; "checkpoint" marks metad's committed HWM where the leader did not
answer). Internal topics (__consumer_offsets) are left out; the
--internal flag includes them. --output json or yaml prints the document,
for scripts.

list prints LIST_CLUSTER: every node with its role, liveness and addresses.
`

// problemLines bounds the leaderless / under-replicated partitions the
// summary names, so that it fits one screen however bad things are.
const problemLines = 10

func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand(args, clusterUsage, stdout, stderr)
	if !ok {
		return code
	}
	switch sub {
	case "status", "list":
	default:
		return unknownSubcommand(stderr, "cluster", sub, clusterUsage)
	}
	name := "cluster " + sub
	fs := newFlagSet("strata "+name, clusterUsage, stderr)
	cf := addConnFlags(fs)
	var internal, partitions bool
	if sub == "status" {
		fs.BoolVar(&internal, "internal", false, "include the internal topics' partitions (__consumer_offsets)")
		fs.BoolVar(&partitions, "partitions", false, "list every partition (text output)")
	}
	if err := parseFlagsOnly(fs, args[1:]); err != nil {
		return parseExit(err)
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, name, err)
	}
	defer c.Close()
	if sub == "list" {
		nodes, err := c.ListCluster(ctx)
		if err != nil {
			return fail(stderr, name, err)
		}
		emit(stdout, nodes, func() { printClusterList(stdout, nodes) })
		return exitOK
	}
	raw, err := c.ClusterStatusWith(ctx, client.ClusterStatusOptions{Internal: internal})
	if err != nil {
		return fail(stderr, name, err)
	}
	if outputFormat(stdout) != fmtTable {
		emitRaw(stdout, raw, nil)
		return exitOK
	}
	st, err := client.DecodeClusterStatus(raw)
	if err != nil {
		return fail(stderr, name, err)
	}
	printClusterStatus(stdout, st, partitions)
	return exitOK
}

func printClusterList(w io.Writer, nodes []client.ClusterNode) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tLIVE\tRPC-ADDRESS\tCLIENT-ADDRESS")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", n.ID, n.Role, n.Live, n.RPCAddress, orDash(n.ClientAddress))
	}
	_ = tw.Flush()
}

// roleOrder is the order the summary lists roles in; others follow sorted.
var roleOrder = []string{"metad", "partitiond", "coordinatord", "gateway"}

func printClusterStatus(w io.Writer, st client.ClusterStatus, partitions bool) {
	// Raft.
	var voters, nonVoters []string
	for _, s := range st.RaftServers {
		if s.Suffrage == "voter" {
			voters = append(voters, s.ID)
		} else {
			nonVoters = append(nonVoters, s.ID)
		}
	}
	leader := "none"
	if st.RaftLeader.ID != "" {
		leader = st.RaftLeader.ID + " (" + st.RaftLeader.Address + ")"
	}
	fmt.Fprintf(w, "raft:        leader %s; voters %s", leader, orDash(strings.Join(voters, " ")))
	if len(nonVoters) > 0 {
		fmt.Fprintf(w, "; non-voters %s", strings.Join(nonVoters, " "))
	}
	fmt.Fprintln(w)

	// Nodes by role: live/total, the ids, down ones marked.
	type roleNodes struct{ live, down []string }
	byRole := map[string]*roleNodes{}
	get := func(r string) *roleNodes {
		if byRole[r] == nil {
			byRole[r] = &roleNodes{}
		}
		return byRole[r]
	}
	for _, n := range st.Brokers.Active {
		get(n.Role).live = append(get(n.Role).live, n.ID)
	}
	for _, n := range st.Brokers.Inactive {
		get(n.Role).down = append(get(n.Role).down, n.ID)
	}
	roles := slices.Clone(roleOrder)
	var extra []string
	for r := range byRole {
		if !slices.Contains(roleOrder, r) {
			extra = append(extra, r)
		}
	}
	slices.Sort(extra)
	roles = append(roles, extra...)
	fmt.Fprintln(w, "nodes:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range roles {
		rn := byRole[r]
		if rn == nil {
			continue
		}
		slices.Sort(rn.live)
		slices.Sort(rn.down)
		ids := strings.Join(rn.live, " ")
		if len(rn.down) > 0 {
			ids = strings.TrimSpace(ids + " DOWN: " + strings.Join(rn.down, " "))
		}
		fmt.Fprintf(tw, "  %s\t%d/%d live\t%s\n", r, len(rn.live), len(rn.live)+len(rn.down), ids)
	}
	_ = tw.Flush()

	// Topics and partitions.
	fmt.Fprintf(w, "topics:      %d application, %d internal", st.Topics.Application, st.Topics.Internal)
	if !st.InternalShown && st.Topics.Internal > 0 {
		fmt.Fprint(w, " (internal partitions hidden; --internal shows them)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "partitions:  %d listed; %d leaderless, %d under-replicated (whole cluster)\n",
		len(st.Partitions), st.LeaderlessPartitions, st.UnderReplicatedPartitions)
	var problems []string
	checkpoint := 0
	for _, p := range st.Partitions {
		switch {
		case p.Leader == "":
			problems = append(problems, fmt.Sprintf("  %s/%d leaderless (replicas %s)", p.Topic, p.Partition, strings.Join(p.Replicas, ",")))
		case len(p.ISR) < len(p.Replicas):
			problems = append(problems, fmt.Sprintf("  %s/%d under-replicated (isr %s of %s)", p.Topic, p.Partition,
				orDash(strings.Join(p.ISR, ",")), strings.Join(p.Replicas, ",")))
		}
		if p.HWMSource != "leader" {
			checkpoint++
		}
	}
	for i, l := range problems {
		if i == problemLines {
			fmt.Fprintf(w, "  ... and %d more (--partitions lists all)\n", len(problems)-problemLines)
			break
		}
		fmt.Fprintln(w, l)
	}
	if checkpoint > 0 {
		fmt.Fprintf(w, "hwm:         %d partitions' HWM is metad's checkpoint (their leader did not answer)\n", checkpoint)
	}
	if partitions && len(st.Partitions) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tEPOCH\tHWM\tHWM-SOURCE\tREPLICAS\tISR")
		for _, p := range st.Partitions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, orDash(p.Leader), p.LeaderEpoch, p.HWM, p.HWMSource,
				strings.Join(p.Replicas, ","), orDash(strings.Join(p.ISR, ",")))
		}
		_ = tw.Flush()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
