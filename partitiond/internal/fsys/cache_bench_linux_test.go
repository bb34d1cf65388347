package fsys

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWriteSyncDropBehind appends 1 MiB blocks to a file on the test
// directory's file system, fdatasync after each, optionally dropping the
// pages of the blocks more than a window behind (what seglog's drop-behind
// does). It reports the kernel time per KiB: on a VM whose balloon takes free
// memory back, writing into never-used page-cache memory costs far more
// than writing into pages freed a moment ago. Run with -benchtime=2000x (2 GB).
func BenchmarkWriteSyncDropBehind(b *testing.B) {
	for _, bc := range []struct {
		name   string
		window int64
	}{{"window=none", 0}, {"window=64MiB", 64 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := Default().Create(filepath.Join(b.TempDir(), "seg"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			block := make([]byte, 1<<20)
			for i := range block {
				block[i] = byte(i)
			}
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.SetBytes(int64(len(block)))
			b.ResetTimer()
			var off int64
			for range b.N {
				if _, err := f.WriteAt(block, off); err != nil {
					b.Fatal(err)
				}
				off += int64(len(block))
				if err := f.SyncData(); err != nil {
					b.Fatal(err)
				}
				if bc.window > 0 && off-int64(len(block)) >= bc.window {
					if err := f.DropCache(off-bc.window-int64(len(block)), int64(len(block))); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			sys := time.Duration(ru1.Stime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(sys.Nanoseconds())/float64(off>>10), "sys-ns/KiB")
		})
	}
}
