package fsys

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestAllocate: on the OS file system Allocate moves the file size (mode 0,
// not KEEP_SIZE); MemFS files have no descriptor and answer ErrUnsupported,
// which ZeroFill turns into written zeros.
func TestAllocate(t *testing.T) {
	fs := Default()
	f, err := fs.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	switch err := f.Allocate(4, 1<<20); {
	case errors.Is(err, errors.ErrUnsupported):
		t.Skip("the test directory's file system has no fallocate")
	case err != nil:
		t.Fatal(err)
	}
	if n, err := f.Size(); err != nil || n != 1<<20 {
		t.Fatalf("size %d, %v after Allocate", n, err)
	}
	b := make([]byte, 8)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != "data\x00\x00\x00\x00" {
		t.Fatalf("read %q, %v", b, err)
	}

	mem := FromVFS(vfs.NewMem())
	m, err := mem.Create("/seg")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Allocate(0, 4096); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("MemFS Allocate: %v", err)
	}
	m.Close()
	z, err := ZeroFill(mem).OpenRW("/seg")
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := z.Allocate(0, 3<<20+5); err != nil {
		t.Fatal(err)
	}
	if n, err := z.Size(); err != nil || n != 3<<20+5 {
		t.Fatalf("zero-filled size %d, %v", n, err)
	}
}
