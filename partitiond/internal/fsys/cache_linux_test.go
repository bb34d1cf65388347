package fsys

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// resident counts the pages of path's first n bytes that are in the page
// cache (mincore over a read-only mapping; mapping faults nothing in).
func resident(t *testing.T, path string, n int) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(n),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	c := 0
	for _, v := range vec {
		c += int(v & 1)
	}
	return c
}

// TestDropCache: on the OS file system DropCache frees the synced pages of
// the range it covers and no others, and the content reads back unchanged;
// on MemFS it does nothing.
func TestDropCache(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, whose pages are the file")
	}
	path := filepath.Join(dir, "seg")
	f, err := Default().Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 8 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	pages := size / os.Getpagesize()
	if r := resident(t, path, size); r < pages/2 {
		t.Skipf("only %d of %d written pages are cached before the drop: nothing to measure", r, pages)
	}
	if err := f.DropCache(0, size/2); err != nil {
		t.Fatal(err)
	}
	first, whole := resident(t, path, size/2), resident(t, path, size)
	if first != 0 {
		t.Fatalf("%d pages of the dropped half still cached", first)
	}
	if whole < pages/2*9/10 {
		t.Fatalf("only %d pages of the kept half cached (of %d)", whole, pages/2)
	}
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != string(data) {
		t.Fatalf("content changed after DropCache (err %v)", err)
	}

	m, err := FromVFS(vfs.NewMem()).Create("/seg")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DropCache(0, 4096); err != nil {
		t.Fatalf("MemFS DropCache: %v", err)
	}
}
