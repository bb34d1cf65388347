// Command strata is the all-in-one Strata server (`strata run`: metad,
// partitiond, coordinatord and gateway in one process) and the user CLI
// (certificates, topics, produce/consume, groups, cluster status, load tool).
package main

import (
	"io"
	"os"
	"slices"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/strata/internal/allinone"
	"github.com/strataio/strata/strata/internal/cli"
	"github.com/strataio/strata/strata/internal/tracesink"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// The commands main runs itself; cli lists them in help, suggestions,
// completion and docs/cli.md, and dispatches everything.
func init() {
	cli.ServerCommands = []cli.ServerCommand{
		{Name: "run", Summary: "run every role in one process (embedded defaults, data in --data-dir)", Run: helpOnStdout(allinone.Main)},
		{Name: "healthcheck", Summary: "probe a /ready URL; exit 0 only on HTTP 200",
			Run: helpOnStdout(func(args []string, _, stderr io.Writer) int { return node.Healthcheck(args, stderr) })},
		{Name: "trace-sink", Summary: "development: receive OTLP/gRPC traces (plaintext, --listen :4317); print one JSON line per span",
			Run: helpOnStdout(tracesink.Main)},
	}
}

// helpOnStdout gives the server commands, whose flag sets print help on
// stderr (healthcheck also exits 2), the CLI's rule: --help is printed on
// stdout and is success. A flag set stops at --help before doing anything.
func helpOnStdout(run func(args []string, stdout, stderr io.Writer) int) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		if !slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
			return run(args, stdout, stderr)
		}
		if code := run(args, stdout, stdout); code != 0 && code != 2 {
			return code
		}
		return 0
	}
}

func run(args []string, stdout, stderr io.Writer) int { return cli.Main(args, stdout, stderr) }
