package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
)

// stdin is where produce reads lines; tests replace it.
var stdin io.Reader = os.Stdin

const produceUsage = `usage:
  strata produce TOPIC [--partition N] [--key K | --key-separator SEP] [--acks 0|1|all]
                       [--idempotent] [--batch N] [--linger D]
  strata produce TOPIC --count N [--size BYTES] ...
  strata produce TOPIC --value-file FILE [--key-file FILE | --key K] ...

Without --count every line of standard input becomes one record (the line
without its newline). --key-separator splits each line into key and value at
the first SEP. With --count, N synthetic records of --size bytes are sent.
--value-file sends one record whose value is the file's bytes exactly
("-": all of standard input), binary included; --key-file reads the key of
every record from a file the same way.
Records go through the batching Producer (batch frames, not text PUBLISH).

--header is refused: Wire v2 records have no headers (the record's optional
fields are timestamp, producer, key, event-sourcing and transaction fields).
`

func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata produce", produceUsage, stderr)
	cf := addConnFlags(fs)
	topic := fs.String("topic", "", "topic (or the first argument)")
	partition := fs.Int("partition", -1, "partition (-1: by key hash, round robin without key)")
	key := fs.String("key", "", "key of every record")
	keySep := fs.String("key-separator", "", "split each line into key and value at this separator")
	acks := fs.String("acks", "1", "acks: 0, 1, all")
	idem := fs.Bool("idempotent", false, "idempotent producer (producer id, epoch, sequences; needs acks=all)")
	count := fs.Int64("count", 0, "send N synthetic records instead of reading stdin")
	size := fs.Int("size", 100, "synthetic record size in bytes")
	batch := fs.Int("batch", 1000, "records per batch")
	linger := fs.Duration("linger", 5*time.Millisecond, "how long a partial batch waits for more records")
	keyFile := fs.String("key-file", "", "read the key of every record from FILE (exact bytes)")
	valueFile := fs.String("value-file", "", "send one record whose value is FILE's bytes (\"-\": standard input)")
	for short, long := range map[string]string{"t": "topic", "p": "partition", "k": "key", "n": "count"} {
		alias(fs, short, long)
	}
	var headers listFlag
	fs.Var(&headers, "header", "record header k=v (repeatable; refused: Wire v2 records carry no headers)")
	if err := parseTopic(fs, args, topic); err != nil {
		return parseExit(err)
	}
	if len(headers) > 0 {
		return fail(stderr, "produce", errcode.UnsupportedFeature.New("Wire v2 records have no headers field "+
			"(optional record fields: timestamp, producer, key, event_type, schema_version, aggregate_version, metadata, "+
			"transaction and control fields, event_id, payload_digest); put the data in the key or the value",
			"option", "--header", "header", headers[0]))
	}
	if *keyFile != "" && (*key != "" || *keySep != "") {
		return usageError(stderr, fs, "--key-file cannot be combined with --key or --key-separator")
	}
	if *valueFile != "" && (*count > 0 || *keySep != "") {
		return usageError(stderr, fs, "--value-file cannot be combined with --count or --key-separator")
	}
	if *keyFile != "" {
		b, err := readFileArg(*keyFile)
		if err != nil {
			return fail(stderr, "produce", err)
		}
		*key = string(b)
	}
	var value []byte
	if *valueFile != "" {
		b, err := readFileArg(*valueFile)
		if err != nil {
			return fail(stderr, "produce", err)
		}
		value = b
	}
	if *idem && *acks != "all" && *acks != "-1" {
		if *acks != "1" {
			return usageError(stderr, fs, "--idempotent needs --acks all")
		}
		*acks = "all"
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "produce", err)
	}
	defer c.Close()
	p := client.NewProducer(c, client.ProducerOptions{Acks: *acks, Idempotent: *idem, BatchRecords: *batch, Linger: *linger})
	var results []*client.Result
	var sent int64
	send := func(k string, v []byte) error {
		r, err := p.Send(ctx, client.Message{Topic: *topic, Partition: int32(*partition), Key: k, Value: v})
		if err != nil {
			return err
		}
		sent++
		results = append(results, r)
		// Keep memory bounded on long inputs: settle the results so far
		// (every one of them, so no delivery error goes unreported).
		if len(results) >= 10000 {
			for _, r := range results {
				if _, err := r.Wait(ctx); err != nil {
					return err
				}
			}
			results = results[:0]
		}
		return nil
	}
	start := time.Now()
	if *valueFile != "" {
		if err := send(*key, value); err != nil {
			_ = p.Close(context.Background())
			return fail(stderr, "produce", err)
		}
	} else if *count > 0 {
		payload := []byte(strings.Repeat("x", max(*size, 0)))
		for i := int64(0); i < *count && ctx.Err() == nil; i++ {
			if err := send(*key, payload); err != nil {
				_ = p.Close(context.Background())
				return fail(stderr, "produce", err)
			}
		}
	} else {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() && ctx.Err() == nil {
			line := sc.Text()
			k, v := *key, line
			if *keySep != "" {
				if a, b, ok := strings.Cut(line, *keySep); ok {
					k, v = a, b
				}
			}
			if err := send(k, []byte(v)); err != nil {
				_ = p.Close(context.Background())
				return fail(stderr, "produce", err)
			}
		}
		if err := sc.Err(); err != nil {
			_ = p.Close(context.Background())
			return fail(stderr, "produce", err)
		}
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), cf.timeout+5*time.Second)
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		return fail(stderr, "produce", err)
	}
	for _, r := range results {
		if r.Err != nil {
			return fail(stderr, "produce", r.Err)
		}
	}
	took := time.Since(start)
	emit(stdout, map[string]any{"topic": *topic, "records": sent, "acks": *acks, "duration_ms": took.Milliseconds()}, func() {
		fmt.Fprintf(stdout, "produced %d records to %s (acks=%s) in %s\n", sent, *topic, *acks, took.Round(time.Millisecond))
	})
	return exitOK
}

// readFileArg reads FILE, or standard input for "-".
func readFileArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
