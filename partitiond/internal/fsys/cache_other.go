//go:build !linux

package fsys

// fadviseDontNeed is Linux only; elsewhere the kernel keeps pages as it sees
// fit (DropCache is advice).
func fadviseDontNeed(uintptr, int64, int64) error { return nil }
