package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/strataio/strata/coordinatord"
	"github.com/strataio/strata/gateway"
	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/metad"
	"github.com/strataio/strata/partitiond"
)

// externalFlags are flags the docs show for other tools, with the tool.
var externalFlags = map[string]string{
	"profile":          "docker compose",
	"remove-orphans":   "docker compose down",
	"set":              "helm",
	"create-namespace": "helm install",
	"strict":           "helm lint",
	"from-file":        "kubectl create secret",
	"describe":         "kafka-consumer-groups",
	"delete":           "kafka-consumer-groups",
	"reset-offsets":    "kafka-consumer-groups",
	"help":             "every binary (the flag package's -h/--help)",
	"fllow":            "docs/cli.md: the misspelt flag of the typo-suggestion example",
}

// strataCommands are the command lines whose flag sets the docs may name:
// every `strata` command and subcommand (their -h prints the flags).
var strataCommands = [][]string{
	{"run"}, {"healthcheck"}, {"trace-sink"}, {"auth", "hash-token"},
	{"certs", "init"}, {"certs", "issue"}, {"certs", "ensure"},
	{"topic", "create"}, {"topic", "list"}, {"topic", "describe"}, {"topic", "delete"},
	{"produce"}, {"consume"}, {"browse"},
	{"group", "status"}, {"group", "describe"}, {"group", "list"}, {"group", "delete"}, {"group", "reset-offsets"},
	{"cluster", "status"}, {"cluster", "list"},
	{"bench", "produce"}, {"bench", "consume"}, {"bench", "e2e"}, {"bench", "groups"}, {"bench", "txn"},
	{"stream", "append"}, {"stream", "read"}, {"stream", "version"}, {"stream", "snapshot", "save"}, {"stream", "snapshot", "get"}, {"stream", "proof"}, {"stream", "range"},
}

// flagLine is a flag of a command's -h output
// ("  -name value", or "  -f, --name value" with a short form).
var flagLine = regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?-{1,2}([a-zA-Z0-9][a-zA-Z0-9._-]*)`)

// knownFlags is every flag of the strata binary's commands and of the role
// binaries (node.Common plus the role's section, as each cmd/<role> builds
// its configuration).
func knownFlags(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	for _, args := range strataCommands {
		var out, errb bytes.Buffer
		run(append(append([]string{}, args...), "-h"), &out, &errb)
		found := flagLine.FindAllStringSubmatch(out.String()+errb.String(), -1)
		if len(found) == 0 {
			t.Fatalf("strata %s -h lists no flags:\n%s%s", strings.Join(args, " "), out.String(), errb.String())
		}
		for _, m := range found {
			known[m[1]] = true
		}
	}
	roles := struct {
		node.Common  `yaml:",inline"`
		Metad        metad.Config        `yaml:"metad"`
		Partitiond   partitiond.Config   `yaml:"partitiond"`
		Coordinatord coordinatord.Config `yaml:"coordinatord"`
		Gateway      gateway.Config      `yaml:"gateway"`
	}{Common: node.DefaultCommon(9000), Metad: metad.DefaultConfig(), Partitiond: partitiond.DefaultConfig(),
		Coordinatord: coordinatord.DefaultConfig(), Gateway: gateway.DefaultConfig()}
	l, err := config.New(&roles)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("roles", flag.ContinueOnError)
	fs.String("config", "", "") // node.Main's own
	l.RegisterFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { known[f.Name] = true })
	return known
}

// docFlag is a --flag in prose or examples: not inside a word, up to '=',
// a space or punctuation. A trailing '.' (`--gateway.<key>`) is a prefix.
var docFlag = regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])--([a-zA-Z][a-zA-Z0-9._-]*)`)

// TestDocumentedFlagsExist: every --flag that docs/*.md and README.md name
// is a flag of a Strata binary (or of another tool listed in
// externalFlags). The docs wrote flags with underscores (YAML keys) where
// the binaries take dashes.
func TestDocumentedFlagsExist(t *testing.T) {
	known := knownFlags(t)
	root := filepath.Join("..", "..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs found under %s: %v", root, err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	var bad []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range docFlag.FindAllStringSubmatch(line, -1) {
				name := m[1]
				if prefix, ok := strings.CutSuffix(name, "."); ok {
					if !hasPrefix(known, prefix+".") {
						bad = append(bad, filepath.Base(f)+":"+itoa(i+1)+": --"+name+" (no flag has this prefix)")
					}
					continue
				}
				name = strings.TrimRight(name, ".-")
				if known[name] || externalFlags[name] != "" {
					continue
				}
				hint := ""
				if d := strings.ReplaceAll(name, "_", "-"); d != name && known[d] {
					hint = " (the flag is --" + d + ")"
				}
				bad = append(bad, filepath.Base(f)+":"+itoa(i+1)+": --"+name+hint)
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%d documented flags no binary has:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

func hasPrefix(known map[string]bool, p string) bool {
	for k := range known {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func itoa(i int) string { return strconv.Itoa(i) }
