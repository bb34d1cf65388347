package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/strataio/strata/libs/buildinfo"
)

const versionUsage = `usage:
  strata version      (also strata --version)

Prints the version, the commit when the build recorded one, the Go version
and the platform.
`

// versionInfo is what strata version prints.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// currentVersion is libs/buildinfo's identity of this binary (make build
// stamps the version and revision; strata_build_info carries the same).
func currentVersion() versionInfo {
	bi := buildinfo.Get()
	v := versionInfo{Version: bi.Version, Go: bi.GoVersion, OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi.Revision != "unknown" {
		v.Commit = bi.Revision
	}
	return v
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata version", versionUsage, stderr)
	if err := parseFlagsOnly(fs, args); err != nil {
		return parseExit(err)
	}
	v := currentVersion()
	emit(stdout, v, func() {
		commit := ""
		if v.Commit != "" {
			commit = " commit " + v.Commit
		}
		fmt.Fprintf(stdout, "strata %s%s (%s %s/%s)\n", v.Version, commit, v.Go, v.OS, v.Arch)
	})
	return exitOK
}
