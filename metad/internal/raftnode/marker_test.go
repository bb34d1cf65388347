package raftnode

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strataio/strata/libs/errcode"
)

func TestMarkerIsCreatedInAnEmptyOrMissingDirectory(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "new", "raft")} {
		if err := EnsureFormatMarker(dir); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
		if err != nil || string(b) != "9\n" {
			t.Fatalf("marker = %q, %v", b, err)
		}
		if err := EnsureFormatMarker(dir); err != nil { // second start
			t.Fatalf("marked directory refused: %v", err)
		}
	}
}

func TestMarkerRefusesForeignDirectories(t *testing.T) {
	cases := map[string]func(dir string){
		"UnmarkedNonEmpty": func(dir string) { os.WriteFile(filepath.Join(dir, "raft.db"), []byte("x"), 0o600) },
		"UnmarkedSubdir":   func(dir string) { os.Mkdir(filepath.Join(dir, "snapshots"), 0o700) },
		"OlderMarker":      func(dir string) { os.WriteFile(filepath.Join(dir, MarkerFile), []byte("8\n"), 0o600) },
		"NewerMarker":      func(dir string) { os.WriteFile(filepath.Join(dir, MarkerFile), []byte("10"), 0o600) },
		"GarbageMarker":    func(dir string) { os.WriteFile(filepath.Join(dir, MarkerFile), []byte("nine"), 0o600) },
		"EmptyMarker":      func(dir string) { os.WriteFile(filepath.Join(dir, MarkerFile), nil, 0o600) },
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			setup(dir)
			err := EnsureFormatMarker(dir)
			if !errors.Is(err, errcode.UnsupportedRecoveryProtocol) {
				t.Fatalf("EnsureFormatMarker = %v, want unsupported_recovery_protocol", err)
			}
		})
	}
}

func TestMarkerIgnoresATornTemporaryMarker(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, markerTmp), []byte("9"), 0o600) // crash before rename
	if err := EnsureFormatMarker(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, markerTmp)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary marker left behind: %v", err)
	}
}
