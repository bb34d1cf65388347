package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
)

// MarkerFile is the data directory format marker (spec 7; the product
// prefix is strata).
const MarkerFile = ".strata-raft-format"

// MarkerVersion is the only directory format this build reads (spec 9).
const MarkerVersion = 9

const markerTmp = MarkerFile + ".tmp"

// EnsureFormatMarker checks, or on first use creates, the format marker of
// the Raft data directory dir:
//
//   - missing or empty dir: created, marker written (fsync'd file and
//     directory) before anything else is stored there;
//   - marker present with value 9: accepted;
//   - marker with another value, or a non-empty directory without a marker:
//     errcode.UnsupportedRecoveryProtocol. Recovery is a clean bootstrap of
//     all persistent state; there is no in-place upgrade.
//
// A leftover temporary marker from a crash during creation does not count as
// content.
func EnsureFormatMarker(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("raftnode: create data dir: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	switch {
	case err == nil:
		v := string(bytes.TrimSpace(b))
		if v != strconv.Itoa(MarkerVersion) {
			return errcode.UnsupportedRecoveryProtocol.New(
				"the raft data directory has format marker "+strconv.Quote(v)+", this build reads only 9; recovery is a clean bootstrap of all persistent state",
				"dir", dir, "marker", v)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("raftnode: read format marker: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("raftnode: list data dir: %w", err)
	}
	for _, e := range entries {
		if e.Name() != markerTmp {
			return errcode.UnsupportedRecoveryProtocol.New(
				"the raft data directory is not empty and has no "+MarkerFile+" marker; recovery is a clean bootstrap of all persistent state",
				"dir", dir, "found", e.Name())
		}
	}
	return writeMarker(dir)
}

func writeMarker(dir string) error {
	tmp := filepath.Join(dir, markerTmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("raftnode: create format marker: %w", err)
	}
	_, werr := f.WriteString(strconv.Itoa(MarkerVersion) + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("raftnode: write format marker: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, MarkerFile)); err != nil {
		return fmt.Errorf("raftnode: install format marker: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("raftnode: open data dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("raftnode: sync data dir: %w", err)
	}
	return nil
}
