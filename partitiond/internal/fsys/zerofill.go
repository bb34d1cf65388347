package fsys

// ZeroFill wraps fs so that Allocate writes zeros (through WriteAt) instead
// of calling fallocate. Tests use it over vfs.MemFS, whose files have no
// file descriptor, so that preallocated segment files exist there too: the
// zeros past the data end are what a fallocated region reads as, and a
// crash clone keeps any part of them that was not synced, as a power loss
// may or may not keep an unsynced size change.
func ZeroFill(fs FS) FS { return zeroFillFS{fs} }

type zeroFillFS struct{ FS }

type zeroFillFile struct{ File }

func (z zeroFillFS) Create(name string) (File, error) { return zeroFill(z.FS.Create(name)) }
func (z zeroFillFS) OpenRW(name string) (File, error) { return zeroFill(z.FS.OpenRW(name)) }

func zeroFill(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return zeroFillFile{f}, nil
}

func (f zeroFillFile) Allocate(from, to int64) error {
	if to <= from {
		return nil
	}
	zeros := make([]byte, min(to-from, 1<<20))
	for off := from; off < to; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), to-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	return nil
}
