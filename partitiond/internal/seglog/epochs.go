package seglog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// EpochStart is one entry of the leader epoch history: the first offset
// appended under a leader epoch.
type EpochStart struct {
	Epoch       uint64
	StartOffset uint64
}

// EpochFile is the name of the leader epoch history file in a log directory.
const EpochFile = "leader-epochs"

const epochMagic uint32 = 0x53455031 // "SEP1"

func encodeEpochs(es []EpochStart) []byte {
	b := make([]byte, 12+16*len(es)+4)
	be := binary.BigEndian
	be.PutUint32(b, epochMagic)
	be.PutUint64(b[4:], uint64(len(es)))
	p := 12
	for _, e := range es {
		be.PutUint64(b[p:], e.Epoch)
		be.PutUint64(b[p+8:], e.StartOffset)
		p += 16
	}
	be.PutUint32(b[p:], crc32.Checksum(b[:p], segment.Castagnoli))
	return b
}

func decodeEpochs(b []byte) ([]EpochStart, error) {
	be := binary.BigEndian
	if len(b) < 16 || be.Uint32(b) != epochMagic {
		return nil, fmt.Errorf("seglog: not a leader epoch file")
	}
	n := be.Uint64(b[4:])
	if n > 1<<24 || uint64(len(b)) != 16+16*n {
		return nil, fmt.Errorf("seglog: leader epoch file length mismatch")
	}
	p := 12 + 16*int(n)
	if crc32.Checksum(b[:p], segment.Castagnoli) != be.Uint32(b[p:]) {
		return nil, fmt.Errorf("seglog: leader epoch file checksum mismatch")
	}
	es := make([]EpochStart, n)
	for i := range es {
		q := 12 + 16*i
		es[i] = EpochStart{Epoch: be.Uint64(b[q:]), StartOffset: be.Uint64(b[q+8:])}
		if i > 0 && (es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset < es[i-1].StartOffset) {
			return nil, fmt.Errorf("seglog: leader epoch file entries out of order")
		}
	}
	return es, nil
}

// WriteFileAtomic writes data to dir/name through a temporary file: write,
// fdatasync, rename, directory fsync. A crash leaves the old or the new
// file, never a torn one.
func WriteFileAtomic(fs fsys.FS, dir, name string, data []byte) error {
	tmp := fs.Join(dir, name+segment.TmpExt)
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.SyncData(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, fs.Join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// readWholeFile reads a small file completely.
func readWholeFile(fs fsys.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	if n > 1<<30 {
		return nil, fmt.Errorf("seglog: %s is implausibly large (%d bytes)", path, n)
	}
	b := make([]byte, n)
	if err := segment.ReadFull(f, b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
