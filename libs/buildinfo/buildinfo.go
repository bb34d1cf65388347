// Package buildinfo says which Strata build a process is: the version and
// VCS revision stamped at link time (make build passes them with -ldflags -X)
// or, for a plain `go build`, what the Go toolchain recorded.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version and Revision are set with
// -ldflags "-X github.com/strataio/strata/libs/buildinfo.Version=v1.2.3 -X ...Revision=<sha>".
var (
	Version  = ""
	Revision = ""
)

// Info is the identity of this build.
type Info struct {
	Version   string // "devel" when nothing stamped one
	Revision  string // "unknown" when nothing recorded one
	GoVersion string
}

// Get returns this binary's build identity.
func Get() Info {
	info := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Revision == "" {
				info.Revision = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}
