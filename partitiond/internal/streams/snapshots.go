package streams

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/strataio/strata/libs/errcode"
)

// SnapshotFile is the snapshot store's file in the partition directory; the
// log ignores it, and it goes with the directory when the partition is
// deleted or truncated under a new lifecycle epoch.
const SnapshotFile = "stream-snapshots.dat"

// Entry limits: a key as long as a Wire v2 string may reasonably be, a
// payload up to the broker's largest frame.
const (
	MaxKeyLen      = 64 << 10
	MaxPayloadLen  = 64 << 20
	entryHeaderLen = 8 // u32 body length, u32 CRC32C of the body
	// rewriteMin is the file size from which a store with mostly replaced
	// snapshots is rewritten.
	rewriteMin = 4 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is one aggregate's stored snapshot.
type Snapshot struct {
	Key     string
	Version uint64
	Payload []byte
}

// errTorn marks an entry cut short or damaged: the tail of the file from it
// on is what a crash left half written.
var errTorn = errors.New("torn snapshot entry")

// appendEntry encodes s as one file entry:
//
//	u32 body length | u32 CRC32C(body) | body
//	body = u16 key length | key | u64 version | u32 payload length | payload
func appendEntry(dst []byte, s Snapshot) []byte {
	bodyLen := 2 + len(s.Key) + 8 + 4 + len(s.Payload)
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(bodyLen))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	body := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s.Key)))
	dst = append(dst, s.Key...)
	dst = binary.BigEndian.AppendUint64(dst, s.Version)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.Payload)))
	dst = append(dst, s.Payload...)
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[body:], castagnoli))
	return dst
}

// DecodeEntry decodes the first entry of b and returns it with the bytes it
// took. A short, oversized, corrupt or inconsistent entry is errTorn; the
// payload is copied, so b may be reused.
func DecodeEntry(b []byte) (Snapshot, int, error) {
	if len(b) < entryHeaderLen {
		return Snapshot{}, 0, errTorn
	}
	n := binary.BigEndian.Uint32(b)
	if n < 2+8+4 || uint64(n) > uint64(len(b)-entryHeaderLen) || n > MaxKeyLen+MaxPayloadLen+14 {
		return Snapshot{}, 0, errTorn
	}
	body := b[entryHeaderLen : entryHeaderLen+int(n)]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return Snapshot{}, 0, errTorn
	}
	kl := int(binary.BigEndian.Uint16(body))
	if 2+kl+8+4 > len(body) {
		return Snapshot{}, 0, errTorn
	}
	key := string(body[2 : 2+kl])
	ver := binary.BigEndian.Uint64(body[2+kl:])
	pl := binary.BigEndian.Uint32(body[2+kl+8:])
	if uint64(pl) != uint64(len(body)-(2+kl+12)) {
		return Snapshot{}, 0, errTorn
	}
	payload := append([]byte{}, body[2+kl+12:]...)
	return Snapshot{Key: key, Version: ver, Payload: payload}, entryHeaderLen + int(n), nil
}

// Store keeps one snapshot per aggregate key of one partition: an
// append-only file of entries, fsynced per save, the last entry of a key
// winning. Opening reads it whole; a torn tail (a crash mid-write) is cut.
// Snapshots are monotonic per key: a lower version than the stored one is
// refused, an equal one replaces the payload (a retried save).
type Store struct {
	path string
	// id is this opening's incarnation, random: a change sequence is only
	// meaningful against the same id.
	id uint64

	mu     sync.Mutex
	f      *os.File
	size   int64
	live   map[string]Snapshot
	liveSz int64
	closed bool
	// seq numbers the stored snapshots in the order they were stored
	// (from 1 per opening); changes lists (seq, key) in that order, an
	// entry superseded when the key's changedAt is later. They make the
	// followers' catch-up incremental (Changes).
	seq       uint64
	changes   []change
	changedAt map[string]uint64
}

// change is one stored snapshot in the change sequence.
type change struct {
	seq uint64
	key string
}

// OpenStore opens (creating) the store of the partition directory dir.
func OpenStore(dir string) (*Store, error) {
	s := &Store{path: filepath.Join(dir, SnapshotFile), id: rand.Uint64() | 1, live: map[string]Snapshot{}, changedAt: map[string]uint64{}}
	_ = os.Remove(s.path + ".tmp") // an interrupted rewrite
	data, err := os.ReadFile(s.path)
	if err != nil && !os.IsNotExist(err) {
		return nil, unavailable("read", s.path, err)
	}
	pos := 0
	for pos < len(data) {
		sn, n, err := DecodeEntry(data[pos:])
		if err != nil {
			break
		}
		s.put(sn)
		pos += n
	}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, unavailable("open", s.path, err)
	}
	if pos < len(data) {
		// A torn tail: only an unacknowledged save can be in it, since every
		// save is synced before it is answered.
		if err := f.Truncate(int64(pos)); err != nil {
			_ = f.Close()
			return nil, unavailable("truncate", s.path, err)
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return nil, unavailable("sync", s.path, err)
		}
	}
	if len(data) == 0 {
		if err := syncDir(dir); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	s.f, s.size = f, int64(pos)
	return s, nil
}

func unavailable(op, path string, err error) error {
	return errcode.StorageUnavailable.New("snapshot store: "+op+" "+path+": "+err.Error(), "path", path)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return unavailable("open dir", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return unavailable("sync dir", dir, err)
	}
	return nil
}

func entrySize(s Snapshot) int64 { return int64(entryHeaderLen + 14 + len(s.Key) + len(s.Payload)) }

func (s *Store) put(sn Snapshot) {
	if old, ok := s.live[sn.Key]; ok {
		s.liveSz -= entrySize(old)
	}
	s.live[sn.Key] = sn
	s.liveSz += entrySize(sn)
	s.seq++
	s.changedAt[sn.Key] = s.seq
	s.changes = append(s.changes, change{s.seq, sn.Key})
	if len(s.changes) > 1024 && len(s.changes) > 2*len(s.live) {
		// Drop the superseded entries.
		kept := s.changes[:0]
		for _, c := range s.changes {
			if s.changedAt[c.key] == c.seq {
				kept = append(kept, c)
			}
		}
		clear(s.changes[len(kept):])
		s.changes = kept
	}
}

// ID is the store's incarnation: Changes' sequence numbers hold for it
// only.
func (s *Store) ID() uint64 { return s.id }

// Changes returns the key and version of every snapshot stored after
// sequence number since, in the order stored, and the store's sequence
// number now; since 0 lists them all.
func (s *Store) Changes(since uint64) ([]Snapshot, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.changes), func(i int) bool { return s.changes[i].seq > since })
	var out []Snapshot
	for _, c := range s.changes[i:] {
		if s.changedAt[c.key] == c.seq {
			out = append(out, Snapshot{Key: c.key, Version: s.live[c.key].Version})
		}
	}
	return out, s.seq
}

// Put stores sn durably. It returns false (and stores nothing) when the
// stored snapshot of the key has a higher version.
func (s *Store) Put(sn Snapshot) (bool, error) {
	if len(sn.Key) > MaxKeyLen || len(sn.Payload) > MaxPayloadLen {
		return false, errcode.InvalidParameter.New("snapshot key or payload too large", "param", "message",
			"key_bytes", strconv.Itoa(len(sn.Key)), "payload_bytes", strconv.Itoa(len(sn.Payload)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, errcode.PartitionNotFound.New("snapshot store closed with its partition")
	}
	if old, ok := s.live[sn.Key]; ok && old.Version > sn.Version {
		return false, nil
	}
	buf := appendEntry(nil, sn)
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		return false, unavailable("write", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		// The bytes may or may not be on disk: cut them so the file never
		// holds a snapshot that was refused.
		_ = s.f.Truncate(s.size)
		return false, unavailable("sync", s.path, err)
	}
	s.size += int64(len(buf))
	s.put(Snapshot{Key: sn.Key, Version: sn.Version, Payload: append([]byte{}, sn.Payload...)})
	if s.size > rewriteMin && s.size > 2*s.liveSz {
		// Best effort: a failed rewrite leaves the old file, still valid.
		_ = s.rewriteLocked()
	}
	return true, nil
}

// rewriteLocked writes the live snapshots to a new file and renames it over
// the old one.
func (s *Store) rewriteLocked() error {
	keys := make([]string, 0, len(s.live))
	for k := range s.live {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf []byte
	for _, k := range keys {
		buf = appendEntry(buf, s.live[k])
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return unavailable("create", tmp, err)
	}
	if _, err := f.Write(buf); err == nil {
		err = f.Sync()
	} else {
		_ = f.Close()
		_ = os.Remove(tmp)
		return unavailable("write", tmp, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return unavailable("rename", tmp, err)
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		_ = f.Close()
		return err
	}
	_ = s.f.Close()
	s.f, s.size = f, int64(len(buf))
	return nil
}

// Get returns the snapshot of key.
func (s *Store) Get(key string) (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.live[key]
	return sn, ok
}

// List returns every key and version (no payloads), sorted by key.
func (s *Store) List() []Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Snapshot, 0, len(s.live))
	for k, v := range s.live {
		out = append(out, Snapshot{Key: k, Version: v.Version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Close closes the file; later calls fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.f.Close(); err != nil && !errors.Is(err, io.EOF) {
		return unavailable("close", s.path, err)
	}
	return nil
}
