package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

const groupUsage = `usage:
  strata group status GROUP
  strata group describe GROUP
  strata group list
  strata group delete GROUP
  strata group reset-offsets GROUP --topic T [--partitions 0,2,5]
      (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-current |
       --to-datetime TIME | --by-duration D) [--execute]

describe adds, per partition of every topic the group selects, the committed offset
(CURRENT-OFFSET), the high watermark (LOG-END-OFFSET), the last stable offset
(LAST-STABLE-OFFSET: below it every transaction is decided), LAG = max(LSO -
committed, 0) — what a read_committed consumer, the default, still has to
read; it equals HWM - committed when no transaction is open — the owning
member, and TOTAL-LAG.

delete removes a group without active members and its committed offsets.

reset-offsets moves the committed offsets of a group without active members
(a group that does not exist yet is registered against the topic) on the
selected partitions (default: all of the topic): to the earliest retained
offset, to the high watermark (--to-latest), to offset N, to the committed
offset shifted by N (negative moves back), or to the committed offset itself.
--to-offset and --shift-by are clamped into [earliest, high watermark].
Without --execute it prints the plan and changes nothing (dry run).
--to-datetime (RFC 3339 or unix ms) and --by-duration (now minus D, e.g.
2h) move to the first record at or after that time, found by the server's
time index (LIST_OFFSETS timestamp=, a Strata extension parameter), or to
the high watermark when nothing is that late.
`

func runGroup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand(args, groupUsage, stdout, stderr)
	if !ok {
		return code
	}
	fs := newFlagSet("strata group "+sub, groupUsage, stderr)
	cf := addConnFlags(fs)
	var asJSON bool
	var ro resetFlags
	want := 1
	switch sub {
	case "status", "describe":
		fs.BoolVar(&asJSON, "json", false, "same as --output json")
	case "list":
		want = 0
	case "delete":
	case "reset-offsets":
		ro.add(fs)
	default:
		return unknownSubcommand(stderr, "group", sub, groupUsage)
	}
	pos, err := parseCount(fs, args[1:], want)
	if err != nil {
		return parseExit(err)
	}
	if asJSON {
		stdout = withFormat(stdout, fmtJSON)
	}
	var plan resetPlan
	if sub == "reset-offsets" {
		if plan, err = ro.plan(fs); err != nil {
			return usageError(stderr, fs, "%v", err)
		}
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "group "+sub, err)
	}
	defer c.Close()
	switch sub {
	case "list":
		r, err := c.ListGroups(ctx)
		if err != nil {
			return fail(stderr, "group list", err)
		}
		v, ok := r.Get("groups")
		if !ok {
			emit(stdout, fieldMap(r.Fields), func() { sortedPairs(stdout, r.Fields) })
			return exitOK
		}
		groups := splitList(strings.Trim(v, "[]"))
		emit(stdout, nonNil(groups), func() {
			for _, g := range groups {
				fmt.Fprintln(stdout, g)
			}
		})
		return exitOK
	case "delete":
		if err := c.DeleteGroup(ctx, pos[0]); err != nil {
			return fail(stderr, "group delete", err)
		}
		emit(stdout, map[string]any{"group": pos[0], "deleted": true}, func() { fmt.Fprintf(stdout, "group %s deleted\n", pos[0]) })
		return exitOK
	case "reset-offsets":
		return resetOffsets(ctx, c, pos[0], plan, stdout, stderr)
	}
	st, err := c.GroupStatus(ctx, pos[0])
	if err != nil {
		return fail(stderr, "group "+sub, err)
	}
	var rows []offsetRow
	var total uint64
	if sub == "describe" {
		if rows, total, err = groupOffsets(ctx, c, st); err != nil {
			return fail(stderr, "group describe", err)
		}
	}
	if outputFormat(stdout) != fmtTable {
		if sub == "status" {
			printJSON(stdout, st.Raw)
			return exitOK
		}
		// describe: the GROUP_STATUS document plus the offsets and lag the
		// table shows.
		doc := map[string]any{}
		if err := json.Unmarshal(st.Raw, &doc); err != nil {
			return fail(stderr, "group describe", err)
		}
		doc["offsets"], doc["total_lag"] = nonNil(rows), total
		emit(stdout, doc, nil)
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
		fmt.Fprintln(stdout)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAST-STABLE-OFFSET\tLAG\tMEMBER")
		for _, r := range rows {
			member := r.Member
			if member == "" {
				member = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Topic, r.Partition, r.Current, r.LogEnd, r.LSO, r.Lag, member)
		}
		_ = tw.Flush()
		fmt.Fprintf(stdout, "TOTAL-LAG %d\n", total)
	}
	return exitOK
}

// offsetRow is one partition of group describe.
type offsetRow struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   uint64 `json:"current_offset"`
	LogEnd    uint64 `json:"log_end_offset"`
	LSO       uint64 `json:"last_stable_offset"`
	Lag       uint64 `json:"lag"`
	Member    string `json:"member,omitempty"`
}

// groupOffsets returns the per-partition offsets and lag of a group, as
// Kafka's and rpk's group describe show them, for every topic the group
// selects, and the total lag.
func groupOffsets(ctx context.Context, c *client.Client, st *client.GroupStatus) ([]offsetRow, uint64, error) {
	topics, err := groupTopics(ctx, c, st.TopicName)
	if err != nil {
		return nil, 0, err
	}
	// Assignments are bare partition numbers: they name a member's
	// partitions only when the group has one topic.
	owner := map[int32]string{}
	if len(topics) == 1 {
		for _, m := range st.Members {
			for _, p := range m.Assignments {
				owner[p] = m.MemberID
			}
		}
	}
	var rows []offsetRow
	var total uint64
	for _, topic := range topics {
		// Lag is measured against the LSO, as the coordinator's
		// strata_consumer_group_lag is: a group's consumers read
		// read_committed unless they ask otherwise, and records of an open
		// transaction are not theirs to read yet.
		offs, err := c.ListOffsetsCommitted(ctx, topic, -1)
		if err != nil {
			return nil, 0, err
		}
		for _, o := range offs {
			committed, err := c.FetchOffset(ctx, topic, o.Partition, st.GroupName)
			if err != nil {
				return nil, 0, err
			}
			var lag uint64
			if o.LSO > committed {
				lag = o.LSO - committed
			}
			total += lag
			rows = append(rows, offsetRow{Topic: topic, Partition: o.Partition, Current: committed, LogEnd: o.HWM, LSO: o.LSO,
				Lag: lag, Member: owner[o.Partition]})
		}
	}
	return rows, total, nil
}

// groupTopics returns the topics of a group from GROUP_STATUS topic_name:
// one topic, a comma list, or a glob pattern matched against the current
// topics (as the coordinator matches it: internal "__" topics never).
func groupTopics(ctx context.Context, c *client.Client, name string) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	if !strings.ContainsAny(name, "*?[") {
		return strings.Split(name, ","), nil
	}
	all, err := c.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range all {
		if ok, _ := path.Match(name, t); ok && !strings.HasPrefix(t, "__") {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// resetFlags are the flags of group reset-offsets.
type resetFlags struct {
	topic, partitions               string
	toEarliest, toLatest, toCurrent bool
	toOffset                        uint64
	shiftBy                         int64
	execute                         bool
	toDatetime                      string
	byDuration                      time.Duration
}

func (f *resetFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.topic, "topic", "", "topic whose offsets move (required)")
	alias(fs, "t", "topic")
	fs.StringVar(&f.partitions, "partitions", "", "comma-separated partitions (default: every partition of the topic)")
	fs.BoolVar(&f.toEarliest, "to-earliest", false, "reset to the earliest retained offset")
	fs.BoolVar(&f.toLatest, "to-latest", false, "reset to the high watermark")
	fs.Uint64Var(&f.toOffset, "to-offset", 0, "reset to offset N (clamped into [earliest, high watermark])")
	fs.Int64Var(&f.shiftBy, "shift-by", 0, "move the committed offset by N, negative moves back (clamped)")
	fs.BoolVar(&f.toCurrent, "to-current", false, "reset to the committed offset")
	fs.StringVar(&f.toDatetime, "to-datetime", "", "reset to the first offset at or after TIME (RFC 3339 or unix ms; the server's time index)")
	fs.DurationVar(&f.byDuration, "by-duration", 0, "reset to the first offset at or after now minus D (the server's time index)")
	fs.BoolVar(&f.execute, "execute", false, "apply the reset (default: dry run, print the plan only)")
}

// Reset targets of group reset-offsets.
const (
	resetEarliest = "to-earliest"
	resetLatest   = "to-latest"
	resetOffset   = "to-offset"
	resetShift    = "shift-by"
	resetCurrent  = "to-current"
	resetDatetime = "to-datetime"
	resetDuration = "by-duration"
)

// resetPlan is a checked reset-offsets command line.
type resetPlan struct {
	topic string
	// parts are the selected partitions; nil means every partition.
	parts   []int32
	target  string
	offset  uint64
	shift   int64
	execute bool
	at      time.Time // resetDatetime, resetDuration
}

// plan checks the flags fs parsed: --topic is required, exactly one target
// option, and --partitions a list of distinct non-negative partitions.
func (f *resetFlags) plan(fs *flag.FlagSet) (resetPlan, error) {
	p := resetPlan{topic: f.topic, offset: f.toOffset, shift: f.shiftBy, execute: f.execute}
	if p.topic == "" {
		return p, errors.New("--topic is required")
	}
	var targets []string
	for name, on := range map[string]bool{resetEarliest: f.toEarliest, resetLatest: f.toLatest, resetCurrent: f.toCurrent} {
		if on {
			targets = append(targets, name)
		}
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == resetOffset || fl.Name == resetShift || fl.Name == resetDatetime || fl.Name == resetDuration {
			targets = append(targets, fl.Name)
		}
	})
	if len(targets) != 1 {
		return p, errors.New("exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-current, --to-datetime, --by-duration is required")
	}
	p.target = targets[0]
	switch p.target {
	case resetDatetime:
		at, err := parseTime(f.toDatetime)
		if err != nil {
			return p, fmt.Errorf("--to-datetime: %w", err)
		}
		p.at = at
	case resetDuration:
		if f.byDuration <= 0 {
			return p, errors.New("--by-duration must be positive")
		}
		p.at = time.Now().Add(-f.byDuration)
	}
	if f.partitions != "" {
		seen := map[int32]bool{}
		for _, s := range strings.Split(f.partitions, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || n < 0 {
				return p, fmt.Errorf("--partitions: %q is not a partition number", s)
			}
			if seen[int32(n)] {
				return p, fmt.Errorf("--partitions: partition %d given twice", n)
			}
			seen[int32(n)] = true
			p.parts = append(p.parts, int32(n))
		}
	}
	return p, nil
}

// newOffset returns the reset target of a partition whose committed offset
// is current and whose range is o, and a note when a requested offset had to
// be clamped into [earliest, high watermark] (as Kafka's tool does).
func (p resetPlan) newOffset(current uint64, o client.PartitionOffsets) (uint64, string) {
	var want uint64
	var what string
	below := false // the shift went below offset 0
	switch p.target {
	case resetEarliest:
		return o.Earliest, ""
	case resetLatest:
		return o.HWM, ""
	case resetCurrent:
		return current, ""
	case resetDatetime, resetDuration:
		// The server's time-index lookup, already within [earliest, HWM].
		return o.Time, ""
	case resetOffset:
		want, what = p.offset, fmt.Sprintf("offset %d", p.offset)
	case resetShift:
		want, below = shiftOffset(current, p.shift)
		what = fmt.Sprintf("committed offset %d shifted by %d", current, p.shift)
	}
	switch {
	case below || want < o.Earliest:
		return o.Earliest, fmt.Sprintf("partition %d: %s is below the earliest offset %d; using %d", o.Partition, what, o.Earliest, o.Earliest)
	case want > o.HWM:
		return o.HWM, fmt.Sprintf("partition %d: %s is above the high watermark %d; using %d", o.Partition, what, o.HWM, o.HWM)
	}
	return want, ""
}

// shiftOffset is cur + by, saturating at the largest offset and at 0
// (below reports the latter).
func shiftOffset(cur uint64, by int64) (next uint64, below bool) {
	if by >= 0 {
		if d := uint64(by); cur <= math.MaxUint64-d {
			return cur + d, false
		}
		return math.MaxUint64, false
	}
	if d := uint64(-(by + 1)) + 1; d <= cur {
		return cur - d, false
	}
	return 0, true
}

// resetOffsets runs group reset-offsets: it reads LIST_OFFSETS and the
// committed offsets (FETCH_OFFSET) of the selected partitions, prints the
// plan and, with --execute, applies it with one RESET_OFFSETS.
func resetOffsets(ctx context.Context, c *client.Client, group string, p resetPlan, stdout, stderr io.Writer) int {
	const name = "group reset-offsets"
	var offs []client.PartitionOffsets
	var err error
	if p.target == resetDatetime || p.target == resetDuration {
		offs, err = c.ListOffsetsAt(ctx, p.topic, -1, p.at)
	} else {
		offs, err = c.ListOffsets(ctx, p.topic, -1)
	}
	if err != nil {
		return fail(stderr, name, err)
	}
	byPart := make(map[int32]client.PartitionOffsets, len(offs))
	all := make([]int32, 0, len(offs))
	for _, o := range offs {
		byPart[o.Partition] = o
		all = append(all, o.Partition)
	}
	parts := p.parts
	if parts == nil {
		parts = all
		slices.Sort(parts)
	}
	for _, part := range parts {
		if _, ok := byPart[part]; !ok {
			return fail(stderr, name, errcode.PartitionNotFound.New("the topic has no such partition",
				"topic", p.topic, "partition", strconv.Itoa(int(part))))
		}
	}
	type planRow struct {
		Partition int32  `json:"partition"`
		Current   uint64 `json:"current_offset"`
		New       uint64 `json:"new_offset"`
	}
	entries := make([]wire.PartitionOffset, 0, len(parts))
	rows := make([]planRow, 0, len(parts))
	for _, part := range parts {
		current, err := c.FetchOffset(ctx, p.topic, part, group)
		if err != nil {
			return fail(stderr, name, err)
		}
		next, note := p.newOffset(current, byPart[part])
		if note != "" {
			fmt.Fprintln(stderr, "note: "+note)
		}
		entries = append(entries, wire.PartitionOffset{Partition: part, Offset: next})
		rows = append(rows, planRow{part, current, next})
	}
	n := 0
	if p.execute {
		if n, err = c.ResetOffsets(ctx, group, p.topic, entries); err != nil {
			return fail(stderr, name, err)
		}
	}
	doc := map[string]any{"group": group, "topic": p.topic, "executed": p.execute, "offsets": rows}
	if p.execute {
		doc["reset"] = n
	}
	emit(stdout, doc, func() {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", p.topic, r.Partition, r.Current, r.New)
		}
		_ = tw.Flush()
		if !p.execute {
			fmt.Fprintln(stdout, "dry run: nothing changed; add --execute to apply")
			return
		}
		fmt.Fprintf(stdout, "reset %d offsets of group %s on topic %s\n", n, group, p.topic)
	})
	return exitOK
}
