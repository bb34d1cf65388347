package fsys

import (
	"errors"
	"fmt"
	"syscall"
)

// fallocate allocates [off, off+n) with mode 0 (the file size grows to
// off+n). File systems without fallocate answer EOPNOTSUPP (ENOSYS on old
// kernels); both become errors.ErrUnsupported.
func fallocate(fd uintptr, off, n int64) error {
	for {
		err := syscall.Fallocate(int(fd), 0, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			return fmt.Errorf("fsys: fallocate: %w (%w)", errors.ErrUnsupported, err)
		default:
			return fmt.Errorf("fsys: fallocate: %w", err)
		}
	}
}
