package streams

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
)

// HeadsFile keeps, in the partition directory, the heads of the streams
// whose events retention removed entirely. The index is derived from the
// log, and the log no longer says anything about such a stream: without the
// file a restart would forget its head, and version 1 would be accepted
// again. It is written (whole: temp file, fsync, rename, directory fsync)
// before retention deletes the segments, and read when the index is built.
const HeadsFile = "stream-heads.dat"

// loadHeads reads the heads file of dir: key to head. A missing file is
// empty; a damaged one is storage_corrupt (it is only ever replaced whole,
// so no crash leaves it torn).
func loadHeads(dir string) (map[string]uint64, error) {
	heads := map[string]uint64{}
	if dir == "" {
		return heads, nil
	}
	path := filepath.Join(dir, HeadsFile)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return heads, nil
	}
	if err != nil {
		return nil, errcode.StorageUnavailable.New("stream heads: read "+path+": "+err.Error(), "path", path)
	}
	for pos := 0; pos < len(data); {
		e, n, err := DecodeEntry(data[pos:])
		if err != nil {
			return nil, errcode.StorageCorrupt.New("stream heads file is damaged", "path", path, "position", strconv.Itoa(pos))
		}
		heads[e.Key] = e.Version
		pos += n
	}
	return heads, nil
}

// writeHeads replaces the heads file of dir with heads.
func writeHeads(dir string, heads map[string]uint64) error {
	keys := make([]string, 0, len(heads))
	for k := range heads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf []byte
	for _, k := range keys {
		buf = appendEntry(buf, Snapshot{Key: k, Version: heads[k]})
	}
	path := filepath.Join(dir, HeadsFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return unavailable("create", tmp, err)
	}
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return unavailable("write", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return unavailable("rename", tmp, err)
	}
	return syncDir(dir)
}
