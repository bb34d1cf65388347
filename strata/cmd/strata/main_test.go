package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/strataio/strata/strata/internal/cli"
)

// The test binary doubles as the strata binary (STRATA_TEST_MAIN=1), so
// shell tests run the real command line.
func TestMain(m *testing.M) {
	if os.Getenv("STRATA_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

func strataCmd(t *testing.T, shell string) *exec.Cmd {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// strata is a function calling the test binary as the strata binary.
	prog := `strata() { STRATA_TEST_MAIN=1 "` + self + `" "$@"; }; ` + shell
	return exec.Command(bash, "--norc", "--noprofile", "-c", prog)
}

// TestCompletionBashLoads is the check of issue 18:
// bash -c 'source <(strata completion bash) && complete -p strata'.
func TestCompletionBashLoads(t *testing.T) {
	out, err := strataCmd(t, `source <(strata completion bash) && complete -p strata && `+
		`COMP_WORDS=(strata r) COMP_CWORD=1 && _strata && echo "[${COMPREPLY[*]}]"`).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "complete -F _strata strata") || !strings.Contains(string(out), "[run]") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestTopLevel(t *testing.T) {
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--help"}, 0, "Server and tools:", ""},
		{[]string{"help"}, 0, "trace-sink", ""},
		{[]string{"--version"}, 0, "strata ", ""},
		{[]string{"topc"}, 2, "", `did you mean "topic"?`},
		{[]string{"rnu"}, 2, "", `did you mean "run"?`},
		{nil, 2, "", "Usage: strata"},
		{[]string{"healthcheck", "--help"}, 0, "-url", ""},
		{[]string{"run", "--help"}, 0, "data", ""},
		{[]string{"trace-sink", "-h"}, 0, "listen", ""},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String(), c.stdout) || !strings.Contains(errb.String(), c.stderr) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", c.args, code, out.String(), errb.String())
		}
	}
}

var update = flag.Bool("update", false, "rewrite the generated command reference in docs/cli.md")

// TestCLIReference fails when the command reference in docs/cli.md is not
// what the command tree generates; -update rewrites it.
func TestCLIReference(t *testing.T) {
	for _, k := range []string{"STRATA_ADDR", "STRATA_PRINCIPAL", "STRATA_TOKEN"} {
		t.Setenv(k, "")
	}
	const path = "../../../docs/cli.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	before, rest, ok1 := strings.Cut(text, cli.ReferenceBegin)
	current, after, ok2 := strings.Cut(rest, cli.ReferenceEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/cli.md lacks the markers %q ... %q", cli.ReferenceBegin, cli.ReferenceEnd)
	}
	want := "\n" + cli.Reference()
	if current == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(before+cli.ReferenceBegin+want+cli.ReferenceEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("docs/cli.md's command reference is stale: run go test ./strata/cmd/strata -run TestCLIReference -update")
}
