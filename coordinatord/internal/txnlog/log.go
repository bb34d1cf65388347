// Package txnlog is the durable log of one transaction coordinator shard:
// partition <shard> of the replicated internal topic __transaction_state.
// Every accepted transition of a transactional_id is one record (key and
// JSON value from coordinatord/internal/txn), appended with acks all
// before the coordinator answers; replay keeps the latest record per key.
//
// Writes use an idempotent producer per shard ("coordinatord/<topic>/<p>")
// whose epoch grows with every takeover (the metadata revision, shifted, plus
// an attempt counter), and the takeover writes an owner record before it
// replays: partitiond then fences a previous owner's later writes
// (stale_producer_epoch) and the replay sees everything it wrote.
//
// A write whose outcome is unknown is never retried under this owner: the
// caller drops the shard and takes it over again, so the replay, not
// memory, says whether the write happened.
package txnlog

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/coordinatord/internal/txn"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Topic is the internal topic of transaction state.
const Topic = "__transaction_state"

// ownerKey is the key of takeover records.
const ownerKey = "owner"

// Client reaches the leader of a __transaction_state partition.
type Client interface {
	Append(ctx context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error)
	Fetch(ctx context.Context, req *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error)
}

// Options configures Takeover.
type Options struct {
	Partition int32
	// Epoch is the producer epoch; every takeover uses a higher one.
	Epoch int64
	Node  string
	// LifecycleEpoch returns the topic's lifecycle epoch (0: unfenced).
	LifecycleEpoch func() uint64
	Now            func() time.Time
}

// Log is the write side of one owned shard. Appends are serialised.
type Log struct {
	c    Client
	o    Options
	prod string

	mu     sync.Mutex
	next   uint64 // next sequence
	broken error  // set once a write's outcome is unknown or fenced
}

// Replayed is the state a takeover found.
type Replayed struct {
	Txns    map[string]*txn.Txn
	Records int
}

func (l *Log) lifecycle() uint64 {
	if l.o.LifecycleEpoch == nil {
		return 0
	}
	return l.o.LifecycleEpoch()
}

// Takeover writes an owner record under the new epoch (fencing earlier
// owners), then replays the partition through it.
func Takeover(ctx context.Context, c Client, o Options) (*Log, *Replayed, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	l := &Log{c: c, o: o, prod: "coordinatord/" + Topic + "/" + strconv.Itoa(int(o.Partition)), next: 1}
	owner, err := json.Marshal(map[string]any{"v": txn.FormatVersion, "type": "owner", "node": o.Node, "epoch": o.Epoch})
	if err != nil {
		return nil, nil, errcode.Internal.New("encode owner record: " + err.Error())
	}
	last, err := l.append(ctx, ownerKey, owner)
	if err != nil {
		return nil, nil, err
	}
	rep, err := l.replay(ctx, last+1)
	if err != nil {
		return nil, nil, err
	}
	return l, rep, nil
}

// Append makes t durable (acks all). After any error the log is broken:
// the caller must take the shard over again.
func (l *Log) Append(ctx context.Context, t *txn.Txn) error {
	key, val, err := txn.Encode(t)
	if err != nil {
		return err
	}
	_, err = l.append(ctx, key, val)
	return err
}

// Broken returns the error that made the log unusable, or nil.
func (l *Log) Broken() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.broken
}

func (l *Log) append(ctx context.Context, key string, val []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return 0, l.broken
	}
	rec := wire.Record{Topic: Topic, Partition: l.o.Partition, Key: key, Payload: val, Timestamp: l.o.Now().UnixMilli()}
	body, err := rec.AppendTo(nil)
	if err != nil {
		return 0, errcode.Internal.New("encode transaction log record: " + err.Error())
	}
	set := make([]byte, 4, 4+len(body))
	set[0], set[1], set[2], set[3] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
	set = append(set, body...)
	resp, err := l.c.Append(ctx, &partitionv1.AppendRequest{Topic: Topic, Partition: l.o.Partition, LifecycleEpoch: l.lifecycle(),
		Acks: -1, Records: set, RecordCount: 1, ProducerId: l.prod, ProducerEpoch: l.o.Epoch,
		BaseSequence: l.next, LastSequence: l.next, Idempotent: true})
	if err != nil {
		l.broken = errcode.CoordinatorNotAvailable.New("transaction log write failed; the shard is taken over again: "+errcode.From(err).Error(),
			"partition", strconv.Itoa(int(l.o.Partition)), "reason", "write_failed")
		if e := errcode.From(err); e.Code == errcode.StaleProducerEpoch.Name() || e.Code == errcode.ProducerFenced.Name() {
			l.broken = errcode.CoordinatorNotAvailable.New("transaction shard fenced by a newer owner",
				"partition", strconv.Itoa(int(l.o.Partition)), "reason", "fenced")
		}
		return 0, err
	}
	l.next++
	return resp.GetLastOffset(), nil
}

// replay reads the partition from its start through offset until
// (exclusive), read_committed, keeping the latest state per key.
func (l *Log) replay(ctx context.Context, until uint64) (*Replayed, error) {
	rep := &Replayed{Txns: map[string]*txn.Txn{}}
	var from uint64
	first := true
	for from < until {
		resp, err := l.c.Fetch(ctx, &partitionv1.FetchRequest{Topic: Topic, Partition: l.o.Partition, Offset: from,
			MaxBytes: 4 << 20, Isolation: partitionv1.Isolation_ISOLATION_READ_COMMITTED, LifecycleEpoch: l.lifecycle()})
		if err != nil {
			if e := errcode.From(err); first && e.Code == errcode.OffsetOutOfRange.Name() {
				// Compaction or retention moved the start: begin there.
				if v := e.Field("earliest"); v != "" {
					if n, perr := strconv.ParseUint(v, 10, 64); perr == nil && n > from {
						from, first = n, false
						continue
					}
				}
			}
			return nil, err
		}
		first = false
		set := resp.GetRecords()
		for len(set) > 0 {
			n := int(uint32(set[0])<<24 | uint32(set[1])<<16 | uint32(set[2])<<8 | uint32(set[3]))
			if n > len(set)-4 {
				return nil, errcode.StorageCorrupt.New("transaction log record set is truncated", "partition", strconv.Itoa(int(l.o.Partition)))
			}
			v, err := wire.ParseRecord(set[4 : 4+n])
			if err != nil {
				return nil, errcode.StorageCorrupt.New("transaction log record does not decode: "+err.Error(), "partition", strconv.Itoa(int(l.o.Partition)))
			}
			set = set[4+n:]
			if v.Offset() >= until {
				break
			}
			rep.Records++
			key, _ := v.Key()
			if bytes.Equal(key, []byte(ownerKey)) {
				continue
			}
			t, err := txn.Decode(key, v.Payload())
			if err != nil {
				return nil, errcode.StorageCorrupt.New(err.Error(), "partition", strconv.Itoa(int(l.o.Partition)),
					"offset", strconv.FormatUint(v.Offset(), 10))
			}
			rep.Txns[t.ID] = t
		}
		if resp.GetNextOffset() <= from {
			if resp.GetHighWatermark() < until {
				return nil, errcode.CoordinatorNotAvailable.New("transaction log not yet readable through the owner record",
					"partition", strconv.Itoa(int(l.o.Partition)), "reason", "loading")
			}
			break
		}
		from = resp.GetNextOffset()
	}
	return rep, nil
}
