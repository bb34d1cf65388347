// Package fakebroker is an in-process Wire v2 broker for tests of the Go
// client, the CLI and the load tool. It speaks the real protocol through
// libs/wire (negotiation, frames, compression, CRQ2, CBV2, typed errors,
// STREAM_CONTROL) and keeps topics, records, groups and offsets in memory
// with the spec's reply shapes. It is a test double, not a broker: no
// durability, no replication, one node, simplified group and idempotence
// rules. Tests steer it with Inject (error answers), SetDelay (slow
// commands), DropConnections and StopStreams.
package fakebroker

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/wire"
)

// Options configures a Broker.
type Options struct {
	// Compressions the broker supports (default all four).
	Compressions []wire.Compression
	// StreamInterval is the push period of STREAM (default 20 ms; the spec's
	// 100 ms made tests slow).
	StreamInterval time.Duration
	// RefuseNegotiation drops every connection after its negotiation request,
	// as the Go broker does on a failed negotiation.
	RefuseNegotiation bool
	// TLS, when set, serves TLS on the listener.
	TLS *tls.Config
}

// Broker is the fake server. Start it with Start; Close stops it and waits
// for every goroutine.
type Broker struct {
	o  Options
	ln net.Listener

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	cmu   sync.Mutex
	conns map[*serverConn]struct{}

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every append
	topics   map[string]*topic
	groups   map[string]*group
	offsets  map[string]uint64
	dedup    map[string]dedupState
	inject   map[wire.Command][]*errcode.Error
	delays   map[wire.Command]time.Duration
	requests map[wire.Command]int

	streamStop chan string
	// Published counts records stored.
	Published atomic.Int64
}

type topic struct {
	name     string
	revision int64
	parts    [][]wire.Record
	rr       int
}

type group struct {
	name, topic string
	generation  int64
	members     []string
	assign      map[string][]int32
	beats       map[string]time.Time
	rebalance   time.Time
}

type dedupState struct {
	lastSeq    uint64
	lastOffset uint64
}

// Start listens on 127.0.0.1:0 and serves until Close.
func Start(o Options) (*Broker, error) {
	if len(o.Compressions) == 0 {
		o.Compressions = wire.AllCompressions
	}
	if o.StreamInterval <= 0 {
		o.StreamInterval = 20 * time.Millisecond
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	ctx, stop := context.WithCancel(context.Background())
	b := &Broker{o: o, ln: ln, ctx: ctx, stop: stop, conns: map[*serverConn]struct{}{},
		changed: make(chan struct{}), topics: map[string]*topic{}, groups: map[string]*group{},
		offsets: map[string]uint64{}, dedup: map[string]dedupState{}, inject: map[wire.Command][]*errcode.Error{},
		delays: map[wire.Command]time.Duration{}, requests: map[wire.Command]int{}, streamStop: make(chan string, 16)}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// Addr returns the listen address.
func (b *Broker) Addr() string { return b.ln.Addr().String() }

// Close stops listening, closes every connection and waits for all
// goroutines.
func (b *Broker) Close() {
	b.stop()
	_ = b.ln.Close()
	b.DropConnections()
	b.wg.Wait()
}

// DropConnections closes every open client connection (reconnect tests).
func (b *Broker) DropConnections() {
	b.cmu.Lock()
	for c := range b.conns {
		_ = c.nc.Close()
	}
	b.cmu.Unlock()
}

// Inject makes the next n requests of cmd fail with e.
func (b *Broker) Inject(cmd wire.Command, e *errcode.Error, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range n {
		b.inject[cmd] = append(b.inject[cmd], e)
	}
}

// SetDelay delays every answer to cmd by d (pipelining and timeout tests).
func (b *Broker) SetDelay(cmd wire.Command, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delays[cmd] = d
}

// Requests returns how many requests of cmd arrived.
func (b *Broker) Requests(cmd wire.Command) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests[cmd]
}

// StopStreams ends every open stream with a STREAM_CONTROL CLOSE of reason.
func (b *Broker) StopStreams(reason string) {
	b.cmu.Lock()
	n := 0
	for c := range b.conns {
		n += int(c.streams.Load())
	}
	b.cmu.Unlock()
	for range n {
		select {
		case b.streamStop <- reason:
		default:
		}
	}
}

// Records returns a copy of a partition's records.
func (b *Broker) Records(topicName string, p int32) []wire.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[topicName]
	if t == nil || int(p) >= len(t.parts) {
		return nil
	}
	return append([]wire.Record(nil), t.parts[p]...)
}

// Committed returns the committed offset of (topic, group, partition).
func (b *Broker) Committed(topicName, g string, p int32) (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.offsets[offKey(topicName, g, p)]
	return v, ok
}

func offKey(t, g string, p int32) string { return t + "\x00" + g + "\x00" + strconv.Itoa(int(p)) }

func (b *Broker) accept() {
	defer b.wg.Done()
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			return
		}
		c := &serverConn{b: b, nc: nc}
		b.cmu.Lock()
		b.conns[c] = struct{}{}
		b.cmu.Unlock()
		b.wg.Add(1)
		go c.serve()
	}
}

type serverConn struct {
	b       *Broker
	nc      net.Conn
	codec   wire.Codec
	wmu     sync.Mutex
	wg      sync.WaitGroup
	streams atomic.Int32
	done    chan struct{}
}

func (c *serverConn) serve() {
	defer c.b.wg.Done()
	c.done = make(chan struct{})
	defer func() {
		close(c.done)
		_ = c.nc.Close()
		c.wg.Wait()
		c.b.cmu.Lock()
		delete(c.b.conns, c)
		c.b.cmu.Unlock()
	}()
	fr := wire.NewFrameReader(bufio.NewReader(c.nc))
	f, table, err := fr.ReadFirstFrame(wire.NegotiationLimits)
	if err != nil || c.b.o.RefuseNegotiation {
		return
	}
	req, err := wire.DecodeNegotiationRequest(f.Payload)
	if err != nil {
		return
	}
	resp, err := wire.Negotiate(req, c.b.o.Compressions)
	if err != nil {
		return
	}
	c.codec = wire.Codec{Table: table, Limits: wire.ServerLimits}
	out, _ := c.codec.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationResponse, Command: f.Header.Command,
		Status: wire.StatusOK, RequestID: f.Header.RequestID}, resp.AppendTo(nil))
	if _, err := c.nc.Write(out); err != nil {
		return
	}
	c.codec.Compression = resp.Compression
	for {
		f, err := fr.ReadFrame(&c.codec)
		if err != nil {
			return
		}
		if f.Header.Kind != wire.KindRequest {
			return
		}
		cmd, _ := table.ByID(f.Header.Command)
		payload := append([]byte(nil), f.Payload...)
		// Every request is answered on its own goroutine, so answers leave
		// in completion order, not arrival order (what pipelining tests need).
		c.wg.Add(1)
		go func(h wire.Header) {
			defer c.wg.Done()
			c.handle(h, cmd, payload)
		}(f.Header)
	}
}

func (c *serverConn) write(h wire.Header, payload []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out, err := c.codec.AppendFrame(nil, h, payload)
	if err != nil {
		return
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.nc.Write(out)
}

func (c *serverConn) reply(h wire.Header, kind wire.Kind, payload []byte, e *errcode.Error) {
	rh := wire.Header{Kind: kind, Command: h.Command, RequestID: h.RequestID, Status: wire.StatusOK}
	if e != nil {
		rh.Status = wire.StatusError
		p, err := wire.AppendError(nil, e)
		if err != nil {
			p, _ = wire.AppendError(nil, errcode.Internal.New(err.Error()))
		}
		payload = p
	}
	c.write(rh, payload)
}

func (c *serverConn) handle(h wire.Header, cmd wire.Command, payload []byte) {
	b := c.b
	b.mu.Lock()
	b.requests[cmd]++
	var inj *errcode.Error
	if q := b.inject[cmd]; len(q) > 0 {
		inj, b.inject[cmd] = q[0], q[1:]
	}
	delay := b.delays[cmd]
	b.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-c.done:
			return
		}
	}
	kind := wire.KindResponse
	if cmd == wire.CmdStream {
		kind = wire.KindStream
	}
	if inj != nil {
		c.reply(h, kind, nil, inj)
		return
	}
	var req wire.Request
	if cmd == wire.CmdPublish && wire.IsBatch(payload) {
		c.publishBatch(h, payload)
		return
	}
	if err := req.Decode(payload); err != nil {
		c.reply(h, kind, nil, errcode.From(err))
		return
	}
	if cmd == wire.CmdStream {
		c.streams.Add(1)
		defer c.streams.Add(-1)
		c.stream(h, &req)
		return
	}
	if cmd == wire.CmdPublish {
		c.publishText(h, &req)
		return
	}
	if cmd == wire.CmdConsume {
		c.consume(h, &req)
		return
	}
	text, e := b.command(cmd, &req)
	c.reply(h, kind, []byte(text), e)
}

// command answers the one-frame text commands.
func (b *Broker) command(cmd wire.Command, r *wire.Request) (string, *errcode.Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch cmd {
	case wire.CmdCreate:
		return b.create(r)
	case wire.CmdDelete:
		name := r.Value("topic")
		if _, ok := b.topics[name]; !ok {
			if r.Value("if_exists") == "true" {
				return "OK topic=" + name + " deleted=false", nil
			}
			return "", errcode.TopicNotFound.New("topic not found", "topic", name)
		}
		delete(b.topics, name)
		return "OK topic=" + name + " deleted=true", nil
	case wire.CmdList:
		names := b.topicNames()
		return fmt.Sprintf("OK count=%d topics=%s", len(names), join(names)), nil
	case wire.CmdDescribe:
		return b.describe(r)
	case wire.CmdMetadata:
		t, e := b.topic(r)
		if e != nil {
			return "", e
		}
		leaders, epochs := make([]string, len(t.parts)), make([]string, len(t.parts))
		for i := range t.parts {
			leaders[i], epochs[i] = b.ln.Addr().String(), "1"
		}
		return fmt.Sprintf("OK topic=%s partitions=%d leaders=%s epochs=%s revision=%d replication_factor=1 idempotent=false event_sourcing=false cleanup_policy=delete partitioner=hash_key auth_policy=open read_acl= write_acl= retention_hours=0 retention_bytes=0 lifecycle_epoch=0",
			t.name, len(t.parts), join(leaders), join(epochs), t.revision), nil
	case wire.CmdListOffsets:
		t, e := b.topic(r)
		if e != nil {
			return "", e
		}
		var ents []string
		for i, p := range t.parts {
			if v, ok := r.Get("partition"); ok && v != strconv.Itoa(i) {
				continue
			}
			n := len(p)
			ent := fmt.Sprintf("P%d:earliest=0:latest=%d:leo=%d:hwm=%d", i, n, n, n)
			if v, ok := r.Get("timestamp"); ok {
				// Strata's extension: the first record at or after the
				// time (the fake scans; partitiond uses its time index).
				ts, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return "", errcode.InvalidParameter.New("timestamp must be unix milliseconds", "param", "timestamp")
				}
				at := sort.Search(n, func(k int) bool { return p[k].Timestamp >= ts })
				ent += fmt.Sprintf(":time=%d", at)
			}
			ents = append(ents, ent)
		}
		if len(ents) == 0 {
			return "", errcode.PartitionNotFound.New("no such partition", "topic", t.name, "partition", r.Value("partition"))
		}
		return fmt.Sprintf("OK topic=%s partitions=%d offsets=%s", t.name, len(t.parts), join(ents)), nil
	case wire.CmdClusterStatus:
		// Strata's document shape (docs/gateway.md), partitions left out.
		a := b.ln.Addr().String()
		return fmt.Sprintf(`OK cluster={"fake":true,"brokers":{"active":[{"id":"fake-0","role":"gateway","rpc_address":%q,"client_address":%q}],"inactive":[]},`+
			`"raft_leader":{"id":"fake-0","address":%q},"raft_servers":[{"id":"fake-0","address":%q,"suffrage":"voter"}],"partitions":[],`+
			`"leaderless_partitions":0,"under_replicated_partitions":0,"topics":{"application":%d,"internal":0},"internal_shown":false,"revision":1}`,
			a, a, a, a, len(b.topics)), nil
	case wire.CmdListCluster:
		return fmt.Sprintf(`OK count=1 brokers=[{"id":"fake-0","role":"gateway","rpc_address":%q,"client_address":%q,"live":true}]`,
			b.ln.Addr().String(), b.ln.Addr().String()), nil
	case wire.CmdFindCoordinator:
		host, port, _ := net.SplitHostPort(b.ln.Addr().String())
		return "OK coordinator_id=fake-0 host=" + host + " port=" + port, nil
	case wire.CmdJoinGroup, wire.CmdSyncGroup, wire.CmdHeartbeat, wire.CmdLeaveGroup,
		wire.CmdCommitOffset, wire.CmdBatchCommit, wire.CmdFetchOffset, wire.CmdGroupStatus, wire.CmdListGroups,
		wire.CmdDeleteGroup, wire.CmdResetOffsets:
		return b.groupCommand(cmd, r)
	case wire.CmdHelp:
		return "OK commands=CREATE,DELETE,LIST,DESCRIBE,METADATA,LIST_OFFSETS,LIST_CLUSTER,CLUSTER_STATUS,PUBLISH,CONSUME,STREAM,JOIN_GROUP,SYNC_GROUP,HEARTBEAT,LEAVE_GROUP,COMMIT_OFFSET,BATCH_COMMIT,FETCH_OFFSET,GROUP_STATUS,LIST_GROUPS,FIND_COORDINATOR,DELETE_GROUP,RESET_OFFSETS", nil
	case wire.CmdExit:
		return "OK", nil
	}
	return "", errcode.UnsupportedFeature.New("the fake broker does not implement this command", "command", cmd.String())
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

func (b *Broker) topicNames() []string {
	names := make([]string, 0, len(b.topics))
	for n := range b.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (b *Broker) topic(r *wire.Request) (*topic, *errcode.Error) {
	name, ok := r.Get("topic")
	if !ok || name == "" {
		return nil, errcode.MissingTopic.New("topic required", "command", "fake")
	}
	t := b.topics[name]
	if t == nil {
		return nil, errcode.TopicNotFound.New("topic not found", "topic", name)
	}
	return t, nil
}

func validTopicName(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '=') {
			return false
		}
	}
	return true
}

func (b *Broker) create(r *wire.Request) (string, *errcode.Error) {
	name := r.Value("topic")
	if name == "" {
		return "", errcode.MissingTopic.New("topic required", "command", "CREATE")
	}
	if !validTopicName(name) {
		return "", errcode.InvalidTopicName.New("invalid topic name", "topic", name)
	}
	n := 4
	if v, ok := r.Get("partitions"); ok {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			return "", errcode.InvalidParameter.New("bad partitions", "param", "partitions", "value", v)
		}
		n = p
	}
	t := b.topics[name]
	if t == nil {
		t = &topic{name: name, revision: 1, parts: make([][]wire.Record, n)}
		b.topics[name] = t
	} else if n < len(t.parts) {
		return "", errcode.PartitionCountDecrease.New("partitions may only increase", "topic", name)
	} else if n > len(t.parts) {
		t.parts = append(t.parts, make([][]wire.Record, n-len(t.parts))...)
		t.revision++
	}
	return fmt.Sprintf("OK topic=%s partitions=%d cleanup_policy=delete partitioner=hash_key auth_policy=open read_acl= write_acl= retention_hours=0 retention_bytes=0 revision=%d replication_factor=1 idempotent=false event_sourcing=false lifecycle_epoch=0 min_in_sync_replicas=default effective_min_in_sync_replicas=1",
		name, len(t.parts), t.revision), nil
}

func (b *Broker) describe(r *wire.Request) (string, *errcode.Error) {
	t, e := b.topic(r)
	if e != nil {
		return "", e
	}
	s := fmt.Sprintf(`{"status":"OK","topic":%q,"definition":{"name":%q,"revision":%d,"partitions":%d,"replication_factor":1,"idempotent":false,"event_sourcing":false,"policy":{"cleanup_policy":"delete","partitioner":"hash_key","auth_policy":"open"}},"partitions":[`,
		t.name, t.name, t.revision, len(t.parts))
	for i, p := range t.parts {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(`{"id":%d,"leader":%q,"replicas":["fake-0"],"isr":[0],"leo":%d,"hwm":%d}`, i, b.ln.Addr().String(), len(p), len(p))
	}
	return s + "]}", nil
}

// notify wakes long polls and streams after an append (b.mu held).
func (b *Broker) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (c *serverConn) publishBatch(h wire.Header, payload []byte) {
	bt, err := wire.DecodeBatch(payload)
	if err != nil {
		c.reply(h, wire.KindResponse, nil, errcode.From(err))
		return
	}
	ack, e := c.b.appendBatch(bt)
	if bt.Acks == "0" || bt.Acks == "none" {
		return
	}
	if e != nil {
		c.reply(h, wire.KindResponse, nil, e)
		return
	}
	c.reply(h, wire.KindResponse, ack.AppendJSON(nil), nil)
}

func (b *Broker) appendBatch(bt *wire.Batch) (wire.AckResponse, *errcode.Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[bt.Topic]
	if t == nil {
		return wire.AckResponse{}, errcode.TopicNotFound.New("topic not found", "topic", bt.Topic)
	}
	if bt.Partition < 0 || int(bt.Partition) >= len(t.parts) {
		return wire.AckResponse{}, errcode.PartitionNotFound.New("partition not found", "topic", bt.Topic, "partition", strconv.Itoa(int(bt.Partition)))
	}
	ack := wire.AckResponse{Status: "OK"}
	if len(bt.Records) > 0 {
		ack.ProducerID, ack.ProducerEpoch = bt.Records[0].ProducerID, bt.Records[0].Epoch
		ack.SeqStart, ack.SeqEnd = bt.BatchStart, bt.BatchEnd
	}
	if bt.Idempotent && len(bt.Records) > 0 {
		if bt.Acks != "all" && bt.Acks != "-1" {
			return ack, errcode.IdempotenceRequiresAcksAll.New("idempotence requires acks=all", "acks", bt.Acks)
		}
		key := bt.Topic + "\x00" + strconv.Itoa(int(bt.Partition)) + "\x00" + bt.Records[0].ProducerID
		st := b.dedup[key]
		first := bt.Records[0].SeqNum
		if first <= st.lastSeq {
			// A retry of a stored batch: answer with the stored offsets.
			ack.LastOffset = st.lastOffset
			return ack, nil
		}
		if first != st.lastSeq+1 {
			return ack, errcode.OutOfOrderSequence.New("sequence gap", "expected", strconv.FormatUint(st.lastSeq+1, 10), "got", strconv.FormatUint(first, 10))
		}
		defer func() {
			b.dedup[key] = dedupState{lastSeq: bt.Records[len(bt.Records)-1].SeqNum, lastOffset: ack.LastOffset}
		}()
	}
	log := &t.parts[bt.Partition]
	for _, r := range bt.Records {
		r.Offset = uint64(len(*log))
		*log = append(*log, r)
		ack.LastOffset = r.Offset
	}
	b.Published.Add(int64(len(bt.Records)))
	b.notify()
	return ack, nil
}

func (c *serverConn) publishText(h wire.Header, r *wire.Request) {
	b := c.b
	acks := r.Value("acks")
	b.mu.Lock()
	t, e := b.topic(r)
	part := int32(0)
	if e == nil {
		if v, ok := r.Get("partition"); ok {
			p, err := strconv.Atoi(v)
			if err != nil || p < 0 || p >= len(t.parts) {
				e = errcode.PartitionNotFound.New("partition not found", "topic", t.name, "partition", v)
			}
			part = int32(p)
		} else {
			part = int32(t.rr % len(t.parts))
			t.rr++
		}
	}
	b.mu.Unlock()
	if e == nil && !r.Has("producerId") {
		e = errcode.MissingParameter.New("producerId required", "param", "producerId")
	}
	if e == nil && !r.Has("message") {
		e = errcode.MissingParameter.New("message required", "param", "message")
	}
	if e != nil {
		if acks != "0" {
			c.reply(h, wire.KindResponse, nil, e)
		}
		return
	}
	bt := &wire.Batch{BatchHeader: wire.BatchHeader{Topic: t.name, Partition: part, Acks: acks},
		Records: []wire.Record{{Topic: t.name, Partition: part, Payload: []byte(r.Value("message")),
			ProducerID: r.Value("producerId"), Timestamp: time.Now().UnixMilli()}}}
	ack, e := b.appendBatch(bt)
	if acks == "0" {
		return
	}
	if e != nil {
		c.reply(h, wire.KindResponse, nil, e)
		return
	}
	c.reply(h, wire.KindResponse, ack.AppendJSON(nil), nil)
}

// read returns up to max records of a partition from off (committed offset
// of the group first), or an OFFSET_OUT_OF_RANGE error.
func (b *Broker) read(r *wire.Request, off uint64, max int) (*wire.Batch, uint64, chan struct{}, *errcode.Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, e := b.topic(r)
	if e != nil {
		return nil, 0, nil, e
	}
	p, err := strconv.Atoi(r.Value("partition"))
	if err != nil || p < 0 || p >= len(t.parts) {
		return nil, 0, nil, errcode.PartitionNotFound.New("partition not found", "topic", t.name, "partition", r.Value("partition"))
	}
	log := t.parts[p]
	if off > uint64(len(log)) {
		return nil, 0, nil, errcode.OffsetOutOfRange.New("offset out of range", "requested", strconv.FormatUint(off, 10),
			"earliest", "0", "latest", strconv.Itoa(len(log)))
	}
	end := min(uint64(len(log)), off+uint64(max))
	bt := &wire.Batch{BatchHeader: wire.BatchHeader{Topic: t.name, Partition: int32(p), Acks: "1"},
		Records: append([]wire.Record(nil), log[off:end]...)}
	return bt, end, b.changed, nil
}

func (b *Broker) startOffset(r *wire.Request, off uint64) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, _ := strconv.Atoi(r.Value("partition"))
	g := r.Value("group")
	if g == "" {
		g = "default-group"
	}
	v, ok := b.offsets[offKey(r.Value("topic"), g, int32(p))]
	off, _ = placement.Start{Committed: v, HasCommitted: ok, Requested: off, HasRequested: true}.Offset()
	return off
}

func (c *serverConn) consume(h wire.Header, r *wire.Request) {
	off, _ := strconv.ParseUint(r.Value("offset"), 10, 64)
	off = c.b.startOffset(r, off)
	max := 8192
	if v, err := strconv.Atoi(r.Value("batch")); err == nil && v > 0 {
		max = v
	}
	wait, _ := strconv.Atoi(r.Value("wait_ms"))
	deadline := time.Now().Add(time.Duration(min(wait, 30000)) * time.Millisecond)
	for {
		bt, _, changed, e := c.b.read(r, off, max)
		if e != nil {
			c.reply(h, wire.KindResponse, nil, e)
			return
		}
		rest := time.Until(deadline)
		if len(bt.Records) > 0 || rest <= 0 {
			out, err := bt.AppendTo(nil)
			if err != nil {
				c.reply(h, wire.KindResponse, nil, errcode.From(err))
				return
			}
			c.reply(h, wire.KindResponse, out, nil)
			return
		}
		select {
		case <-changed:
		case <-time.After(rest):
		case <-c.done:
			return
		}
	}
}

func (c *serverConn) stream(h wire.Header, r *wire.Request) {
	for _, k := range []string{"topic", "partition", "member", "group"} {
		if !r.Has(k) {
			c.reply(h, wire.KindStream, nil, errcode.MissingParameter.New(k+" required", "param", k))
			return
		}
	}
	off := c.b.startOffset(r, 0)
	max := 8192
	if v, err := strconv.Atoi(r.Value("batch")); err == nil && v > 0 {
		max = v
	}
	tick := time.NewTicker(c.b.o.StreamInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.b.ctx.Done():
			return
		case reason := <-c.b.streamStop:
			sc := wire.StreamControl{Type: wire.StreamControlClose, Reason: reason, Offset: off, HasOffset: true}
			if reason == wire.CloseOffsetOutOfRange {
				sc.HasRange, sc.Requested, sc.Latest = true, off, off
			}
			p, _ := sc.AppendTo(nil)
			c.write(wire.Header{Kind: wire.KindStream, Command: h.Command, RequestID: h.RequestID, Status: wire.StatusStreamEnd}, p)
			return
		case <-tick.C:
		}
		bt, next, _, e := c.b.read(r, off, max)
		if e != nil {
			c.reply(h, wire.KindStream, nil, e)
			return
		}
		if len(bt.Records) == 0 {
			c.write(wire.Header{Kind: wire.KindStream, Command: h.Command, RequestID: h.RequestID, Status: wire.StatusOK}, nil)
			continue
		}
		out, err := bt.AppendTo(nil)
		if err != nil {
			return
		}
		c.write(wire.Header{Kind: wire.KindStream, Command: h.Command, RequestID: h.RequestID, Status: wire.StatusOK}, out)
		off = next
	}
}
