//go:build !linux

package fsys

import (
	"errors"
	"fmt"
)

// fallocate is Linux only; elsewhere files grow by their writes.
func fallocate(uintptr, int64, int64) error {
	return fmt.Errorf("fsys: fallocate: %w", errors.ErrUnsupported)
}
