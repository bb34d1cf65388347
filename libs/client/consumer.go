package client

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// ConsumerOptions configures a group Consumer.
type ConsumerOptions struct {
	Group string
	Topic string
	// Member is the requested member id (default the client id); the server
	// appends a suffix, see Consumer.Member.
	Member string
	// AutoOffsetReset applies when nothing is committed and on
	// OFFSET_OUT_OF_RANGE: earliest (default), latest or error.
	AutoOffsetReset string
	Isolation       string
	// MaxRecords and WaitMS are the CONSUME batch and wait_ms parameters
	// (defaults 1000 and 100).
	MaxRecords int
	WaitMS     int
	// HeartbeatInterval defaults to the spec's recommended 3 s.
	HeartbeatInterval time.Duration
}

// Consumer is a consumer-group member: it joins and syncs, heartbeats in the
// background, reads its assigned partitions with CONSUME (round robin) and
// commits processed positions with BATCH_COMMIT. On GEN_MISMATCH,
// member_not_found, NOT_OWNER or any other fencing answer it drops its
// assignment and rejoins on the next Poll (spec 4.5 lifecycle). It is
// at-least-once: commit after processing. Poll and Commit may be called from
// one goroutine at a time.
type Consumer struct {
	c *Client
	o ConsumerOptions

	mu        sync.Mutex
	member    string
	gen       int64
	parts     []int32
	pos       map[int32]uint64
	committed map[int32]uint64
	joined    bool
	rejoin    bool
	next      int
	closed    bool

	hbStop chan struct{}
	hbWG   sync.WaitGroup
}

// NewConsumer returns a Consumer; it joins on the first Poll.
func NewConsumer(c *Client, o ConsumerOptions) *Consumer {
	if o.Member == "" {
		o.Member = c.opts.ClientID
	}
	if o.AutoOffsetReset == "" {
		o.AutoOffsetReset = "earliest"
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = 1000
	}
	if o.WaitMS == 0 {
		o.WaitMS = 100
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 3 * time.Second
	}
	return &Consumer{c: c, o: o, member: o.Member, hbStop: make(chan struct{})}
}

// Member returns the actual member id after joining.
func (k *Consumer) Member() string { k.mu.Lock(); defer k.mu.Unlock(); return k.member }

// Generation returns the current generation.
func (k *Consumer) Generation() int64 { k.mu.Lock(); defer k.mu.Unlock(); return k.gen }

// Assignments returns the assigned partitions.
func (k *Consumer) Assignments() []int32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.parts)
}

// Position returns the next offset Poll reads from partition p.
func (k *Consumer) Position(p int32) uint64 { k.mu.Lock(); defer k.mu.Unlock(); return k.pos[p] }

// Seek sets the next offset Poll reads from partition p, and so what Commit
// commits for it: after handing out only part of a polled batch, seek to the
// offset after the last record delivered so the rest is not committed
// unseen. The server starts a read at the later of this offset and the
// group's committed offset (spec 4.6). A partition not assigned in this
// generation is ignored.
func (k *Consumer) Seek(p int32, offset uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.pos[p]; ok {
		k.pos[p] = offset
	}
}

// MustRejoin reports whether err tells a group member to stop consuming and
// join again (spec 3.3 and 4.5): a fencing-class error such as GEN_MISMATCH
// or NOT_OWNER, member_not_found, or group_not_found (the group was deleted
// or its coordinator lost it).
func MustRejoin(err error) bool {
	e, ok := errcode.As(err)
	if !ok {
		return false
	}
	return e.Class == errcode.ClassFencing || e.Code == errcode.MemberNotFound.Name() ||
		e.Code == errcode.GroupNotFound.Name() || e.Code == errcode.NotOwner.Name()
}

// join runs JOIN_GROUP, SYNC_GROUP and FETCH_OFFSET for each partition.
func (k *Consumer) join(ctx context.Context) error {
	k.mu.Lock()
	member := k.member
	k.mu.Unlock()
	jr, err := k.c.JoinGroup(ctx, k.o.Group, member, k.o.Topic)
	if err != nil && MustRejoin(err) && member != k.o.Member {
		// Our old id is gone: join afresh with the requested id.
		jr, err = k.c.JoinGroup(ctx, k.o.Group, k.o.Member, k.o.Topic)
	}
	if err != nil {
		return err
	}
	// Keep the member id even if SYNC_GROUP fails below (GEN_MISMATCH when
	// another join raced this one): the retry must resume this member, not
	// join as a new one and leave this one holding partitions until its
	// session expires.
	k.mu.Lock()
	k.member = jr.Member
	k.mu.Unlock()
	parts, err := k.c.SyncGroup(ctx, k.o.Group, jr.Member, jr.Generation, k.o.Topic)
	if err != nil {
		return err
	}
	pos := make(map[int32]uint64, len(parts))
	var latest map[int32]uint64
	for _, p := range parts {
		off, err := k.c.FetchOffset(ctx, k.o.Topic, p, k.o.Group)
		if err != nil {
			return err
		}
		if off == 0 && k.o.AutoOffsetReset == "latest" {
			if latest == nil {
				latest = map[int32]uint64{}
				los, err := k.c.ListOffsets(ctx, k.o.Topic, -1)
				if err != nil {
					return err
				}
				for _, lo := range los {
					latest[lo.Partition] = lo.Latest
				}
			}
			off = latest[p]
		}
		pos[p] = off
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.member, k.gen, k.parts, k.pos = jr.Member, jr.Generation, parts, pos
	k.committed = maps.Clone(pos)
	k.rejoin = false
	if !k.joined {
		k.joined = true
		k.hbWG.Add(1)
		go k.heartbeats()
	}
	return nil
}

func (k *Consumer) heartbeats() {
	defer k.hbWG.Done()
	t := time.NewTicker(k.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-k.hbStop:
			return
		case <-t.C:
		}
		k.mu.Lock()
		member, gen, rejoin := k.member, k.gen, k.rejoin
		k.mu.Unlock()
		if rejoin {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), k.o.HeartbeatInterval)
		_, err := k.c.Heartbeat(ctx, k.o.Topic, k.o.Group, member, gen)
		cancel()
		if err != nil && MustRejoin(err) {
			k.mu.Lock()
			k.rejoin = true
			k.mu.Unlock()
		}
	}
}

// Poll returns the next records of one assigned partition (possibly none,
// after the long-poll wait). It joins first when needed.
func (k *Consumer) Poll(ctx context.Context) ([]wire.Record, error) {
	_, _, recs, err := k.poll(ctx)
	return recs, err
}

// poll is Poll that also says which partition it read and from which
// position (what a failed transaction of TxnProcessor seeks back to).
func (k *Consumer) poll(ctx context.Context) (part int32, from uint64, recs []wire.Record, err error) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return 0, 0, nil, ErrClientClosed
	}
	need := !k.joined || k.rejoin
	k.mu.Unlock()
	if need {
		if err := k.join(ctx); err != nil {
			return 0, 0, nil, err
		}
	}
	k.mu.Lock()
	if len(k.parts) == 0 {
		k.mu.Unlock()
		// No partitions this generation: wait as a long poll would.
		t := time.NewTimer(time.Duration(k.o.WaitMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, 0, nil, ctxError(ctx, wire.CmdConsume)
		}
		return 0, 0, nil, nil
	}
	p := k.parts[k.next%len(k.parts)]
	k.next++
	off, member := k.pos[p], k.member
	k.mu.Unlock()
	b, err := k.c.Consume(ctx, ConsumeRequest{Topic: k.o.Topic, Partition: p, Offset: off, Member: member,
		Group: k.o.Group, AutoOffsetReset: k.o.AutoOffsetReset, Isolation: k.o.Isolation,
		MaxRecords: k.o.MaxRecords, WaitMS: k.o.WaitMS})
	if err != nil {
		return p, off, nil, k.handleConsumeError(p, err)
	}
	if n := len(b.Records); n > 0 {
		k.mu.Lock()
		if cur, ok := k.pos[p]; ok && cur == off {
			k.pos[p] = b.Records[n-1].Offset + 1
		}
		k.mu.Unlock()
	}
	return p, off, b.Records, nil
}

func (k *Consumer) handleConsumeError(p int32, err error) error {
	e, ok := errcode.As(err)
	if !ok {
		return err
	}
	if errors.Is(e, errcode.OffsetOutOfRange) && k.o.AutoOffsetReset != "error" {
		field := "earliest"
		if k.o.AutoOffsetReset == "latest" {
			field = "latest"
		}
		if v, perr := strconv.ParseUint(e.Field(field), 10, 64); perr == nil {
			k.mu.Lock()
			k.pos[p] = v
			k.mu.Unlock()
			return nil
		}
	}
	if MustRejoin(e) {
		k.mu.Lock()
		k.rejoin = true
		k.mu.Unlock()
	}
	return err
}

// Commit commits the positions reached by Poll (the next offset to read of
// each partition that moved). offset_regression fails the commit without
// changing local state; fencing answers schedule a rejoin.
func (k *Consumer) Commit(ctx context.Context) error {
	k.mu.Lock()
	var offs []wire.PartitionOffset
	for _, p := range k.parts {
		if k.pos[p] != k.committed[p] {
			offs = append(offs, wire.PartitionOffset{Partition: p, Offset: k.pos[p]})
		}
	}
	member, gen := k.member, k.gen
	k.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	_, err := k.c.BatchCommit(ctx, k.o.Topic, k.o.Group, member, gen, offs)
	if err != nil {
		if MustRejoin(err) {
			k.mu.Lock()
			k.rejoin = true
			k.mu.Unlock()
		}
		return err
	}
	k.mu.Lock()
	for _, o := range offs {
		k.committed[o.Partition] = o.Offset
	}
	k.mu.Unlock()
	return nil
}

// Close stops heartbeating and leaves the group (commit first).
func (k *Consumer) Close(ctx context.Context) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	joined, member := k.joined, k.member
	k.mu.Unlock()
	close(k.hbStop)
	k.hbWG.Wait()
	if !joined {
		return nil
	}
	return k.c.LeaveGroup(ctx, k.o.Topic, k.o.Group, member)
}
