// Command strata is the all-in-one Strata server (`strata run`: metad,
// partitiond, coordinatord and gateway in one process) and the user CLI
// (certificates, topics, produce/consume, groups, cluster status, load tool).
package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/strata/internal/allinone"
	"github.com/strataio/strata/strata/internal/cli"
	"github.com/strataio/strata/strata/internal/tracesink"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch cmd := args[0]; {
	case cmd == "run":
		return allinone.Main(args[1:], stdout, stderr)
	case cmd == "healthcheck":
		return node.Healthcheck(args[1:], stderr)
	case cmd == "trace-sink":
		return tracesink.Main(args[1:], stdout, stderr)
	case cmd == "help" || cmd == "-h" || cmd == "--help":
		usage(stdout)
		return 0
	case slices.Contains(cli.Commands(), cmd):
		return cli.Main(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "strata: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: strata <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Server:")
	fmt.Fprintln(w, "  run          run every role in one process (embedded defaults, data in --data-dir)")
	fmt.Fprintln(w, "  healthcheck  probe a /ready URL; exit 0 only on HTTP 200")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Client and tools (use `strata <command> --help`):")
	for _, c := range cli.Commands() {
		fmt.Fprintf(w, "  %s\n", c)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Development:")
	fmt.Fprintln(w, "  trace-sink   receive OTLP/gRPC traces (plaintext, --listen :4317); print one JSON line per span")
}
