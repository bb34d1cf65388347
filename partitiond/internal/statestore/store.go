package statestore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/telemetry"
)

// Partition states recorded in the meta.
const (
	// StateCreating: the meta is written, the log directory may not exist
	// yet; Open creates it.
	StateCreating = "creating"
	// StateLive: the log directory exists; a missing one is corruption.
	StateLive = "live"
	// StateDeleting: delete committed, node-local cleanup outstanding.
	StateDeleting = "deleting"
)

// TopicConfig is the part of a topic definition (spec 2.1) the partition
// storage uses.
type TopicConfig struct {
	CleanupPolicy  string `json:"cleanup_policy,omitempty"`
	RetentionHours int64  `json:"retention_hours,omitempty"`
	RetentionBytes int64  `json:"retention_bytes,omitempty"`
	Idempotent     bool   `json:"idempotent,omitempty"`
}

// Meta is a partition's record in the node state.
type Meta struct {
	Topic          string      `json:"topic"`
	Partition      int32       `json:"partition"`
	LifecycleEpoch uint64      `json:"lifecycle_epoch"`
	State          string      `json:"state"`
	Dir            string      `json:"dir"`
	Config         TopicConfig `json:"config"`
	LeaderEpoch    uint64      `json:"leader_epoch"`
}

// HWM is a high-watermark checkpoint.
type HWM struct {
	HWM            uint64
	LeaderEpoch    uint64
	LifecycleEpoch uint64
}

// Store is the node's pebble instance.
type Store struct {
	db *pebble.DB
}

// The node state is small (partition records, checkpoints written every few
// seconds), so pebble's defaults (4 MiB memtables, an 8 MiB block cache) are
// far more than it uses: sized down, a memtable costs 256 KiB of heap at
// most (docs/performance.md, "Idle and peak RSS").
const (
	cacheSize    = 1 << 20
	memTableSize = 256 << 10
)

// Open opens (creating) the store in dir on fs.
func Open(dir string, fs vfs.FS, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FS:           fs,
		CacheSize:    cacheSize,
		MemTableSize: memTableSize,
		Logger:       telemetry.PrintfLogger{Logger: logger, Component: "pebble"},
		// Pinned so a pebble upgrade never ratchets the on-disk format.
		FormatMajorVersion: pebble.FormatTableFormatV6,
	})
	if err != nil {
		return nil, errcode.StorageUnavailable.New(fmt.Sprintf("open partition state store %s: %v", dir, err))
	}
	return &Store{db: db}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

func be32(p int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(p)) }

// MetaKey is m/<topic>/<partition>.
func MetaKey(topic string, p int32) []byte {
	return append([]byte("m/"+topic+"/"), be32(p)...)
}

// PartitionPrefix is p/<topic>/<partition>/, the start of a partition's
// data state.
func PartitionPrefix(topic string, p int32) []byte {
	return append(append([]byte("p/"+topic+"/"), be32(p)...), '/')
}

// Sub-key names under PartitionPrefix.
const (
	KeyHWM             = "hwm"
	KeyProducerCkpt    = "prodckpt"
	PrefixProducer     = "prod/"
	PrefixTransactions = "txn/" // transaction index: KeyTxnCkpt
	KeyTxnCkpt         = PrefixTransactions + "ckpt"
	PrefixESIndex      = "esidx/"  // reserved: event-sourcing aggregate index
	PrefixESSnapshot   = "essnap/" // reserved: event-sourcing snapshots
)

func sub(topic string, p int32, name string) []byte {
	return append(PartitionPrefix(topic, p), name...)
}

// prefixEnd returns the smallest key above every key with prefix b.
func prefixEnd(b []byte) []byte {
	end := append([]byte(nil), b...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

func opts(sync bool) *pebble.WriteOptions {
	if sync {
		return pebble.Sync
	}
	return pebble.NoSync
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return errcode.StorageUnavailable.New(fmt.Sprintf("partition state %s: %v", op, err))
}

// PutMeta writes a partition meta.
func (s *Store) PutMeta(m Meta, sync bool) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return wrap("write meta", s.db.Set(MetaKey(m.Topic, m.Partition), v, opts(sync)))
}

// ResetPartition writes m and drops the partition's whole data state in one
// synced batch: the lifecycle marker is durable, with no state of the old
// epoch left, before the caller replaces the log.
func (s *Store) ResetPartition(m Meta) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	pre := PartitionPrefix(m.Topic, m.Partition)
	if err := b.DeleteRange(pre, prefixEnd(pre), nil); err != nil {
		return wrap("reset", err)
	}
	if err := b.Set(MetaKey(m.Topic, m.Partition), v, nil); err != nil {
		return wrap("reset", err)
	}
	return wrap("reset", b.Commit(pebble.Sync))
}

// RemovePartition drops the meta and the data state of a partition.
func (s *Store) RemovePartition(topic string, p int32) error {
	b := s.db.NewBatch()
	defer b.Close()
	pre := PartitionPrefix(topic, p)
	if err := b.DeleteRange(pre, prefixEnd(pre), nil); err != nil {
		return wrap("remove", err)
	}
	if err := b.Delete(MetaKey(topic, p), nil); err != nil {
		return wrap("remove", err)
	}
	return wrap("remove", b.Commit(pebble.Sync))
}

// Metas returns every partition meta.
func (s *Store) Metas() ([]Meta, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("m/"), UpperBound: prefixEnd([]byte("m/"))})
	if err != nil {
		return nil, wrap("list", err)
	}
	defer it.Close()
	var out []Meta
	for ok := it.First(); ok; ok = it.Next() {
		var m Meta
		if err := json.Unmarshal(it.Value(), &m); err != nil {
			return nil, errcode.StorageCorrupt.New("partition meta does not decode: "+err.Error(), "key", string(it.Key()))
		}
		out = append(out, m)
	}
	return out, wrap("list", it.Error())
}

// Meta returns one partition meta; ok is false when there is none.
func (s *Store) Meta(topic string, p int32) (Meta, bool, error) {
	v, closer, err := s.db.Get(MetaKey(topic, p))
	if errors.Is(err, pebble.ErrNotFound) {
		return Meta{}, false, nil
	}
	if err != nil {
		return Meta{}, false, wrap("read meta", err)
	}
	defer closer.Close()
	var m Meta
	if err := json.Unmarshal(v, &m); err != nil {
		return Meta{}, false, errcode.StorageCorrupt.New("partition meta does not decode: "+err.Error(), "topic", topic)
	}
	return m, true, nil
}

// PutHWM writes a high-watermark checkpoint (not synced: an older
// checkpoint after a crash is still a valid lower bound).
func (s *Store) PutHWM(topic string, p int32, h HWM) error {
	v := binary.BigEndian.AppendUint64(nil, h.HWM)
	v = binary.BigEndian.AppendUint64(v, h.LeaderEpoch)
	v = binary.BigEndian.AppendUint64(v, h.LifecycleEpoch)
	return wrap("write hwm", s.db.Set(sub(topic, p, KeyHWM), v, pebble.NoSync))
}

// GetHWM reads the HWM checkpoint; ok is false when there is none. A
// replica that becomes a follower starts from it (not from its own durable
// end, which may hold records the new leader never had).
func (s *Store) GetHWM(topic string, p int32) (HWM, bool, error) {
	v, closer, err := s.db.Get(sub(topic, p, KeyHWM))
	if errors.Is(err, pebble.ErrNotFound) {
		return HWM{}, false, nil
	}
	if err != nil {
		return HWM{}, false, wrap("read hwm", err)
	}
	defer closer.Close()
	if len(v) != 24 {
		return HWM{}, false, errcode.StorageCorrupt.New("hwm checkpoint has the wrong size", "topic", topic)
	}
	return HWM{HWM: binary.BigEndian.Uint64(v), LeaderEpoch: binary.BigEndian.Uint64(v[8:]),
		LifecycleEpoch: binary.BigEndian.Uint64(v[16:])}, true, nil
}

// ProducerEntry is one producer's encoded state.
type ProducerEntry struct {
	ID    string
	State []byte
}

// PutProducerCheckpoint replaces the partition's producer states with
// entries, stating that they cover every batch below covered. The write is
// atomic; sync makes it durable before returning.
func (s *Store) PutProducerCheckpoint(topic string, p int32, covered uint64, entries []ProducerEntry, sync bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	pre := sub(topic, p, PrefixProducer)
	if err := b.DeleteRange(pre, prefixEnd(pre), nil); err != nil {
		return wrap("write producer checkpoint", err)
	}
	for _, e := range entries {
		if err := b.Set(append(append([]byte(nil), pre...), e.ID...), e.State, nil); err != nil {
			return wrap("write producer checkpoint", err)
		}
	}
	if err := b.Set(sub(topic, p, KeyProducerCkpt), binary.BigEndian.AppendUint64(nil, covered), nil); err != nil {
		return wrap("write producer checkpoint", err)
	}
	return wrap("write producer checkpoint", b.Commit(opts(sync)))
}

// ProducerCheckpoint returns the covered offset and the producer states;
// ok is false when no checkpoint was written.
func (s *Store) ProducerCheckpoint(topic string, p int32) (covered uint64, entries []ProducerEntry, ok bool, err error) {
	v, closer, err := s.db.Get(sub(topic, p, KeyProducerCkpt))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, wrap("read producer checkpoint", err)
	}
	if len(v) != 8 {
		closer.Close()
		return 0, nil, false, errcode.StorageCorrupt.New("producer checkpoint offset has the wrong size", "topic", topic)
	}
	covered = binary.BigEndian.Uint64(v)
	closer.Close()
	pre := sub(topic, p, PrefixProducer)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixEnd(pre)})
	if err != nil {
		return 0, nil, false, wrap("read producer checkpoint", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		entries = append(entries, ProducerEntry{ID: string(it.Key()[len(pre):]), State: append([]byte(nil), it.Value()...)})
	}
	return covered, entries, true, wrap("read producer checkpoint", it.Error())
}

// PutTxnCheckpoint stores the transaction index's checkpoint (txnindex
// Encode), stating that it covers every batch below covered; sync makes it
// durable before returning.
func (s *Store) PutTxnCheckpoint(topic string, p int32, covered uint64, index []byte, sync bool) error {
	v := append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(index)), covered), index...)
	return wrap("write transaction index checkpoint", s.db.Set(sub(topic, p, KeyTxnCkpt), v, opts(sync)))
}

// TxnCheckpoint returns the transaction index checkpoint and the offset it
// covers; ok is false when none was written.
func (s *Store) TxnCheckpoint(topic string, p int32) (covered uint64, index []byte, ok bool, err error) {
	v, closer, err := s.db.Get(sub(topic, p, KeyTxnCkpt))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, wrap("read transaction index checkpoint", err)
	}
	defer closer.Close()
	if len(v) < 8 {
		return 0, nil, false, errcode.StorageCorrupt.New("transaction index checkpoint is too short", "topic", topic)
	}
	return binary.BigEndian.Uint64(v), append([]byte(nil), v[8:]...), true, nil
}
