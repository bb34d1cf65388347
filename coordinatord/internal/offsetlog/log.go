package offsetlog

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Client reaches the leader of a __consumer_offsets partition (the server
// resolves the leader from metad; tests dial a fake).
type Client interface {
	Append(ctx context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error)
	Fetch(ctx context.Context, req *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error)
	ListOffsets(ctx context.Context, req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error)
}

// Options configures Takeover.
type Options struct {
	Topic     string
	Partition int32
	// Epoch is the producer epoch: the metadata revision at takeover, so a
	// later owner always writes with a higher one.
	Epoch int64
	Node  string
	// LifecycleEpoch returns the topic's current lifecycle epoch (0 when nil).
	LifecycleEpoch func() uint64
	Now            func() time.Time
	// FetchMaxBytes bounds one replay fetch (default 4 MiB).
	FetchMaxBytes uint32
}

// Log is the write side of one owned partition. Flushes are serialised (the
// idempotent producer's sequence numbers must arrive in order) and carry
// every append queued meanwhile.
type Log struct {
	c    Client
	o    Options
	prod string

	// qmu guards queue: appends waiting for the next flush.
	qmu   sync.Mutex
	queue []*waiter

	mu     sync.Mutex // held by the one flushing
	next   uint64     // next base sequence
	fenced error
	// pending is a record set whose append outcome is unknown; it owns the
	// sequence numbers from next and is re-sent before anything else.
	pending  []byte
	pendingN uint64

	// end is the offset after this owner's last acknowledged append: while
	// nobody else writes, the partition's high watermark equals it. 0 means
	// unknown (an append's outcome or its offsets are unknown).
	end atomic.Uint64
	// reads coalesces Confirm calls (see Confirm).
	reads confirmRounds
}

// ProducerID is the idempotent producer id of a partition's coordinator:
// the same for every owner, so a higher epoch fences the previous one.
func ProducerID(topic string, partition int32) string {
	return "coordinatord/" + topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// Takeover fences previous owners by writing an owner marker with the new
// epoch, then replays the partition up to and including that marker.
func Takeover(ctx context.Context, c Client, o Options) (*Log, *Replayed, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FetchMaxBytes == 0 {
		o.FetchMaxBytes = 4 << 20
	}
	l := &Log{c: c, o: o, prod: ProducerID(o.Topic, o.Partition), next: 1}
	marker, dup, err := l.append(ctx, []Value{{V: FormatVersion, Type: TypeOwner, Node: o.Node, Epoch: o.Epoch}})
	if err != nil {
		return nil, nil, err
	}
	if dup {
		// An earlier attempt of this takeover stored the marker but its
		// answer was lost (epochs are unique per process and revision, so
		// nobody else used this one). The marker lies below the current
		// high watermark: replay through that instead of its offset. The
		// end stays unknown (a newer owner may write meanwhile), so the
		// first Confirm proves ownership with an append.
		marker = noMarkerOffset
	}
	rep, err := l.replay(ctx, marker)
	if err != nil {
		return nil, nil, err
	}
	return l, rep, nil
}

// Fenced returns the error that fenced this owner, or nil.
func (l *Log) Fenced() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced
}

// maxCoalesce bounds the records of one coalesced flush (an offset record
// is about 150 bytes, so about 600 KiB).
const maxCoalesce = 4096

// waiter is one Append waiting to be flushed.
type waiter struct {
	vals []Value
	done chan error // buffered: the flusher never blocks
}

// Append durably appends vals (acks=all). Concurrent appends are coalesced
// (group commit): whoever gets the flush lock writes everything queued so
// far as one record set, so commits of many groups share one round trip.
// One Append's values always land together; values of different appends
// may share a record set, and all of them then share its outcome.
func (l *Log) Append(ctx context.Context, vals []Value) error {
	w := &waiter{vals: vals, done: make(chan error, 1)}
	l.qmu.Lock()
	l.queue = append(l.queue, w)
	l.qmu.Unlock()
	l.mu.Lock()
	select {
	case err := <-w.done: // an earlier flusher took it
		l.mu.Unlock()
		return err
	default:
	}
	l.qmu.Lock()
	// Take a prefix of at most maxCoalesce records (at least one append),
	// so a record set stays well inside partitiond's batch bound; the rest
	// is flushed by its own callers.
	n, count := 0, 0
	for n < len(l.queue) && (n == 0 || count+len(l.queue[n].vals) <= maxCoalesce) {
		count += len(l.queue[n].vals)
		n++
	}
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	l.qmu.Unlock()
	var all []Value
	for _, b := range batch {
		all = append(all, b.vals...)
	}
	_, _, err := l.appendLocked(ctx, all)
	l.mu.Unlock()
	for _, b := range batch {
		b.done <- err
	}
	return <-w.done
}

func (l *Log) lifecycle() uint64 {
	if l.o.LifecycleEpoch == nil {
		return 0
	}
	return l.o.LifecycleEpoch()
}

// append returns the last offset written and whether partitiond answered
// it as a duplicate of a stored batch. Retries reuse the sequence numbers,
// so partitiond answers a retry of a stored batch as a duplicate instead of
// storing it twice.
//
// A batch whose outcome stays unknown (the caller's deadline passed while
// partitiond was unreachable) keeps its sequence numbers: it becomes
// pending and is re-sent, unchanged, before anything else. Giving those
// numbers to other data would let partitiond answer that data as a
// duplicate of the lost-looking batch, silently dropping it.
func (l *Log) append(ctx context.Context, vals []Value) (last uint64, duplicate bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(ctx, vals)
}

// appendLocked is append with l.mu held.
func (l *Log) appendLocked(ctx context.Context, vals []Value) (last uint64, duplicate bool, err error) {
	if l.fenced != nil {
		return 0, false, l.fenced
	}
	if l.pending != nil {
		if _, _, err := l.send(ctx, l.pending, l.pendingN); err != nil {
			return 0, false, err
		}
		l.pending, l.pendingN = nil, 0
	}
	set, err := encodeSet(l.o.Topic, l.o.Partition, l.o.Now().UnixMilli(), vals)
	if err != nil {
		return 0, false, errcode.Internal.New("encode offsets record: " + err.Error())
	}
	return l.send(ctx, set, uint64(len(vals)))
}

// send appends one record set with sequence numbers l.next.. and advances
// l.next when it is stored. Caller holds l.mu.
func (l *Log) send(ctx context.Context, set []byte, n uint64) (last uint64, duplicate bool, err error) {
	backoff := pace.Backoff{Initial: 20 * time.Millisecond, Max: time.Second}
	resetOnce := false
	for {
		req := &partitionv1.AppendRequest{
			Topic: l.o.Topic, Partition: l.o.Partition, LifecycleEpoch: l.lifecycle(), Acks: -1,
			Records: set, RecordCount: uint32(n), ProducerId: l.prod, ProducerEpoch: l.o.Epoch,
			BaseSequence: l.next, LastSequence: l.next + n - 1, Idempotent: true,
		}
		resp, err := l.c.Append(ctx, req)
		if err == nil && resp.GetError() != nil {
			err = errcode.FromProto(resp.GetError())
		}
		if err == nil {
			l.next += n
			if resp.GetDuplicate() {
				l.end.Store(0)
			} else {
				l.end.Store(resp.GetLastOffset() + 1)
			}
			return resp.GetLastOffset(), resp.GetDuplicate(), nil
		}
		e := errcode.From(err)
		switch {
		case e.Code == errcode.StaleProducerEpoch.Name() || e.Code == errcode.ProducerFenced.Name():
			// A newer owner took the partition: never write again.
			l.fenced = errcode.CoordinatorNotAvailable.New("offsets partition taken over by a newer coordinator",
				"partition", strconv.FormatInt(int64(l.o.Partition), 10), "reason", "fenced")
			return 0, false, l.fenced
		case e.Code == errcode.DuplicateSequence.Name():
			// Stored already, beyond the dedup window: the data is there.
			l.next += n
			l.end.Store(0)
			return 0, true, nil
		case e.Code == errcode.OutOfOrderSequence.Name() && !resetOnce:
			// partitiond forgot the producer after its idle TTL and wants
			// a first batch again; restarting at 1 keeps the same epoch.
			resetOnce = true
			l.next = 1
			continue
		case e.Retryable:
			if !backoff.Wait(ctx) {
				l.pending, l.pendingN = set, n
				l.end.Store(0)
				return 0, false, errcode.CoordinatorNotAvailable.New("offsets append did not complete: "+e.Error(), "reason", "append_unknown")
			}
		default:
			return 0, false, e
		}
	}
}

// noMarkerOffset tells replay to read through the high watermark its first
// fetch reports, the marker's own offset being unknown.
const noMarkerOffset = ^uint64(0)

// replay reads the partition from its start through offset until (or the
// first reported high watermark, for noMarkerOffset).
func (l *Log) replay(ctx context.Context, until uint64) (*Replayed, error) {
	r := newReplayer()
	var at uint64
	backoff := pace.Backoff{Initial: 10 * time.Millisecond, Max: time.Second}
	first := true
	for until == noMarkerOffset || at <= until {
		resp, err := l.c.Fetch(ctx, &partitionv1.FetchRequest{Topic: l.o.Topic, Partition: l.o.Partition, Offset: at,
			MaxRecords: 1000, MaxBytes: l.o.FetchMaxBytes, WaitMs: 200,
			Isolation: partitionv1.Isolation_ISOLATION_READ_COMMITTED, LifecycleEpoch: l.lifecycle()})
		if err != nil {
			e := errcode.From(err)
			if e.Code == errcode.OffsetOutOfRange.Name() {
				// Compaction or retention moved the start: resume there.
				if earliest, perr := strconv.ParseUint(e.Field("earliest"), 10, 64); perr == nil && earliest > at {
					at = earliest
					continue
				}
			}
			if !e.Retryable || ctx.Err() != nil {
				return nil, e
			}
			if !backoff.Wait(ctx) {
				return nil, replayInterrupted(ctx)
			}
			continue
		}
		if first && until == noMarkerOffset {
			first = false
			if resp.GetHighWatermark() == 0 {
				break
			}
			until = resp.GetHighWatermark() - 1
		}
		recs, err := decodeSet(resp.GetRecords(), at)
		if err != nil {
			return nil, err
		}
		for _, rr := range recs {
			if rr.control || rr.offset > until {
				continue
			}
			v, err := Decode(rr.key, rr.payload, rr.offset)
			if err != nil {
				return nil, err
			}
			r.add(v)
		}
		next := resp.GetNextOffset()
		if next <= at {
			if resp.GetLogStartOffset() > at {
				next = resp.GetLogStartOffset()
			} else {
				// Nothing visible yet (the marker's HWM still advancing).
				if !backoff.Wait(ctx) {
					return nil, replayInterrupted(ctx)
				}
				continue
			}
		}
		at = next
	}
	return r.result(), nil
}

func replayInterrupted(ctx context.Context) error {
	return errcode.CoordinatorNotAvailable.New("offsets replay interrupted: " + ctx.Err().Error())
}
