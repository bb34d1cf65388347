package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/wire"
)

const consumeUsage = `usage:
  strata consume TOPIC [--partition N] [--from earliest|latest|N|-N|+N|@TIME] [--max N]
                       [--follow] [--output table|json|yaml]
  strata consume TOPIC --group G [--member M] [--from earliest|latest] ...

Prints records as "partition=P offset=O [key=K] VALUE"; --output json prints
one JSON object per line, yaml one document per record, with value_encoding
(and key_encoding) utf8 or base64: binary payloads are base64, not mangled.
Without --follow it stops once every partition is drained. With --group it
joins the group, reads the assigned partitions from the committed offsets
(--from applies when nothing is committed), commits after printing and
leaves on exit.

--from takes what rpk and kcat take: earliest (start), latest (end), an
absolute offset N, -N (N records before the end of each partition), +N (N
after the earliest retained offset), clamped to the partition's range.
@TIME (RFC 3339 or unix milliseconds) starts at the first record whose
batch holds a timestamp at or after TIME, found by the server's time index
(LIST_OFFSETS timestamp=, a Strata extension parameter); at the end when
nothing is that late.
`

func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata consume", consumeUsage, stderr)
	cf := addConnFlags(fs)
	topic := fs.String("topic", "", "topic (or the first argument)")
	partition := fs.Int("partition", -1, "partition (-1: all; ignored with --group)")
	from := fs.String("from", "earliest", offsetHelp)
	maxRecs := fs.Int64("max", 0, "stop after N records (0: no limit)")
	follow := fs.Bool("follow", false, "keep waiting for new records (until interrupted)")
	format := fs.String("format", "", "text or json (older spelling of the global --output table|json)")
	group := fs.String("group", "", "consume as a member of this group")
	member := fs.String("member", "strata-cli", "requested member id with --group")
	wait := fs.Duration("wait", 200*time.Millisecond, "long-poll wait per CONSUME")
	for short, long := range map[string]string{"t": "topic", "p": "partition", "o": "from", "n": "max", "f": "follow", "g": "group"} {
		alias(fs, short, long)
	}
	if err := parseTopic(fs, args, topic); err != nil {
		return parseExit(err)
	}
	switch *format {
	case "":
	case "text":
		stdout = withFormat(stdout, fmtTable)
	case "json":
		stdout = withFormat(stdout, fmtJSON)
	default:
		return usageError(stderr, fs, "--format must be text or json")
	}
	spec, err := parseOffsetSpec(*from)
	if err != nil {
		return usageError(stderr, fs, "--from: %v", err)
	}
	if *group != "" && spec.kind != offEarliest && spec.kind != offLatest {
		return usageError(stderr, fs, "--from %s cannot be combined with --group (committed offsets decide; earliest or latest apply when nothing is committed)", *from)
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "consume", err)
	}
	defer c.Close()
	pr := printer{w: stdout, format: outputFormat(stdout)}
	waitMS := int(wait.Milliseconds())
	if *group != "" {
		return consumeGroup(ctx, c, stderr, &pr, client.ConsumerOptions{Group: *group, Topic: *topic, Member: *member,
			AutoOffsetReset: map[offsetKind]string{offEarliest: "earliest", offLatest: "latest"}[spec.kind], WaitMS: waitMS}, *maxRecs, *follow)
	}
	md, err := c.Metadata(ctx, *topic)
	if err != nil {
		return fail(stderr, "consume", err)
	}
	var parts []int32
	for p := range md.Partitions {
		if *partition < 0 || p == *partition {
			parts = append(parts, int32(p))
		}
	}
	if len(parts) == 0 {
		return fail(stderr, "consume", errcode.PartitionNotFound.New("no such partition", "topic", *topic, "partition", strconv.Itoa(*partition)))
	}
	next := map[int32]uint64{}
	if spec.needsOffsets() {
		var los []client.PartitionOffsets
		if spec.kind == offAtTime {
			los, err = c.ListOffsetsAt(ctx, *topic, -1, spec.at)
		} else {
			los, err = c.ListOffsets(ctx, *topic, -1)
		}
		if err != nil {
			return fail(stderr, "consume", err)
		}
		for _, lo := range los {
			next[lo.Partition] = spec.resolve(lo)
		}
	} else {
		for _, p := range parts {
			next[p] = spec.n
		}
	}
	empty := 0
	outage := newRetryNotice(stderr)
	for i := 0; ctx.Err() == nil; i++ {
		p := parts[i%len(parts)]
		b, err := c.Consume(ctx, client.ConsumeRequest{Topic: *topic, Partition: p, Offset: next[p], WaitMS: waitMS})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// --follow outlives a server restart: say so, wait, retry.
			if *follow && errcode.IsRetryable(err) {
				outage.failed(ctx, err)
				continue
			}
			return fail(stderr, "consume", err)
		}
		outage.ok()
		if len(b.Records) == 0 {
			empty++
			if !*follow && empty >= len(parts) {
				break
			}
			continue
		}
		empty = 0
		for _, r := range b.Records {
			pr.print(r)
			next[p] = r.Offset + 1
			if *maxRecs > 0 && pr.n >= *maxRecs {
				return exitOK
			}
		}
	}
	return exitOK
}

func consumeGroup(ctx context.Context, c *client.Client, stderr io.Writer, pr *printer, o client.ConsumerOptions, maxRecs int64, follow bool) int {
	k := client.NewConsumer(c, o)
	defer func() {
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = k.Commit(lctx)
		_ = k.Close(lctx)
	}()
	empty := 0
	outage := newRetryNotice(stderr)
	for ctx.Err() == nil {
		recs, err := k.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// Fencing answers schedule a rejoin inside the consumer.
			if e, ok := errcode.As(err); ok && e.Class == errcode.ClassFencing {
				continue
			}
			if errcode.IsRetryable(err) {
				outage.failed(ctx, err)
				continue
			}
			return fail(stderr, "consume", err)
		}
		outage.ok()
		if len(recs) == 0 {
			empty++
			if !follow && empty >= max(len(k.Assignments()), 1) {
				break
			}
			continue
		}
		empty = 0
		for _, r := range recs {
			pr.print(r)
			if maxRecs > 0 && pr.n >= maxRecs {
				// Commit what was printed, not the rest of the batch: one
				// Poll returns one partition's records.
				k.Seek(r.Partition, r.Offset+1)
				return exitOK
			}
		}
		if err := k.Commit(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "strata consume: commit failed: %v\n", err)
		}
	}
	return exitOK
}

// retryNotice reports an outage of a long-running command once, waits with
// a backoff between attempts, and reports the recovery: a consumer must not
// go silent while its server is away, nor flood the terminal.
type retryNotice struct {
	w       io.Writer
	backoff pace.Backoff
	since   time.Time // start of the current outage; zero when none
}

func newRetryNotice(w io.Writer) *retryNotice {
	return &retryNotice{w: w, backoff: pace.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}}
}

func (n *retryNotice) failed(ctx context.Context, err error) {
	if n.since.IsZero() {
		n.since = time.Now()
		fmt.Fprintf(n.w, "strata consume: %v; retrying\n", err)
	}
	n.backoff.Wait(ctx)
}

func (n *retryNotice) ok() {
	if !n.since.IsZero() {
		fmt.Fprintf(n.w, "strata consume: resumed after %v\n", time.Since(n.since).Round(100*time.Millisecond))
		n.since = time.Time{}
		n.backoff.Reset()
	}
}

// printer prints consumed records: table is one line per record, json one
// object per line (NDJSON), yaml one document per record.
type printer struct {
	w      io.Writer
	format string
	n      int64
}

func (p *printer) print(r wire.Record) {
	p.n++
	switch p.format {
	case fmtJSON:
		out, _ := json.Marshal(toRecordJSON(r))
		fmt.Fprintln(p.w, string(out))
		return
	case fmtYAML:
		fmt.Fprintln(p.w, "---")
		writeYAML(p.w, toRecordJSON(r))
		return
	}
	val := string(r.Payload)
	if !utf8.ValidString(val) {
		val = strconv.Quote(val)
	}
	if r.Key != "" {
		fmt.Fprintf(p.w, "partition=%d offset=%d key=%s %s\n", r.Partition, r.Offset, r.Key, val)
		return
	}
	fmt.Fprintf(p.w, "partition=%d offset=%d %s\n", r.Partition, r.Offset, val)
}
