package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/proctest"
)

// TestBinariesKeepDeadCodeElimination links every Strata binary as make
// build does (proctest.BuildArgs) with the linker's dependency dump and fails
// if any reachable function is marked <ReflectMethod>: a call of reflect's
// Method or MethodByName with a name known only at run time (text/template's
// evalField is the usual one). One such function anywhere makes the linker
// keep every exported method of every reachable type: grpc-go's
// golang.org/x/net/trace brought html/template in and cost 6.5 MB of binary
// until the grpcnotrace tag (docs/performance.md, "Idle and peak RSS"). It also
// checks that the Makefile and .ci/run build with the same tags.
func TestBinariesKeepDeadCodeElimination(t *testing.T) {
	if testing.Short() {
		t.Skip("links five binaries: skipped with -short")
	}
	for _, f := range []string{"../../../Makefile", "../../../.ci/run"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("GOFLAGS")) || !strings.Contains(goflags(b), "-tags="+proctest.BuildTags) {
			t.Errorf("%s: GOFLAGS %q do not carry -tags=%s (libs/proctest BuildTags)", f, goflags(b), proctest.BuildTags)
		}
	}
	for _, pkg := range []string{"./", "../../../metad/cmd/metad", "../../../partitiond/cmd/partitiond",
		"../../../coordinatord/cmd/coordinatord", "../../../gateway/cmd/gateway"} {
		t.Run(strings.TrimPrefix(pkg, "../../../"), func(t *testing.T) {
			args := append(append([]string{"build"}, proctest.BuildArgs()...), "-ldflags=-dumpdep", "-o", os.DevNull, pkg)
			cmd := exec.Command("go", args...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("go %v: %v\n%.2000s", args, err, stderr.Bytes())
			}
			if !bytes.Contains(stderr.Bytes(), []byte(" -> ")) {
				t.Fatalf("go %v printed no dependency dump: %.2000s", args, stderr.Bytes())
			}
			if path := reflectMethodPath(stderr.Bytes()); path != "" {
				t.Errorf("dead-code elimination of methods is off: %s (go build %s -ldflags=-dumpdep shows the rest)", path, strings.Join(proctest.BuildArgs(), " "))
			}
		})
	}
}

// goflags returns what the GOFLAGS assignment in a Makefile or shell script
// sets.
func goflags(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "GOFLAGS"); i >= 0 && strings.HasPrefix(strings.TrimSpace(line), "export") {
			return strings.Trim(strings.TrimLeft(line[i+len("GOFLAGS"):], " :="), `"`)
		}
	}
	return ""
}

// reflectMethodPath reads the linker's dependency dump ("from -> to" lines)
// and returns the chain of callers from the entry point to the first
// <ReflectMethod> function, or "" when there is none.
func reflectMethodPath(dump []byte) string {
	parent := map[string]string{}
	first := ""
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if _, seen := parent[to]; !seen {
			parent[to] = from
		}
		if first == "" {
			for _, s := range []string{from, to} {
				if strings.HasSuffix(s, "<ReflectMethod>") {
					first = s
				}
			}
		}
	}
	if first == "" {
		return ""
	}
	chain := []string{first}
	for s := first; len(chain) < 30; {
		p, ok := parent[s]
		if !ok || p == "_" {
			break
		}
		chain = append(chain, p)
		s = p
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return strings.Join(chain, " -> ")
}
