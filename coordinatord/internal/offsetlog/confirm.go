package offsetlog

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// confirmTimeout bounds one confirmation round. A round is shared by every
// caller that joined it, so it does not run on any one caller's context.
const confirmTimeout = 5 * time.Second

// Confirm returns nil once it has proved that this owner was still the
// only writer of the partition at some moment after the call began, so a
// read answered from the owner's memory afterwards is at least as new as
// every commit any owner acknowledged before the read arrived.
//
// Writes need no such proof (a newer owner's higher producer epoch fences
// them at partitiond), but reads never touch the log: a deposed owner whose
// metadata view lags could otherwise answer FETCH_OFFSET from memory below a
// commit the new owner already acknowledged.
//
// The proof: a new owner serves only after its owner marker is stored, and
// once it is, partitiond refuses every later append of ours. So if the
// partition's high watermark, read after the call began, still equals the
// end of our own acknowledged appends, no marker of anybody else was there
// yet. When it differs (our own append in flight, an unknown outcome, or a
// newer owner), an owner-marker append decides: it succeeds only while no
// higher epoch has written, and fails with the fencing error otherwise.
//
// Concurrent calls are coalesced: a caller joins the next round that has
// not started yet, so a burst of reads costs one ListOffsets.
func (l *Log) Confirm(ctx context.Context) error {
	return l.reads.do(ctx, func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
		defer cancel()
		return l.confirm(cctx)
	})
}

func (l *Log) confirm(ctx context.Context) error {
	// Fast path, without the flush lock: any acknowledged marker of a newer
	// owner lies after all of our acknowledged records, so the watermark
	// falling between our end before and after the call excludes one.
	if e0 := l.end.Load(); e0 != 0 {
		hwm, err := l.highWatermark(ctx)
		if err != nil {
			return err
		}
		if e1 := l.end.Load(); e1 != 0 && e0 <= hwm && hwm <= e1 {
			return nil
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced != nil {
		return l.fenced
	}
	if e := l.end.Load(); e != 0 && l.pending == nil {
		// No append of ours is in flight now: the watermark must equal
		// our end exactly.
		hwm, err := l.highWatermark(ctx)
		if err != nil {
			return err
		}
		if hwm == e {
			return nil
		}
	}
	_, _, err := l.appendLocked(ctx, []Value{{V: FormatVersion, Type: TypeOwner, Node: l.o.Node, Epoch: l.o.Epoch}})
	return err
}

// highWatermark asks the partition's leader for its high watermark.
func (l *Log) highWatermark(ctx context.Context) (uint64, error) {
	resp, err := l.c.ListOffsets(ctx, &partitionv1.ListOffsetsRequest{Topic: l.o.Topic, Partitions: []int32{l.o.Partition}})
	if err != nil {
		return 0, errcode.From(err)
	}
	for _, po := range resp.GetPartitions() {
		if po.GetPartition() != l.o.Partition {
			continue
		}
		if po.GetError() != nil {
			return 0, errcode.FromProto(po.GetError())
		}
		return po.GetHwm(), nil
	}
	return 0, errcode.CoordinatorNotAvailable.New("offsets partition missing from ListOffsets answer",
		"partition", strconv.FormatInt(int64(l.o.Partition), 10), "reason", "confirm")
}

// confirmRounds coalesces concurrent confirmations. A round runs at most
// once; a caller only joins a round that has not started, so the round's
// proof always postdates the caller's arrival.
type confirmRounds struct {
	token chan struct{} // capacity 1: held by the caller running a round

	mu      sync.Mutex
	waiting *round // the next round to run, joined by callers arriving now
}

type round struct {
	done chan struct{}
	err  error
}

func (c *confirmRounds) do(ctx context.Context, run func() error) error {
	c.mu.Lock()
	if c.token == nil {
		c.token = make(chan struct{}, 1)
	}
	if c.waiting == nil {
		c.waiting = &round{done: make(chan struct{})}
	}
	r := c.waiting
	c.mu.Unlock()
	select {
	case c.token <- struct{}{}:
		c.mu.Lock()
		mine := c.waiting == r
		if mine {
			c.waiting = nil // later arrivals start the next round
		}
		c.mu.Unlock()
		if mine {
			r.err = run()
			close(r.done)
		}
		// Otherwise another caller ran r before handing the token on, so
		// r is done.
		<-c.token
		<-r.done
		return r.err
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return errcode.CoordinatorNotAvailable.New("offsets read confirmation interrupted: "+ctx.Err().Error(), "reason", "confirm")
	}
}
