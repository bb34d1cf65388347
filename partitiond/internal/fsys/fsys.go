package fsys

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// File is an open file. ReadAt and WriteAt are positional (pread/pwrite), so
// readers never share a cursor with the writer. WriteAt and SyncData may run
// concurrently with each other and with ReadAt: the log writes batch n+1 while
// the node syncer's fdatasync covers batch n. (pebble's contract serialises
// Write and Sync for its own wrappers; the OS file and MemFS implementations
// behind this adapter are safe for concurrent use.)
type File interface {
	io.ReaderAt
	// WriteAt writes p at off; a short write returns an error.
	WriteAt(p []byte, off int64) (int, error)
	// SyncData makes every byte written so far durable (fdatasync).
	SyncData() error
	// Size returns the current file size.
	Size() (int64, error)
	// Allocate extends the file from size from to size to with allocated,
	// zero-reading blocks, like fallocate(2) mode 0: the file size moves to
	// to, so later writes below it change neither the size nor (on ext4)
	// need a delayed-allocation reservation, and their fdatasync does not
	// write the inode for a size change. The new size is durable only after
	// the next SyncData. It returns an error wrapping errors.ErrUnsupported
	// when the file system cannot allocate (no fallocate: some overlay or
	// FUSE setups, MemFS).
	Allocate(from, to int64) error
	// DropCache tells the kernel that the cached pages of [off, off+n) will
	// not be needed soon (posix_fadvise POSIX_FADV_DONTNEED): clean pages
	// are freed, dirty ones are left alone, the file's content is
	// unchanged. It is advice: files without a descriptor (MemFS) and
	// systems without fadvise do nothing and return nil.
	DropCache(off, n int64) error
	Close() error
}

// FS is the file system the log writes through. Paths are slash-separated
// and absolute or relative to the FS root.
type FS interface {
	// Create creates name empty (replacing any file of that name) for reading
	// and writing. The new directory entry is not durable until SyncDir.
	Create(name string) (File, error)
	// OpenRW opens an existing file for reading and writing.
	OpenRW(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	// Rename replaces newname with oldname; durable after SyncDir.
	Rename(oldname, newname string) error
	MkdirAll(dir string) error
	// List returns the names (not paths) in dir.
	List(dir string) ([]string, error)
	// Exists reports whether name exists.
	Exists(name string) (bool, error)
	// SyncDir makes the directory entries of dir durable.
	SyncDir(dir string) error
	// Truncate durably cuts the closed file name to size bytes: when Truncate
	// returns nil, a crash leaves either nothing past size or (for the copy
	// fallback) the whole original file, never a mix. The file must not be
	// open for writing.
	Truncate(name string, size int64) error
	// Join joins path elements.
	Join(elem ...string) string
}

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// FromVFS adapts a pebble vfs.FS.
func FromVFS(v vfs.FS) FS { return vfsFS{v} }

// Default is the operating system's file system.
func Default() FS { return FromVFS(vfs.Default) }

type vfsFS struct{ v vfs.FS }

type vfsFile struct{ f vfs.File }

func (f vfsFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

func (f vfsFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

func (f vfsFile) SyncData() error { return f.f.SyncData() }

func (f vfsFile) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (f vfsFile) Close() error { return f.f.Close() }

func (f vfsFile) Allocate(from, to int64) error {
	if to <= from {
		return nil
	}
	fd := f.f.Fd()
	if fd == vfs.InvalidFd {
		return fmt.Errorf("fsys: allocate: %w (no file descriptor)", errors.ErrUnsupported)
	}
	return fallocate(fd, from, to-from)
}

func (f vfsFile) DropCache(off, n int64) error {
	if n <= 0 {
		return nil
	}
	fd := f.f.Fd()
	if fd == vfs.InvalidFd {
		return nil
	}
	return fadviseDontNeed(fd, off, n)
}

func (v vfsFS) Create(name string) (File, error) {
	f, err := v.v.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		return nil, err
	}
	return vfsFile{f}, nil
}

func (v vfsFS) OpenRW(name string) (File, error) {
	// OpenReadWrite creates a missing file; the log only reopens files it
	// listed, so a missing one is an error here, not a new empty segment.
	if ok, err := v.Exists(name); err != nil {
		return nil, err
	} else if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := v.v.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	return vfsFile{f}, nil
}

func (v vfsFS) Open(name string) (File, error) {
	f, err := v.v.Open(name)
	if err != nil {
		return nil, err
	}
	return vfsFile{f}, nil
}

func (v vfsFS) Remove(name string) error             { return v.v.Remove(name) }
func (v vfsFS) RemoveAll(name string) error          { return v.v.RemoveAll(name) }
func (v vfsFS) Rename(oldname, newname string) error { return v.v.Rename(oldname, newname) }
func (v vfsFS) MkdirAll(dir string) error            { return v.v.MkdirAll(dir, 0o755) }
func (v vfsFS) List(dir string) ([]string, error)    { return v.v.List(dir) }
func (v vfsFS) Join(elem ...string) string           { return v.v.PathJoin(elem...) }

func (v vfsFS) Exists(name string) (bool, error) {
	_, err := v.v.Stat(name)
	if err == nil {
		return true, nil
	}
	if IsNotExist(err) {
		return false, nil
	}
	return false, err
}

func (v vfsFS) SyncDir(dir string) error {
	d, err := v.v.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// truncater is implemented by OS-backed vfs files (they embed *os.File).
type truncater interface{ Truncate(size int64) error }

func (v vfsFS) Truncate(name string, size int64) error {
	f, err := v.v.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if t, ok := f.(truncater); ok {
		// ftruncate, then fsync: the size change is metadata, which
		// fdatasync covers because later reads depend on it.
		err := t.Truncate(size)
		if err == nil {
			err = f.SyncData()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	// vfs.File has no truncate (MemFS, errorfs): copy the prefix to a
	// temporary file, sync it and rename it over the original. A crash leaves
	// either the old file or the cut one.
	_ = f.Close()
	return v.truncateByCopy(name, size)
}

func (v vfsFS) truncateByCopy(name string, size int64) error {
	src, err := v.v.Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := name + ".truncate"
	dst, err := v.v.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	buf := make([]byte, min(size, 1<<20))
	var off int64
	for off < size {
		n := int64(len(buf))
		if size-off < n {
			n = size - off
		}
		r, err := src.ReadAt(buf[:n], off)
		if int64(r) != n {
			_ = dst.Close()
			if err == nil || err == io.EOF {
				err = fmt.Errorf("fsys: truncate %s to %d: file has only %d bytes", name, size, off+int64(r))
			}
			return err
		}
		if _, err := dst.WriteAt(buf[:n], off); err != nil {
			_ = dst.Close()
			return err
		}
		off += n
	}
	if err := dst.SyncData(); err != nil {
		_ = dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	if err := v.v.Rename(tmp, name); err != nil {
		return err
	}
	return v.SyncDir(v.v.PathDir(name))
}
