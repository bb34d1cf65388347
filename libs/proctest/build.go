package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// BuildTags are the build tags of every Strata binary: the Makefile's GOFLAGS
// and .ci/run carry the same (TestBinariesKeepDeadCodeElimination in
// strata/cmd/strata checks they agree). grpcnotrace drops grpc-go's
// golang.org/x/net/trace, whose html/template calls reflect's MethodByName
// with names known only at run time: with that reachable the linker keeps
// every exported method of every reachable type, 6.5 MB of binary and about
// 1 MB of RSS (docs/performance.md).
const BuildTags = "grpcnotrace"

// BuildArgs are the go build flags of every Strata binary (see BuildTags).
func BuildArgs() []string { return []string{"-tags=" + BuildTags} }

var builds struct {
	mu     sync.Mutex
	dir    string
	built  map[string]bool
	failed map[string]error
}

// Build compiles the main packages pkgs (import paths; several in one go
// build, which is faster than one each) once per test process and returns
// the directory holding the binaries, each named by the last element of
// its package path. Binaries are static (CGO_ENABLED=0), built with the
// local toolchain and BuildArgs, as make build builds them.
func Build(t testing.TB, pkgs ...string) string {
	t.Helper()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "strata-proctest-bin-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir, builds.built, builds.failed = dir, map[string]bool{}, map[string]error{}
	}
	var missing []string
	for _, p := range pkgs {
		if err := builds.failed[p]; err != nil {
			t.Fatal(err)
		}
		if !builds.built[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		cmd := exec.Command("go", append(append(append([]string{"build"}, BuildArgs()...), "-o", builds.dir+string(os.PathSeparator)), missing...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			err = fmt.Errorf("go build %v: %v\n%s", missing, err, out)
			for _, p := range missing {
				builds.failed[p] = err
			}
			t.Fatal(err)
		}
		for _, p := range missing {
			builds.built[p] = true
		}
	}
	return builds.dir
}

// Binary builds one main package (see Build) and returns its path.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	return filepath.Join(Build(t, pkg), path.Base(pkg))
}

// RemoveBuilds deletes every binary Build made; call it from TestMain after
// the tests ran.
func RemoveBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
		builds.dir = ""
	}
}
