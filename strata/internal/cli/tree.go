package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strataio/strata/strata/internal/load"
)

// ServerCommand is a command the binary's main runs outside this package
// (run, healthcheck, trace-sink). Main dispatches it before anything else
// (no signal handling of ours: servers handle their own); it is listed in
// help, suggestions, completion and docs/cli.md.
type ServerCommand struct {
	Name, Summary string
	Run           func(args []string, stdout, stderr io.Writer) int
}

// ServerCommands are set by the binary's main before Main runs.
var ServerCommands []ServerCommand

func serverCommand(name string) (ServerCommand, bool) {
	for _, s := range ServerCommands {
		if s.Name == name {
			return s, true
		}
	}
	return ServerCommand{}, false
}

// allCommandNames lists every top-level command, sorted.
func allCommandNames() []string {
	names := Commands()
	for _, s := range ServerCommands {
		names = append(names, s.Name)
	}
	names = append(names, "help")
	sort.Strings(names)
	return slices.Compact(names)
}

// cmdNode is one command of the command tree that help, completion and
// docs/cli.md are generated from.
type cmdNode struct {
	Name    string
	Path    []string // the words after "strata"
	Summary string
	Help    string // what --help prints (flags included); "" for server commands
	Flags   []flagInfo
	Subs    []*cmdNode
}

// The tree is not declared twice: it is read from the commands themselves.
// Subcommands are the lowercase words after "strata CMD" in a command's
// usage lines; flags are those of the flag set a command builds when run
// with --help (newFlagSet records it while a tree is being built).
var (
	treeMu  sync.Mutex // one tree build at a time
	flagRec struct {
		sync.Mutex
		on   bool
		sets []*flag.FlagSet
	}
)

func recordFlagSet(fs *flag.FlagSet) {
	flagRec.Lock()
	defer flagRec.Unlock()
	if flagRec.on {
		flagRec.sets = append(flagRec.sets, fs)
	}
}

// captureHelp runs strata ARGS --help and returns what it printed on
// stdout and the last flag set it built. A command stops at --help before
// doing anything; should one not, it finds no input and a short deadline.
func captureHelp(args []string) (string, *flag.FlagSet) {
	flagRec.Lock()
	flagRec.on, flagRec.sets = true, nil
	flagRec.Unlock()
	load.FlagSetHook = recordFlagSet
	savedStdin := stdin
	stdin = strings.NewReader("")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	var out bytes.Buffer
	_ = MainContext(ctx, append(slices.Clip(args), "--help"), &out, io.Discard)
	cancel()
	stdin = savedStdin
	load.FlagSetHook = nil
	flagRec.Lock()
	defer flagRec.Unlock()
	flagRec.on = false
	var fs *flag.FlagSet
	if n := len(flagRec.sets); n > 0 {
		fs = flagRec.sets[n-1]
	}
	flagRec.sets = nil
	return out.String(), fs
}

// commandTree builds the tree of every command, sorted by name.
func commandTree() []*cmdNode {
	treeMu.Lock()
	defer treeMu.Unlock()
	var out []*cmdNode
	for _, s := range ServerCommands {
		out = append(out, &cmdNode{Name: s.Name, Path: []string{s.Name}, Summary: s.Summary})
	}
	for _, name := range Commands() {
		out = append(out, buildNode([]string{name}, commands[name].summary, ""))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// buildNode builds the node at path; a group of subcommands without help
// of its own ("stream snapshot") is read from its parent's usage.
func buildNode(path []string, summary, parentHelp string) *cmdNode {
	n := &cmdNode{Name: path[len(path)-1], Path: path, Summary: summary}
	help, fs := captureHelp(path)
	n.Help = help
	if help == "" {
		help = parentHelp
	}
	subs := usageSubcommands(strings.Join(path, " "), help)
	if len(subs) == 0 {
		if fs != nil {
			n.Flags = flagInfos(fs)
		}
		return n
	}
	seen := map[string]bool{}
	for _, s := range subs {
		if seen[s[0]] {
			continue
		}
		seen[s[0]] = true
		n.Subs = append(n.Subs, buildNode(append(slices.Clip(path), s[0]), "", help))
	}
	return n
}

var usageWord = regexp.MustCompile(`^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$`)

// usageSubcommands reads the subcommands of command from its usage text:
// in every line "strata COMMAND WORD ...", WORD is a subcommand when it is
// lowercase ("a|b|c" lists several); uppercase words are arguments.
func usageSubcommands(command, usage string) [][]string {
	prefix := "strata " + command + " "
	var out [][]string
	for _, line := range strings.Split(usage, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "usage:"))
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		words := strings.Fields(rest)
		if len(words) == 0 || !usageWord.MatchString(words[0]) {
			continue
		}
		for _, w := range strings.Split(words[0], "|") {
			if !slices.ContainsFunc(out, func(p []string) bool { return p[0] == w }) {
				out = append(out, []string{w})
			}
		}
	}
	return out
}

// walk calls f on every node of the tree, parents first.
func walk(nodes []*cmdNode, f func(*cmdNode)) {
	for _, n := range nodes {
		f(n)
		walk(n.Subs, f)
	}
}
