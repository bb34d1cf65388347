package cli

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Markers of the generated command reference in docs/cli.md.
const (
	ReferenceBegin = "<!-- BEGIN GENERATED command reference: do not edit; regenerate with " +
		"`go test ./strata/cmd/strata -run TestCLIReference -update` -->"
	ReferenceEnd = "<!-- END GENERATED command reference -->"
)

// Reference is the markdown command reference of docs/cli.md, generated
// from the command tree: every command and subcommand, its usage and its
// flags. Flag defaults read from the environment (STRATA_ADDR, ...) show
// the environment's values, so generate it with those unset.
func Reference() string {
	tree := commandTree()
	fs := flag.NewFlagSet("conn", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addConnFlags(fs)
	conn := map[string]flagInfo{}
	for _, f := range flagInfos(fs) {
		conn[f.Name] = f
	}
	var b strings.Builder
	b.WriteString("## Command reference\n\n")
	b.WriteString("Global flags: `--output table|json|yaml` (" + outputHelp + "), `--help`/`-h`, `--version`.\n\n")
	b.WriteString("| command | summary |\n|---|---|\n")
	for _, n := range tree {
		fmt.Fprintf(&b, "| `strata %s` | %s |\n", n.Name, mdCell(n.Summary))
	}
	b.WriteString("\nConnection flags of every client command (listed below only where a command's default differs):\n")
	writeFlagTable(&b, flagInfos(fs))
	walk(tree, func(n *cmdNode) {
		if n.Help == "" && len(n.Flags) == 0 {
			return // server commands and groups without help of their own
		}
		parentShows := len(n.Path) > 1 && sameFlags(parentOf(tree, n).Subs)
		if parentShows && len(n.Subs) == 0 {
			return // the parent's section shows these flags
		}
		fmt.Fprintf(&b, "\n### `strata %s`\n", strings.Join(n.Path, " "))
		// A subcommand's usage is its parent's, shown once above it.
		if len(n.Path) == 1 || len(n.Subs) > 0 {
			usage, _, _ := strings.Cut(n.Help, "\nflags:\n")
			fmt.Fprintf(&b, "\n```text\n%s\n```\n", strings.TrimRight(usage, "\n"))
		}
		flags := n.Flags
		if len(n.Subs) > 1 && sameFlags(n.Subs) {
			flags = n.Subs[0].Flags
			fmt.Fprintf(&b, "\nFlags of every subcommand (%s):\n", subNames(n))
		}
		var own []flagInfo
		hasConn := false
		for _, f := range flags {
			if c, ok := conn[f.Name]; !ok || c != f {
				own = append(own, f)
			} else {
				hasConn = true
			}
		}
		switch {
		case len(own) > 0:
			writeFlagTable(&b, own)
		case hasConn:
			b.WriteString("\nConnection flags only.\n")
		case len(n.Subs) == 0:
			b.WriteString("\nNo flags.\n")
		}
	})
	return b.String()
}

func writeFlagTable(b *strings.Builder, flags []flagInfo) {
	if len(flags) == 0 {
		return
	}
	b.WriteString("\n| flag | value | default | description |\n|---|---|---|---|\n")
	for _, f := range flags {
		name := "`--" + f.Name + "`"
		if f.Short != "" {
			name = "`-" + f.Short + "`, " + name
		}
		def := ""
		if f.Default != "" {
			def = "`" + f.Default + "`"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", name, f.Type, def, mdCell(f.Usage))
	}
}

// sameFlags says whether several leaf subcommands share one flag set (the
// bench modes), so the reference lists it once.
func sameFlags(subs []*cmdNode) bool {
	if len(subs) < 2 {
		return false
	}
	for _, s := range subs {
		if len(s.Subs) > 0 || len(s.Flags) == 0 || !reflect.DeepEqual(s.Flags, subs[0].Flags) {
			return false
		}
	}
	return true
}

func parentOf(tree []*cmdNode, n *cmdNode) *cmdNode {
	var p *cmdNode
	walk(tree, func(c *cmdNode) {
		for _, s := range c.Subs {
			if s == n {
				p = c
			}
		}
	})
	if p == nil {
		return &cmdNode{}
	}
	return p
}

func subNames(n *cmdNode) string {
	var names []string
	for _, s := range n.Subs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// mdCell makes s safe inside a markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
