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
	"github.com/strataio/strata/libs/wire"
)

const consumeUsage = `usage:
  strata consume TOPIC [--partition N] [--from earliest|latest|OFFSET] [--max N]
                       [--follow] [--format text|json]
  strata consume TOPIC --group G [--member M] [--from earliest|latest] ...

Prints records as "partition=P offset=O [key=K] VALUE" (or one JSON object per
line). Without --follow it stops once every partition is drained. With
--group it joins the group, reads the assigned partitions from the committed
offsets (--from applies when nothing is committed), commits after printing
and leaves on exit.
`

func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata consume", consumeUsage, stderr)
	cf := addConnFlags(fs)
	topic := fs.String("topic", "", "topic (or the first argument)")
	partition := fs.Int("partition", -1, "partition (-1: all; ignored with --group)")
	from := fs.String("from", "earliest", "start: earliest, latest or an offset")
	maxRecs := fs.Int64("max", 0, "stop after N records (0: no limit)")
	follow := fs.Bool("follow", false, "keep waiting for new records (until interrupted)")
	format := fs.String("format", "text", "text or json")
	group := fs.String("group", "", "consume as a member of this group")
	member := fs.String("member", "strata-cli", "requested member id with --group")
	wait := fs.Duration("wait", 200*time.Millisecond, "long-poll wait per CONSUME")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return parseExit(err)
	}
	if *topic == "" && len(pos) > 0 {
		*topic, pos = pos[0], pos[1:]
	}
	if *topic == "" || len(pos) > 0 {
		return usageError(stderr, fs, "one topic required")
	}
	if *format != "text" && *format != "json" {
		return usageError(stderr, fs, "--format must be text or json")
	}
	var fromOffset uint64
	fromNumeric := false
	if *from != "earliest" && *from != "latest" {
		n, err := strconv.ParseUint(*from, 10, 64)
		if err != nil {
			return usageError(stderr, fs, "--from must be earliest, latest or an offset")
		}
		fromOffset, fromNumeric = n, true
		if *group != "" {
			return usageError(stderr, fs, "--from OFFSET cannot be combined with --group (committed offsets decide)")
		}
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "consume", err)
	}
	defer c.Close()
	pr := printer{w: stdout, json: *format == "json"}
	waitMS := int(wait.Milliseconds())
	if *group != "" {
		return consumeGroup(ctx, c, stderr, &pr, client.ConsumerOptions{Group: *group, Topic: *topic, Member: *member,
			AutoOffsetReset: *from, WaitMS: waitMS}, *maxRecs, *follow)
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
	if *from == "latest" {
		los, err := c.ListOffsets(ctx, *topic, -1)
		if err != nil {
			return fail(stderr, "consume", err)
		}
		for _, lo := range los {
			next[lo.Partition] = lo.Latest
		}
	} else if fromNumeric {
		for _, p := range parts {
			next[p] = fromOffset
		}
	}
	empty := 0
	for i := 0; ctx.Err() == nil; i++ {
		p := parts[i%len(parts)]
		b, err := c.Consume(ctx, client.ConsumeRequest{Topic: *topic, Partition: p, Offset: next[p], WaitMS: waitMS})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fail(stderr, "consume", err)
		}
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
	for ctx.Err() == nil {
		recs, err := k.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			// Fencing answers schedule a rejoin inside the consumer.
			if e, ok := errcode.As(err); ok && (e.Retryable || e.Class == errcode.ClassFencing) {
				continue
			}
			return fail(stderr, "consume", err)
		}
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
				return exitOK
			}
		}
		if err := k.Commit(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "strata consume: commit failed: %v\n", err)
		}
	}
	return exitOK
}

type printer struct {
	w    io.Writer
	json bool
	n    int64
}

func (p *printer) print(r wire.Record) {
	p.n++
	if p.json {
		v := struct {
			Partition int32  `json:"partition"`
			Offset    uint64 `json:"offset"`
			Timestamp int64  `json:"timestamp,omitempty"`
			Key       string `json:"key,omitempty"`
			Value     string `json:"value"`
		}{r.Partition, r.Offset, r.Timestamp, r.Key, string(r.Payload)}
		out, _ := json.Marshal(v)
		fmt.Fprintln(p.w, string(out))
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
