package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/metad/internal/raftstore/logcodec"
)

const (
	prefixLog    byte = 'l'
	prefixStable byte = 's'
	logKeyLen         = 9
)

// ErrKeyNotFound is returned by Get and GetUint64 for a key that was never
// set. Its text is exactly "not found" because hashicorp/raft recognises a
// missing stable key by that string.
var ErrKeyNotFound = errors.New("not found")

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("raftstore: closed")

// Option configures Open.
type Option func(*options)

type options struct {
	fs     vfs.FS
	logger *slog.Logger
}

// The Raft log holds small metadata commands and is mostly read right after
// it is written, while still in the memtable, so pebble's defaults (4 MiB
// memtables, an 8 MiB block cache) are far more than it uses: sized down,
// the memtable the store grows to after a burst of commands costs 256 KiB
// of heap instead of 4 MiB (docs/performance.md, "Idle and peak RSS").
const (
	cacheSize    = 1 << 20
	memTableSize = 256 << 10
)

// WithFS makes the store use fs instead of the operating system, e.g. pebble's
// crashable in-memory FS in tests.
func WithFS(fs vfs.FS) Option { return func(o *options) { o.fs = fs } }

// WithLogger sets the logger pebble's messages go to (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Store is a raft.LogStore and raft.StableStore on pebble. It is safe for
// concurrent use: readers go straight to pebble, writers are serialised so the
// cached first and last index always describe what is on disk.
type Store struct {
	db *pebble.DB

	mu          sync.RWMutex // guards first, last, closed; held for writing across each write
	first, last uint64       // 0, 0 when the log is empty
	closed      bool
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{fs: vfs.Default}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	popts := &pebble.Options{
		FS:           o.fs,
		CacheSize:    cacheSize,
		MemTableSize: memTableSize,
		Logger:       telemetry.PrintfLogger{Logger: o.logger, Component: "pebble"},
		// Pinned rather than FormatNewest so a pebble upgrade never ratchets
		// the on-disk format behind our back. V6 includes WAL sync chunks
		// (torn WAL tails are detected precisely) and block checksums.
		FormatMajorVersion: pebble.FormatTableFormatV6,
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", dir, err)
	}
	s := &Store{db: db}
	if err := s.loadBounds(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database. Pending writes have been synced already; Close
// only releases resources.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}

func logKey(index uint64) []byte {
	k := make([]byte, logKeyLen)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func stableKey(key []byte) []byte {
	k := make([]byte, 0, 1+len(key))
	return append(append(k, prefixStable), key...)
}

// loadBounds scans for the first and last log key. Callers hold mu for
// writing (or own s exclusively).
func (s *Store) loadBounds() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return fmt.Errorf("raftstore: %w", err)
	}
	defer it.Close()
	s.first, s.last = 0, 0
	if it.First() {
		if s.first, err = indexOf(it.Key()); err != nil {
			return err
		}
		if !it.Last() {
			return errcode.StorageCorrupt.New("raft log iterator lost its last key")
		}
		if s.last, err = indexOf(it.Key()); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("raftstore: scan log bounds: %w", err)
	}
	return nil
}

func indexOf(key []byte) (uint64, error) {
	if len(key) != logKeyLen || key[0] != prefixLog {
		return 0, errcode.StorageCorrupt.New("malformed raft log key", "key", fmt.Sprintf("%x", key))
	}
	return binary.BigEndian.Uint64(key[1:]), nil
}

// FirstIndex returns the first index stored, 0 when the log is empty.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.first, nil
}

// LastIndex returns the last index stored, 0 when the log is empty.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.last, nil
}

// GetLog reads the entry at index into log; raft.ErrLogNotFound when absent.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	val, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftstore: get log %d: %w", index, err)
	}
	// One copy: pebble's buffer is only valid until Close, and the decoded
	// Data and Extensions alias the buffer they were decoded from.
	buf := bytes.Clone(val)
	_ = closer.Close()
	if err := logcodec.Decode(buf, log); err != nil {
		return fmt.Errorf("raftstore: log %d: %w", index, err)
	}
	if log.Index != index {
		return fmt.Errorf("raftstore: log %d: %w", index,
			errcode.StorageCorrupt.New("raft log entry stored under another index", "stored", fmt.Sprint(log.Index)))
	}
	return nil
}

// StoreLog stores one entry durably.
func (s *Store) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores entries in one pebble batch committed with sync: all of
// them are durable when it returns nil, none are visible if it fails. The
// entries must have non-zero, strictly increasing indexes. An entry may
// replace one already stored at its index (Raft deletes a conflicting suffix
// first; the store does not rely on that).
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	for i, l := range logs {
		if l.Index == 0 {
			return errcode.InvalidParameter.New("raft log index 0 is reserved", "param", "index")
		}
		if i > 0 && l.Index <= logs[i-1].Index {
			return errcode.InvalidParameter.New("raft log batch indexes must increase",
				"param", "index", "previous", fmt.Sprint(logs[i-1].Index), "index", fmt.Sprint(l.Index))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	b := s.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, l := range logs {
		buf = logcodec.Append(buf[:0], l)
		if err := b.Set(logKey(l.Index), buf, nil); err != nil {
			return fmt.Errorf("raftstore: batch log %d: %w", l.Index, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("raftstore: commit logs %d..%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
	}
	lo, hi := logs[0].Index, logs[len(logs)-1].Index
	if s.first == 0 || lo < s.first {
		s.first = lo
	}
	if hi > s.last {
		s.last = hi
	}
	return nil
}

// DeleteRange deletes the entries min..max, both inclusive, with one range
// delete committed with sync, and recomputes the cached bounds from what
// remains (so a range ending in a gap leaves FirstIndex on a stored entry).
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	end := []byte{prefixLog + 1} // max == MaxUint64: up to the end of the log keyspace
	if max < ^uint64(0) {
		end = logKey(max + 1)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(logKey(min), end, nil); err != nil {
		return fmt.Errorf("raftstore: batch delete %d..%d: %w", min, max, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("raftstore: delete logs %d..%d: %w", min, max, err)
	}
	if s.first == 0 || max < s.first || min > s.last {
		return nil // nothing stored in the range
	}
	return s.loadBounds()
}

// Set stores a stable key durably.
func (s *Store) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.db.Set(stableKey(key), val, pebble.Sync); err != nil {
		return fmt.Errorf("raftstore: set %q: %w", key, err)
	}
	return nil
}

// Get returns a stable key's value, or ErrKeyNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	val, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: get %q: %w", key, err)
	}
	out := bytes.Clone(val)
	if out == nil {
		out = []byte{}
	}
	_ = closer.Close()
	return out, nil
}

// SetUint64 stores a stable key holding a big-endian uint64.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 reads a key written by SetUint64; ErrKeyNotFound when absent.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errcode.StorageCorrupt.New("stable uint64 value is not 8 bytes", "key", string(key), "len", fmt.Sprint(len(v)))
	}
	return binary.BigEndian.Uint64(v), nil
}
