package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/buildinfo"
)

// TestHelpOnStdoutExitZero: --help (and -h, and strata help CMD) of every
// command and subcommand of the tree prints the usage on stdout, nothing on
// stderr, and exits 0.
func TestHelpOnStdoutExitZero(t *testing.T) {
	tree := commandTree()
	n := 0
	walk(tree, func(c *cmdNode) {
		if len(c.Path) == 1 && slices.ContainsFunc(ServerCommands, func(s ServerCommand) bool { return s.Name == c.Name }) {
			return
		}
		for _, h := range []string{"--help", "-h"} {
			code, out, errs := run(t, append(slices.Clone(c.Path), h)...)
			if code != 0 || !strings.Contains(out, "usage") || errs != "" {
				t.Errorf("%v %s: exit %d, stdout %d bytes, stderr %q", c.Path, h, code, len(out), errs)
			}
		}
		n++
	})
	if n < 25 {
		t.Fatalf("only %d commands in the tree", n)
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "topic", "create"}, {"help", "bench"}} {
		if code, out, errs := run(t, args...); code != 0 || out == "" || errs != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	out := mustRun(t, "help", "consume")
	for _, want := range []string{"-t, --topic", "-o, --from", "-n, --max", "-f, --follow", "-g, --group", "-p, --partition", "--output string"} {
		if !strings.Contains(out, want) {
			t.Errorf("consume help lacks %q:\n%s", want, out)
		}
	}
	// The replication default is the server's, 1 unless configured (it
	// used to claim 3).
	if out := mustRun(t, "topic", "create", "--help"); !strings.Contains(out, "1 unless configured") || strings.Contains(out, "default 3") {
		t.Errorf("topic create help:\n%s", out)
	}
	// A missing argument is still a usage error on stderr.
	if code, out, errs := run(t, "topic"); code != 2 || out != "" || !strings.Contains(errs, "usage") {
		t.Errorf("topic without subcommand: %d %q %q", code, out, errs)
	}
}

func TestTypoSuggestions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topc"}, `did you mean "topic"?`},
		{[]string{"consme", "t"}, `did you mean "consume"?`},
		{[]string{"topic", "craete", "x"}, `did you mean "create"?`},
		{[]string{"group", "decsribe", "g"}, `did you mean "describe"?`},
		{[]string{"consume", "t", "--fllow"}, "did you mean --follow?"},
		{[]string{"topic", "create", "x", "--partitons", "3"}, "did you mean --partitions?"},
		{[]string{"topic", "list", "-o", "json"}, "the output format is --output"},
	} {
		code, out, errs := run(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr:\n%s", c.args, code, errs)
		}
	}
	if s := suggest("zzzzzz", []string{"topic", "group"}); len(s) != 0 {
		t.Fatalf("far-off name suggested %v", s)
	}
}

func TestShortFlags(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "s", "--addr", a, "--partitions", "2")
	mustRun(t, "produce", "-t", "s", "--addr", a, "-n", "6", "-p", "1")
	mustRun(t, "produce", "-t", "s", "--addr", a, "-k", "kk", "-p", "0")
	out := mustRun(t, "consume", "-t", "s", "--addr", a, "-p", "1", "-o", "-2", "-n", "1", "--wait", "10ms")
	if out != "partition=1 offset=4 "+strings.Repeat("x", 100)+"\n" {
		t.Fatalf("consume with short flags printed %q", out)
	}
	if out := mustRun(t, "group", "reset-offsets", "g", "--addr", a, "-t", "s", "--to-latest"); !strings.Contains(out, "dry run") {
		t.Fatalf("reset-offsets -t: %s", out)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out := mustRun(t, args...); !strings.HasPrefix(out, "strata ") || !strings.Contains(out, "go1.") {
			t.Fatalf("%v: %q", args, out)
		}
	}
	buildinfo.Version = "v9.9.9"
	defer func() { buildinfo.Version = "" }()
	if out := mustRun(t, "version", "--output", "json"); !strings.Contains(out, `"version": "v9.9.9"`) {
		t.Fatalf("version json: %s", out)
	}
}

// TestCompletionScriptsLoad: the bash script loads (complete -p strata
// names it), and completes commands, subcommands, flags and --output
// values; zsh and fish scripts are generated.
func TestCompletionScriptsLoad(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join(t.TempDir(), "strata.bash")
	if err := os.WriteFile(script, []byte(mustRun(t, "completion", "bash")), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = "'" + w + "'"
		}
		prog := `source "$1" && COMP_WORDS=(` + strings.Join(q, " ") + `) && COMP_CWORD=$((${#COMP_WORDS[@]}-1)) && _strata && echo "${COMPREPLY[*]}"`
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog, "bash", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", words, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", `source "$1" && complete -p strata`, "bash", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-F _strata strata") {
		t.Fatalf("complete -p strata: %v %s", err, out)
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"strata", "top"}, "topic"},
		{[]string{"strata", "topic", "de"}, "describe delete"},
		{[]string{"strata", "consume", "orders", "--fol"}, "--follow"},
		{[]string{"strata", "stream", "snapshot", "s"}, "save"},
		{[]string{"strata", "group", "reset-offsets", "g", "--to-d"}, "--to-datetime"},
		{[]string{"strata", "topic", "list", "--output", "y"}, "yaml"},
		{[]string{"strata", "bench", "p"}, "produce"},
	} {
		if got := complete(c.words...); got != c.want {
			t.Errorf("%v completed to %q, want %q", c.words, got, c.want)
		}
	}
	z := mustRun(t, "completion", "zsh")
	if !strings.HasPrefix(z, "#compdef strata") || !strings.Contains(z, "bashcompinit") {
		t.Fatalf("zsh script:\n%s", z)
	}
	// Where zsh is installed: the script loads, and walks the tree under
	// bashcompinit's sh emulation (0-based arrays) as in bash.
	if zsh, err := exec.LookPath("zsh"); err == nil {
		zf := filepath.Join(t.TempDir(), "strata.zsh")
		if err := os.WriteFile(zf, []byte(z), 0o600); err != nil {
			t.Fatal(err)
		}
		prog := `autoload -U +X compinit && compinit -u -d "$2" && source "$1" && complete -p strata && ` +
			`emulate sh && COMP_WORDS=(strata topic de) && COMP_CWORD=2 && _strata && echo "[${COMPREPLY[*]}]"`
		out, err := exec.Command(zsh, "-f", "-c", prog, "zsh", zf, filepath.Join(t.TempDir(), "zcompdump")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "complete -F _strata strata") || !strings.Contains(string(out), "[create list describe delete]") {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
	}
	f := mustRun(t, "completion", "fish")
	if !strings.Contains(f, "complete -c strata -n '__fish_use_subcommand' -a topic") {
		t.Fatalf("fish script:\n%s", f)
	}
	// Where fish is installed: complete -C asks it what it would offer.
	if fish, err := exec.LookPath("fish"); err == nil {
		ff := filepath.Join(t.TempDir(), "strata.fish")
		if err := os.WriteFile(ff, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ line, want string }{
			{"strata top", "topic"},
			{"strata stream snapshot s", "save"},
			{"strata consume t --fol", "--follow"},
			{"strata topic list --output y", "yaml"},
		} {
			out, err := exec.Command(fish, "-N", "-c", `source $argv[1]; complete -C $argv[2]`, ff, c.line).CombinedOutput()
			got := strings.Fields(string(out))
			if err != nil || len(got) == 0 || got[0] != c.want || strings.Count(string(out), "\n") != 1 {
				t.Errorf("fish %q: %v\n%s", c.line, err, out)
			}
		}
	}
	if code, _, errs := run(t, "completion", "tcsh"); code != 2 || !strings.Contains(errs, "unknown subcommand") {
		t.Fatalf("tcsh: %d %s", code, errs)
	}
}

// Help never prints the token from the environment, which still applies.
func TestHelpHidesTheToken(t *testing.T) {
	t.Setenv("STRATA_TOKEN", "s3cret-token")
	for _, args := range [][]string{{"topic", "list", "--help"}, {"bench", "produce", "--help"}} {
		if out := mustRun(t, args...); strings.Contains(out, "s3cret") {
			t.Fatalf("%v prints the token:\n%s", args, out)
		}
	}
	cf := &connFlags{compression: "none"}
	o, err := cf.options()
	if err != nil || o.Token != "s3cret-token" {
		t.Fatalf("token from the environment not applied: %q", o.Token)
	}
}
