package seglog

import (
	"errors"
	"testing"
)

// failingFile is a segment file whose fdatasync always fails.
type failingFile struct{ closes int }

var errDisk = errors.New("injected EIO")

func (f *failingFile) ReadAt(p []byte, off int64) (int, error)  { return 0, nil }
func (f *failingFile) WriteAt(p []byte, off int64) (int, error) { return len(p), nil }
func (f *failingFile) SyncData() error                          { return errDisk }
func (f *failingFile) Size() (int64, error)                     { return 0, nil }
func (f *failingFile) Allocate(from, to int64) error            { return nil }
func (f *failingFile) DropCache(off, n int64) error             { return nil }
func (f *failingFile) Close() error                             { f.closes++; return nil }

// TestFailedSyncIsSticky: after a failed fdatasync, every later sync or
// roll of the same file reports the failure. A roll that raced the fence of
// a failed sync used to get "already closed, nothing to do" and made the
// unsynced tail durable (TestFsyncFailureNeverAcked caught it about one run
// in three).
func TestFailedSyncIsSticky(t *testing.T) {
	f := &failingFile{}
	w := &writer{f: f}
	if err := w.syncAndClose(); !errors.Is(err, errDisk) {
		t.Fatalf("first roll: %v", err)
	}
	if err := w.syncAndClose(); !errors.Is(err, errDisk) {
		t.Fatalf("second roll of the failed file: %v, want the sync failure", err)
	}
	if skipped, err := w.sync(); skipped || !errors.Is(err, errDisk) {
		t.Fatalf("sync after the failure: skipped=%v err=%v", skipped, err)
	}
	if f.closes != 1 {
		t.Fatalf("closed %d times", f.closes)
	}

	w = &writer{f: &failingFile{}}
	if _, err := w.sync(); !errors.Is(err, errDisk) {
		t.Fatalf("sync: %v", err)
	}
	if err := w.syncAndClose(); !errors.Is(err, errDisk) {
		t.Fatalf("roll after a failed sync: %v", err)
	}
}
