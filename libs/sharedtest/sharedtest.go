package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvDir is the environment variable that names the shared input directory
// explicitly (the directory that holds protocol/wire-v2-vectors.json).
const EnvDir = "STRATA_SHARED_DIR"

// marker is the file whose presence identifies the shared input directory.
var marker = filepath.Join("protocol", "wire-v2-vectors.json")

// Dir returns the shared input directory, or skips the test when it cannot be
// found. It honours STRATA_SHARED_DIR first; otherwise it walks up from the
// working directory and, at every ancestor, looks for a "shared" child that
// holds protocol/wire-v2-vectors.json (so /work/main/libs/wire finds
// /work/shared).
func Dir(t testing.TB) string {
	t.Helper()
	dir, reason := find()
	if dir == "" {
		t.Skip("shared vectors not found: " + reason)
	}
	return dir
}

// Lookup returns the shared input directory and whether it was found,
// without skipping anything (for fuzz targets that add the vectors as extra
// seeds when they are available).
func Lookup() (string, bool) {
	dir, _ := find()
	return dir, dir != ""
}

// Path returns the path of name inside the shared input directory, skipping
// the test like Dir when the directory is absent.
func Path(t testing.TB, name ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Dir(t)}, name...)...)
}

// ReadFile reads a file inside the shared input directory (for example
// ReadFile(t, "protocol", "wire-v2-vectors.json")), skipping the test when the
// directory is absent and failing it when the file cannot be read.
func ReadFile(t testing.TB, name ...string) []byte {
	t.Helper()
	p := Path(t, name...)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read shared input: %v", err)
	}
	return b
}

// find returns the directory, or "" and why it was not found.
func find() (dir, reason string) {
	if env := os.Getenv(EnvDir); env != "" {
		if isShared(env) {
			return env, ""
		}
		return "", EnvDir + "=" + env + " has no " + marker
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", "working directory: " + err.Error()
	}
	for d := wd; ; {
		if cand := filepath.Join(d, "shared"); isShared(cand) {
			return cand, ""
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return "", "no shared/" + filepath.ToSlash(marker) + " beside any ancestor of " + wd + " (set " + EnvDir + ")"
}

func isShared(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, marker))
	return err == nil && st.Mode().IsRegular()
}
