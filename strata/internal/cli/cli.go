// Package cli holds the user subcommands of the `strata` binary: certificate
// setup (certs), topic administration (topic), producing and consuming
// records (produce, consume), consumer groups (group), cluster status
// (cluster) and the load tool (bench). Every client subcommand talks Wire v2
// through libs/client; the lead's main dispatches to Main.
package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
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
		"auth":       {"client authentication: hash-token prints a token hash for sasl_principals", runAuth},
		"certs":      {"create the cluster CA and node certificates", runCerts},
		"topic":      {"create, list, describe or delete topics", runTopic},
		"produce":    {"publish records from stdin lines or synthetic (--count)", runProduce},
		"consume":    {"print records of a topic (optionally as a group member)", runConsume},
		"group":      {"consumer groups: status, describe, list, delete, reset-offsets", runGroup},
		"cluster":    {"cluster status summary and node list", runCluster},
		"bench":      {"load tool: produce, consume, e2e, groups, txn throughput and latency", runBench},
		"stream":     {"event-sourcing streams: append, read, version, snapshot, proof, range (JSON output)", runStream},
		"browse":     {"print committed records of a partition outside any group (JSON)", runBrowse},
		"version":    {"print the version", runVersion},
		"completion": {"print a bash, zsh or fish completion script", runCompletion},
		"txn":        {"transactions: list open ones, abort a hanging one", runTxn},
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

// Usage writes the summary of every command and the global flags.
func Usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: strata <command> [flags]")
	if len(ServerCommands) > 0 {
		fmt.Fprintln(w, "\nServer and tools:")
		for _, s := range ServerCommands {
			fmt.Fprintf(w, "  %-12s %s\n", s.Name, s.Summary)
		}
	}
	fmt.Fprintln(w, "\nClient commands:")
	for _, name := range Commands() {
		fmt.Fprintf(w, "  %-12s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nGlobal flags:")
	fmt.Fprintf(w, "  --output table|json|yaml  %s\n", outputHelp)
	fmt.Fprintln(w, "  --version                 print the version")
	fmt.Fprintln(w, "\nRun 'strata help <command>' or 'strata <command> --help' for its flags. Client")
	fmt.Fprintln(w, "commands take --addr (default 127.0.0.1:9000, env STRATA_ADDR).")
}

// Main runs the command args[0] with the rest of args and returns the
// exit code: 0 success, 1 failure, 2 usage error. Server commands run as
// they are; for the others SIGINT/SIGTERM cancel the command (consume
// --follow and bench stop cleanly and print what they have).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if s, ok := serverCommand(args[0]); ok {
			return s.Run(args[1:], stdout, stderr)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return MainContext(ctx, args, stdout, stderr)
}

// MainContext is Main with a caller's context (tests, embedding). It takes
// the global flags (--output anywhere, --help and --version first) and
// dispatches the command.
func MainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format, args, err := extractOutput(args)
	if err != nil {
		fmt.Fprintf(stderr, "strata: %v\n", err)
		return exitUsage
	}
	stdout = &outWriter{Writer: stdout, format: format}
	stderr = &errOut{Writer: stderr, stdout: stdout}
	if len(args) == 0 {
		Usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		Usage(stdout)
		return exitOK
	case "-version", "--version":
		return runVersion(ctx, nil, stdout, stderr)
	case "help":
		// strata help topic create = strata topic create --help.
		if len(args) == 1 {
			Usage(stdout)
			return exitOK
		}
		return MainContext(ctx, append([]string{"--output", format}, append(slices.Clip(args[1:]), "--help")...), stdout, stderr)
	}
	if s, ok := serverCommand(args[0]); ok {
		return s.Run(args[1:], stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "strata: unknown command %q\n%sRun 'strata --help' for the commands.\n", args[0], didYouMean(args[0], allCommandNames()))
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
	// The TLS files' defaults come from the environment after parsing
	// (options), so help and the generated reference do not depend on it.
	fs.StringVar(&c.tlsCA, "tls-ca", "", "CA bundle (PEM) to verify the server; enables TLS (default: env STRATA_CLIENT_TLS_CA)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "client certificate (PEM), with --tls-key (default: env STRATA_CLIENT_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "client key (PEM) (default: env STRATA_CLIENT_TLS_KEY)")
	fs.StringVar(&c.tlsName, "tls-server-name", "", "server name to verify (default: env STRATA_CLIENT_TLS_SERVER_NAME, else the host of --addr)")
	fs.BoolVar(&c.tlsInsecure, "tls-insecure", false, "TLS without verifying the server (testing only)")
	fs.StringVar(&c.principal, "principal", os.Getenv("STRATA_PRINCIPAL"), "AUTH principal (env STRATA_PRINCIPAL)")
	// The token's default is read after parsing, not shown: help must not
	// print a secret.
	fs.StringVar(&c.token, "token", "", "AUTH token (default: env STRATA_TOKEN)")
	return c
}

func (c *connFlags) options() (client.Options, error) {
	comp, ok := wire.ParseCompression(c.compression)
	if !ok {
		return client.Options{}, fmt.Errorf("unknown compression %q", c.compression)
	}
	if c.token == "" {
		c.token = os.Getenv("STRATA_TOKEN")
	}
	o := client.Options{Compressions: []wire.Compression{comp}, RequestTimeout: c.timeout, ClientID: "strata-cli",
		Principal: c.principal, Token: c.token}
	env := client.TLSFilesFromEnv()
	tc, err := load.ClientTLS(cmp.Or(c.tlsCA, env.CA), cmp.Or(c.tlsCert, env.Cert), cmp.Or(c.tlsKey, env.Key), cmp.Or(c.tlsName, env.ServerName), c.tlsInsecure)
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
		if err := parseFlags(fs, args); err != nil {
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

// parseFlagsOnly parses args, which must not hold positionals; an argument
// left over is printed with the usage and returned as errUsage.
func parseFlagsOnly(fs *flag.FlagSet, args []string) error {
	pos, err := parseArgs(fs, args)
	if err == nil && len(pos) > 0 {
		err = badUsage(fs, "unexpected argument %q", pos[0])
	}
	return err
}

// parseCount parses args and requires exactly want positionals; another
// count is printed with the usage and returned as errUsage.
func parseCount(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	pos, err := parseArgs(fs, args)
	if err == nil && len(pos) != want {
		err = badUsage(fs, "expected %d argument(s), got %d", want, len(pos))
	}
	return pos, err
}

// parseTopic parses args of a command on one topic, given by the flag
// topic points at or as the only positional; anything else is printed with
// the usage and returned as errUsage.
func parseTopic(fs *flag.FlagSet, args []string, topic *string) error {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *topic == "" && len(pos) > 0 {
		*topic, pos = pos[0], pos[1:]
	}
	if *topic == "" || len(pos) > 0 {
		return badUsage(fs, "one topic required")
	}
	return nil
}

// subcommand returns the subcommand args[0] of a command that has
// subcommands (certs, topic, group, cluster). For none, or a request for
// help, it prints usage (to stderr, or to stdout for help) and ok is false:
// the command ends with code.
func subcommand(args []string, usage string, stdout, stderr io.Writer) (sub string, code int, ok bool) {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return "", exitUsage, false
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return "", exitOK, false
	}
	return args[0], exitOK, true
}

// unknownSubcommand refuses sub, which command does not have, naming the
// closest subcommand its usage lists.
func unknownSubcommand(stderr io.Writer, command, sub, usage string) int {
	var names []string
	for _, path := range usageSubcommands(command, usage) {
		names = append(names, path[0])
	}
	fmt.Fprintf(stderr, "strata %s: unknown subcommand %q\n%s\n%s", command, sub, didYouMean(sub, names), usage)
	return exitUsage
}

// newFlagSet is the flag set of a command: usage is printed with the flags
// (short aliases beside their long names), to stdout for --help and to
// stderr for a refused command line (see parseFlags).
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, usage)
		fmt.Fprintln(w, "\nflags:")
		printFlags(w, fs)
		fmt.Fprintln(w, "\nglobal flags:")
		fmt.Fprintf(w, "      --output string\n        %s (default \"table\")\n", outputHelp)
	}
	recordFlagSet(fs)
	return fs
}

// errUsage is a command line refused after parsing; the refusal and the
// usage have been printed.
var errUsage = errors.New("usage error")

// badUsage prints a refused command line as usageError does and returns
// errUsage, for the parse helpers.
func badUsage(fs *flag.FlagSet, format string, args ...any) error {
	usageError(fs.Output(), fs, format, args...)
	return errUsage
}

// parseExit maps an error of parsing (the flag package's or errUsage) to an
// exit code (-h is success).
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

// runBench runs the load tool, whose report honours --output: json is its
// own --json report, yaml that report converted.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The load tool shows progress when its stderr is a terminal: hand it
	// the stderr itself, not our wrapper (help goes to stdout there too).
	if e, ok := stderr.(*errOut); ok {
		stderr = e.Writer
	}
	switch outputFormat(stdout) {
	case fmtJSON:
		return load.Main(ctx, append(slices.Clip(args), "--json"), stdout, stderr)
	case fmtYAML:
		var report bytes.Buffer
		code := load.Main(ctx, append(slices.Clip(args), "--json"), &report, stderr)
		if report.Len() > 0 {
			emitRaw(withFormat(stdout, fmtYAML), report.Bytes(), nil)
		}
		return code
	}
	return load.Main(ctx, args, stdout, stderr)
}

// printJSON prints a JSON reply indented (or as YAML with --output yaml).
func printJSON(w io.Writer, raw []byte) { emitRaw(w, raw, nil) }

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
