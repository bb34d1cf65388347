package load

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
)

const usage = `usage: strata bench produce|consume|e2e|groups|txn [flags]

Drives a Strata client listener (Wire v2) with synthetic records and reports
throughput (records/s, MB/s of payload) and latency percentiles.

  produce  publish batches for --duration or until --count records
  consume  read the topic from offset 0 until drained, --count or --duration
  e2e      produce and consume at once; adds send-to-receive latency
  groups   one group member per connection runs a --mix of COMMIT_OFFSET,
           BATCH_COMMIT, HEARTBEAT and FETCH_OFFSET (one request at a time)
           for --duration or --count operations, then --rejoins
           JOIN+SYNC+LEAVE cycles; per-command ops/s and latency
  txn      one transactional producer per connection runs transactions of
           --txn-size records (INIT_PRODUCER_ID, BEGIN_TXN, TXN_PUBLISH...,
           END_TXN commit) one after the other for --duration or --count
           transactions; transactions/s, commit and transaction latency

flags:
`

// FlagSetHook, when set, receives Main's flag set once it is defined (the
// CLI's help, completion and docs generator reads the flags from it).
var FlagSetHook func(*flag.FlagSet)

// Main runs `strata bench`; args[0] is the mode. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("strata bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	var cfg Config
	addr := fs.String("addr", envOr("STRATA_ADDR", "127.0.0.1:9000"), "server address host:port (env STRATA_ADDR)")
	fs.StringVar(&cfg.Topic, "topic", "strata-bench", "topic (created with --partitions when missing; groups: default strata-bench-groups)")
	fs.IntVar(&cfg.Partitions, "partitions", 4, "partitions of a created topic")
	fs.IntVar(&cfg.Conns, "conns", 4, "connections")
	fs.IntVar(&cfg.Inflight, "inflight", 4, "pipelined requests per connection: PUBLISHes; CONSUMEs over different partitions (not used by groups)")
	fs.IntVar(&cfg.RecordSize, "record-size", 100, "payload bytes per record (min 8)")
	fs.IntVar(&cfg.BatchSize, "batch", 100, "records per PUBLISH batch")
	fs.StringVar(&cfg.Acks, "acks", "1", "acks: 0, 1, all")
	comp := fs.String("compression", "none", "compression to negotiate: none, gzip, snappy, lz4")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "run time (0 with --count: until count)")
	fs.Int64Var(&cfg.Count, "count", 0, "stop after this many records (groups: operations; txn: transactions; 0: duration only)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "records per second over all connections (0: unlimited)")
	fs.StringVar(&cfg.Group, "group", "", "group sent with CONSUME (committed offsets take precedence)")
	fs.IntVar(&cfg.BatchEntries, "batch-entries", 1024, "groups: entries per BATCH_COMMIT (max 1024); a created topic gets at least this many partitions")
	mix := fs.String("mix", DefaultMix.String(), "groups: command weights, e.g. commit=3,fetch=1 (unlisted or 0: not sent)")
	fs.IntVar(&cfg.Rejoins, "rejoins", 20, "groups: JOIN+SYNC+LEAVE cycles per connection after the timed loop")
	fs.BoolVar(&cfg.KeepGroups, "keep-groups", false, "groups: keep the run's groups (default: deleted at the end)")
	fs.IntVar(&cfg.TxnSize, "txn-size", 10, "txn: records per transaction")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	progress := fs.String("progress", "auto", "progress line every second on stderr (records/s, MB/s, p99 so far): auto (when stderr is a terminal), always, never")
	timeout := fs.Duration("timeout", 30*time.Second, "per-request timeout")
	tlsCA := fs.String("tls-ca", "", "CA bundle (PEM) to verify the server; enables TLS (default: env STRATA_CLIENT_TLS_CA)")
	tlsCert := fs.String("tls-cert", "", "client certificate (PEM), with --tls-key (default: env STRATA_CLIENT_TLS_CERT)")
	tlsKey := fs.String("tls-key", "", "client key (PEM) (default: env STRATA_CLIENT_TLS_KEY)")
	tlsName := fs.String("tls-server-name", "", "server name to verify (default: env STRATA_CLIENT_TLS_SERVER_NAME, else the host of --addr)")
	tlsInsecure := fs.Bool("tls-insecure", false, "TLS without verifying the server (testing only)")
	principal := fs.String("principal", os.Getenv("STRATA_PRINCIPAL"), "AUTH principal (env STRATA_PRINCIPAL)")
	token := fs.String("token", "", "AUTH token (default: env STRATA_TOKEN; read after parsing so help never prints it)")
	if FlagSetHook != nil {
		FlagSetHook(fs)
	}
	// Help goes to stdout and is success; a missing mode is a usage error.
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) || (len(args) > 0 && args[0] == "help") {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs.Usage()
		return 2
	}
	cfg.Mode = args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	c, ok := wire.ParseCompression(*comp)
	if !ok {
		fmt.Fprintf(stderr, "strata bench: unknown compression %q\n", *comp)
		return 2
	}
	cfg.Addr = *addr
	env := client.TLSFilesFromEnv() // flag defaults, read after parsing (help shows no environment)
	tc, err := ClientTLS(cmp.Or(*tlsCA, env.CA), cmp.Or(*tlsCert, env.Cert), cmp.Or(*tlsKey, env.Key), cmp.Or(*tlsName, env.ServerName), *tlsInsecure)
	if err != nil {
		fmt.Fprintf(stderr, "strata bench: %v\n", err)
		return 2
	}
	if *token == "" {
		*token = os.Getenv("STRATA_TOKEN")
	}
	cfg.Client = client.Options{Compressions: []wire.Compression{c}, RequestTimeout: *timeout, ClientID: "strata-bench",
		TLS: tc, Principal: *principal, Token: *token}
	if cfg.Mode != ModeProduce && cfg.Mode != ModeConsume && cfg.Mode != ModeE2E && cfg.Mode != ModeGroups && cfg.Mode != ModeTxn {
		fmt.Fprintf(stderr, "strata bench: unknown mode %q\n", cfg.Mode)
		fs.Usage()
		return 2
	}
	if cfg.Mode == ModeGroups {
		if cfg.Mix, err = ParseMix(*mix); err != nil {
			fmt.Fprintf(stderr, "strata bench: %v\n", err)
			return 2
		}
		topicSet := false
		fs.Visit(func(f *flag.Flag) { topicSet = topicSet || f.Name == "topic" })
		if !topicSet {
			cfg.Topic = "" // Defaults picks the groups mode's own topic
		}
	}
	switch *progress {
	case "auto":
		if isTerminal(stderr) {
			cfg.Progress = stderr
		}
	case "always":
		cfg.Progress = stderr
	case "never":
	default:
		fmt.Fprintf(stderr, "strata bench: --progress must be auto, always or never\n")
		return 2
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "strata bench: %v\n", err)
		return 1
	}
	if *jsonOut {
		if err := WriteJSON(stdout, res); err != nil {
			return 1
		}
	} else {
		WriteText(stdout, res)
	}
	if n := res.Failures(); n > 0 {
		fmt.Fprintf(stderr, "strata bench: %d requests failed (or offsets mismatched): see the report\n", n)
		return 1
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
