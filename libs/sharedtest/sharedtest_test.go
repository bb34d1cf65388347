package sharedtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirHonoursEnvironment(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "protocol"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, marker), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, root)
	if got := Dir(t); got != root {
		t.Fatalf("Dir = %q, want %q", got, root)
	}
	if got := string(ReadFile(t, "protocol", "wire-v2-vectors.json")); got != "{}" {
		t.Fatalf("ReadFile = %q", got)
	}
}

func TestFindRejectsEnvironmentWithoutVectors(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	dir, reason := find()
	if dir != "" || !strings.Contains(reason, EnvDir) {
		t.Fatalf("find = %q, %q; want not found naming %s", dir, reason, EnvDir)
	}
}

func TestFindWalksUpToSharedSibling(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	deep := filepath.Join(root, "main", "libs", "wire")
	for _, d := range []string{filepath.Join(shared, "protocol"), deep} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(shared, marker), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, "")
	t.Chdir(deep)
	dir, reason := find()
	if dir != shared {
		t.Fatalf("find = %q (%s), want %q", dir, reason, shared)
	}
}

func TestFindReportsWhyWhenAbsent(t *testing.T) {
	t.Setenv(EnvDir, "")
	t.Chdir(t.TempDir())
	dir, reason := find()
	if dir != "" || !strings.Contains(reason, "shared/protocol/wire-v2-vectors.json") {
		t.Fatalf("find = %q, %q", dir, reason)
	}
}
