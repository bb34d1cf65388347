// Package cli holds the user subcommands of the `strata` binary: certificate
// setup (certs), topic administration (topic), producing and consuming
// records (produce, consume), consumer groups (group), cluster status
// (cluster) and the load tool (bench). Every client subcommand talks Wire v2
// through libs/client; the lead's main dispatches to Main.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/internal/load"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed (server error, I/O)
	exitUsage = 2 // bad command line
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"certs":   {"create the cluster CA and node certificates", runCerts},
		"topic":   {"create, list, describe or delete topics", runTopic},
		"produce": {"publish records from stdin lines or synthetic (--count)", runProduce},
		"consume": {"print records of a topic (optionally as a group member)", runConsume},
		"group":   {"consumer groups: status, describe, list, delete, reset-offsets", runGroup},
		"cluster": {"cluster status", runCluster},
		"bench":   {"load tool: produce, consume, e2e, groups throughput and latency", runBench},
	}
}

// Commands lists the subcommands Main handles, sorted.
func Commands() []string {
	out := make([]string, 0, len(commands))
	for k := range commands {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Usage writes the summary of the user subcommands (the lead's main adds its
// own commands, such as run, around it).
func Usage(w io.Writer) {
	fmt.Fprintln(w, "user commands:")
	for _, name := range Commands() {
		fmt.Fprintf(w, "  %-8s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'strata <command> -h' for the flags of a command. Client commands take")
	fmt.Fprintln(w, "--addr (default 127.0.0.1:9000, env STRATA_ADDR).")
}

// Main runs the subcommand args[0] with the rest of args and returns the
// exit code: 0 success, 1 failure, 2 usage error. SIGINT/SIGTERM cancel the
// command (consume --follow and bench stop cleanly and print what they have).
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return MainContext(ctx, args, stdout, stderr)
}

// MainContext is Main with a caller's context (tests, embedding).
func MainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		Usage(stderr)
		return exitUsage
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "strata: unknown command %q\n\n", args[0])
		Usage(stderr)
		return exitUsage
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

// connFlags are the connection flags every client subcommand takes.
type connFlags struct {
	addr, compression               string
	timeout                         time.Duration
	tlsCA, tlsCert, tlsKey, tlsName string
	tlsInsecure                     bool
	principal, token                string
}

func addConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{}
	fs.StringVar(&c.addr, "addr", envOr("STRATA_ADDR", "127.0.0.1:9000"), "server address host:port (env STRATA_ADDR)")
	fs.StringVar(&c.compression, "compression", "none", "compression to negotiate: none, gzip, snappy, lz4")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "CA bundle (PEM) to verify the server; enables TLS")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "client certificate (PEM), with --tls-key")
	fs.StringVar(&c.tlsKey, "tls-key", "", "client key (PEM)")
	fs.StringVar(&c.tlsName, "tls-server-name", "", "server name to verify (default: host of --addr)")
	fs.BoolVar(&c.tlsInsecure, "tls-insecure", false, "TLS without verifying the server (testing only)")
	fs.StringVar(&c.principal, "principal", os.Getenv("STRATA_PRINCIPAL"), "AUTH principal (env STRATA_PRINCIPAL)")
	fs.StringVar(&c.token, "token", os.Getenv("STRATA_TOKEN"), "AUTH token (env STRATA_TOKEN)")
	return c
}

func (c *connFlags) options() (client.Options, error) {
	comp, ok := wire.ParseCompression(c.compression)
	if !ok {
		return client.Options{}, fmt.Errorf("unknown compression %q", c.compression)
	}
	o := client.Options{Compressions: []wire.Compression{comp}, RequestTimeout: c.timeout, ClientID: "strata-cli",
		Principal: c.principal, Token: c.token}
	tc, err := load.ClientTLS(c.tlsCA, c.tlsCert, c.tlsKey, c.tlsName, c.tlsInsecure)
	if err != nil {
		return o, err
	}
	o.TLS = tc
	return o, nil
}

func (c *connFlags) dial(ctx context.Context) (*client.Client, error) {
	o, err := c.options()
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, c.addr, o)
}

// parseArgs parses flags and positionals in any order ("topic create orders
// --partitions 3" and "topic create --partitions 3 orders" both work), which
// the flag package alone does not allow.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseExit maps a flag parse error to an exit code (-h is success).
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// fail prints err, typed errors in their readable form, and returns 1.
func fail(stderr io.Writer, name string, err error) int {
	if e, ok := errcode.As(err); ok {
		fmt.Fprintf(stderr, "strata %s: %s\n", name, e.Error())
		return exitError
	}
	fmt.Fprintf(stderr, "strata %s: %v\n", name, err)
	return exitError
}

func usageError(stderr io.Writer, fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return load.Main(ctx, args, stdout, stderr)
}

// sortedPairs renders reply fields as aligned "key: value" lines.
func sortedPairs(w io.Writer, fields []wire.Field) {
	width := 0
	for _, f := range fields {
		width = max(width, len(f.Key))
	}
	for _, f := range fields {
		fmt.Fprintf(w, "%-*s  %s\n", width+1, f.Key+":", f.Value)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
