package fsys

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fadviseDontNeed asks the kernel to drop the clean cached pages of
// [off, off+n); only pages the range covers whole are dropped.
func fadviseDontNeed(fd uintptr, off, n int64) error {
	if err := unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fsys: fadvise: %w", err)
	}
	return nil
}
