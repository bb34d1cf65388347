package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/strataio/strata/gateway/internal/routing"
	"github.com/strataio/strata/libs/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCreatePublishConsumeRoundTrip(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionNone)

	got := cl.ok("CREATE topic=orders partitions=3")
	want := "OK topic=orders partitions=3 cleanup_policy=delete partitioner=hash_key auth_policy=open read_acl= write_acl= retention_hours=0 retention_bytes=0 revision=1 replication_factor=1 idempotent=false event_sourcing=false lifecycle_epoch=0 min_in_sync_replicas=default effective_min_in_sync_replicas=1"
	if got != want {
		t.Fatalf("CREATE reply\n got %q\nwant %q", got, want)
	}
	if got := cl.ok("LIST"); got != "OK count=1 topics=orders" {
		t.Fatalf("LIST = %q", got)
	}
	md := cl.ok("METADATA topic=orders")
	if !strings.Contains(md, "leaders="+c.addr+","+c.addr+","+c.addr+" epochs=1,1,1") {
		t.Fatalf("METADATA must hand out gateway addresses: %q", md)
	}
	if h := cl.ok("HELP"); !strings.Contains(h, "PUBLISH") || strings.Contains(h, "REPLICATE_MESSAGE") || strings.Contains(h, "NEGOTIATE") {
		t.Fatalf("HELP = %q", h)
	}

	ackText := cl.ok("PUBLISH topic=orders partition=1 producerId=p-1 acks=1 message=hello world")
	ack, err := wire.ParseAck([]byte(ackText))
	if err != nil || ack.Status != "OK" || ack.LastOffset != 0 || ack.ProducerID != "p-1" || ack.Leader != c.addr {
		t.Fatalf("ack %q -> %+v, %v", ackText, ack, err)
	}
	cl.ok("PUBLISH topic=orders partition=1 producerId=p-1 message=second")

	f := cl.do("CONSUME topic=orders partition=1 offset=0 member=m1")
	if f.Header.Status != wire.StatusOK {
		t.Fatalf("CONSUME failed: %v", frameError(t, f))
	}
	b, err := wire.DecodeBatch(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if b.Topic != "orders" || b.Partition != 1 || len(b.Records) != 2 {
		t.Fatalf("batch %+v", b)
	}
	if string(b.Records[0].Payload) != "hello world" || b.Records[1].Offset != 1 || b.Records[0].ProducerID != "p-1" {
		t.Fatalf("records %+v", b.Records)
	}
	// Offset past the data: an empty batch, not an error.
	f = cl.do("CONSUME topic=orders partition=1 offset=2 member=m1")
	if b, err := wire.DecodeBatch(f.Payload); err != nil || len(b.Records) != 0 {
		t.Fatalf("empty consume: %+v %v", b, err)
	}
	// Beyond the log: the partition's OFFSET_OUT_OF_RANGE reaches the client.
	if e := cl.fail("CONSUME topic=orders partition=1 offset=99 member=m1"); e.Code != "OFFSET_OUT_OF_RANGE" || e.Field("latest") != "2" {
		t.Fatalf("out of range: %v", e)
	}
	lo := cl.ok("LIST_OFFSETS topic=orders partition=1")
	if lo != "OK topic=orders partitions=3 offsets=P1:earliest=0:latest=2:leo=2:hwm=2" {
		t.Fatalf("LIST_OFFSETS = %q", lo)
	}
	var d describeJSON
	if err := json.Unmarshal([]byte(cl.ok("DESCRIBE topic=orders")), &d); err != nil || d.Status != "OK" || len(d.Partitions) != 3 || d.Partitions[1].LEO != 2 || d.Partitions[0].Leader != c.addr {
		t.Fatalf("DESCRIBE %+v %v", d, err)
	}
	if s := cl.ok("CLUSTER_STATUS"); !strings.HasPrefix(s, `OK cluster={"brokers":{"active":[`) {
		t.Fatalf("CLUSTER_STATUS = %q", s)
	}
	if e := cl.fail("DESCRIBE topic=nope"); e.Code != "topic_not_found" {
		t.Fatalf("missing topic: %v", e)
	}
	if e := cl.fail("CREATE topic=bad/name"); e.Code != "invalid_topic_name" {
		t.Fatalf("bad name: %v", e)
	}
	if got := cl.ok("DELETE topic=orders"); got != "OK topic=orders deleted=true" {
		t.Fatalf("DELETE = %q", got)
	}
	if got := cl.ok("DELETE topic=orders if_exists=true"); got != "OK topic=orders deleted=false" {
		t.Fatalf("DELETE if_exists = %q", got)
	}
	if e := cl.fail("DELETE topic=x if_exists=maybe"); e.Code != "invalid_if_exists" {
		t.Fatalf("bad if_exists: %v", e)
	}
	if got := cl.ok("EXIT"); got != "OK" {
		t.Fatalf("EXIT = %q", got)
	}
	expectClosed(t, cl.nc)
	if v := testutil.ToFloat64(c.gw.m.commands.WithLabelValues("PUBLISH", "ok")); v != 2 {
		t.Fatalf("publish ok count %v", v)
	}
	if v := testutil.ToFloat64(c.gw.m.publishRecords); v != 2 {
		t.Fatalf("publish records %v", v)
	}
}

func TestFirstFrameMustBeNegotiation(t *testing.T) {
	c := startCluster(t, nil)
	// Raw text: bad magic.
	nc := dialRaw(t, c.addr)
	nc.Write([]byte("CREATE topic=x partitions=1\n                                  "))
	expectClosed(t, nc)
	// A request frame before negotiation.
	nc = dialRaw(t, c.addr)
	codec := wire.Codec{Table: wire.TableA, Compression: wire.CompressionNone}
	id, _ := wire.TableA.ID(wire.CmdList)
	p, _ := (&wire.Request{}).AppendTo(nil)
	frame, err := codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: id, RequestID: 1}, p)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write(frame)
	expectClosed(t, nc)
	eventually(t, "failures counted", func() bool {
		return testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("bad_magic")) == 1 &&
			testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("not_negotiation")) == 1
	})
	// No common version: no answer, connection dropped, counted.
	nc = dialRaw(t, c.addr)
	fr := wire.NewFrameReader(nc)
	req, _ := wire.NegotiationRequest{MinVersion: 3, MaxVersion: 4, Compressions: []wire.Compression{wire.CompressionNone}}.AppendTo(nil)
	neg := wire.Codec{Table: wire.TableA, Limits: wire.NegotiationLimits}
	frame, _ = neg.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationRequest, Command: 46}, req)
	nc.Write(frame)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := fr.ReadFrame(&neg); err == nil {
		t.Fatal("a failed negotiation must not be answered")
	}
	eventually(t, "negotiation failure counted", func() bool {
		return testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("negotiation_failed")) == 1
	})
	// A client that negotiated still works after all that.
	cl := dial(t, c.addr, wire.CompressionLZ4)
	if got := cl.ok("LIST"); got != "OK count=0 topics=" {
		t.Fatalf("LIST = %q", got)
	}
}

func TestCorruptFrameIsAnsweredAndCounted(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionNone)
	id, _ := wire.TableA.ID(wire.CmdList)
	p, _ := (&wire.Request{}).AppendTo(nil)
	frame, _ := cl.codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: id, RequestID: 7}, p)
	frame[len(frame)-1] ^= 0xff // break the CRC32C
	cl.nc.Write(frame)
	f := cl.read()
	if e := frameError(t, f); e.Code != "invalid_frame" || e.Field("reason") != "checksum_mismatch" || f.Header.RequestID != 7 {
		t.Fatalf("corrupt frame: %v (id %d)", e, f.Header.RequestID)
	}
	if v := testutil.ToFloat64(c.gw.m.protoFailures.WithLabelValues("checksum_mismatch")); v != 1 {
		t.Fatalf("checksum failures %v", v)
	}
	// The stream stayed aligned.
	cl.id = 7
	if got := cl.ok("LIST"); got != "OK count=0 topics=" {
		t.Fatalf("LIST = %q", got)
	}
}

func TestAcksZeroSendsNoResponse(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionSnappy)
	cl.ok("CREATE topic=fire partitions=1")
	cl.sendText("PUBLISH topic=fire producerId=p acks=0 message=one")
	id := cl.sendText("PUBLISH topic=fire producerId=p acks=1 message=two")
	f := cl.read()
	if f.Header.RequestID != id {
		t.Fatalf("first frame answers request %d; acks=0 must get no frame", f.Header.RequestID)
	}
	eventually(t, "both records stored", func() bool { return len(c.part.records("fire", 0)) == 2 })
	// Batch frame with acks "0": no answer either.
	var b wire.Batch
	b.Topic, b.Partition, b.Acks = "fire", 0, "0"
	b.Records = []wire.Record{{Topic: "fire", Partition: 0, Payload: []byte("three")}}
	payload, err := b.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	cl.send(wire.CmdPublish, payload)
	if got := cl.ok("LIST"); got != "OK count=1 topics=fire" {
		t.Fatalf("LIST after acks=0 batch = %q", got)
	}
	eventually(t, "batch stored", func() bool { return len(c.part.records("fire", 0)) == 3 })
	if v := testutil.ToFloat64(c.gw.m.acks.WithLabelValues("0", "ok")); v != 2 {
		t.Fatalf("acks=0 count %v", v)
	}
}

func TestPublishRoutingAndRules(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionGzip)
	cl.ok("CREATE topic=keyed partitions=4")
	want := routing.KeyPartition([]byte("user-42"), 4)
	cl.ok("PUBLISH topic=keyed producerId=p key=user-42 message=a")
	cl.ok("PUBLISH topic=keyed producerId=p key=user-42 message=b")
	if n := len(c.part.records("keyed", want)); n != 2 {
		t.Fatalf("partition %d holds %d records, want 2", want, n)
	}
	// A batch with partition -1 is routed by its first key and patched.
	var b wire.Batch
	b.Topic, b.Partition, b.Acks = "keyed", -1, "all"
	b.Records = []wire.Record{{Topic: "keyed", Partition: -1, Key: "user-42", Payload: []byte("c")}, {Topic: "keyed", Partition: -1, Key: "user-42", Payload: []byte("d")}}
	payload, _ := b.AppendTo(nil)
	cl.send(wire.CmdPublish, payload)
	f := cl.read()
	ack, err := wire.ParseAck(f.Payload)
	if err != nil || ack.LastOffset != 3 {
		t.Fatalf("batch ack %q: %+v %v", f.Payload, ack, err)
	}
	recs := c.part.records("keyed", want)
	if len(recs) != 4 {
		t.Fatalf("want 4 records in partition %d, got %d", want, len(recs))
	}
	if r, err := wire.DecodeRecord(recs[3]); err != nil || r.Partition != want || string(r.Payload) != "d" {
		t.Fatalf("routed record %+v %v", r, err)
	}
	// round_robin ignores keys.
	cl.ok("CREATE topic=rr partitions=2 partitioner=round_robin")
	for i := 0; i < 4; i++ {
		cl.ok("PUBLISH topic=rr producerId=p key=same message=x")
	}
	if a, b := len(c.part.records("rr", 0)), len(c.part.records("rr", 1)); a != 2 || b != 2 {
		t.Fatalf("round robin spread %d/%d", a, b)
	}
	// Spec rules.
	if e := cl.fail("PUBLISH topic=keyed producerId=p isIdempotent=true acks=1 message=x"); e.Code != "idempotence_requires_acks_all" {
		t.Fatalf("idempotence rule: %v", e)
	}
	if e := cl.fail("PUBLISH topic=keyed producerId=p transactional_id=t1 message=x"); e.Code != "transaction_metadata_forbidden" || e.Field("command") != "PUBLISH" {
		t.Fatalf("txn metadata: %v", e)
	}
	if e := cl.fail("PUBLISH topic=keyed producerId=p acks=2 message=x"); e.Code != "invalid_parameter" {
		t.Fatalf("bad acks: %v", e)
	}
	if e := cl.fail("PUBLISH topic=keyed message=x"); e.Code != "missing_producer_id" {
		t.Fatalf("missing producer: %v", e)
	}
	if e := cl.fail("PUBLISH topic=keyed producerId=p partition=9 message=x"); e.Code != "partition_not_found" {
		t.Fatalf("bad partition: %v", e)
	}
	if e := cl.fail("BEGIN_TXN transactional_id=t1 producerId=1 epoch=0"); e.Code != "UNSUPPORTED_FEATURE" || e.Field("command") != "BEGIN_TXN" {
		t.Fatalf("txn command: %v", e)
	}
	if e := cl.fail("REPLICATE_MESSAGE topic=keyed"); e.Code != "internal_command_unauthorized" {
		t.Fatalf("internal command: %v", e)
	}
}

func TestPublishFollowsNotLeader(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("CREATE topic=moving partitions=1")
	c.part.notLeader.Store(2)
	cl.ok("PUBLISH topic=moving producerId=p message=x")
	if n := len(c.part.records("moving", 0)); n != 1 {
		t.Fatalf("stored %d records", n)
	}
}

func TestGroupCommandsAndCommittedOffsetPrecedence(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("CREATE topic=t partitions=3")
	for i := 0; i < 5; i++ {
		cl.ok("PUBLISH topic=t partition=0 producerId=p message=m")
	}
	if got := cl.ok("JOIN_GROUP group=g member=m topic=t"); got != "OK generation=3 member=m-4821 assignments=[0 1 2]" {
		t.Fatalf("JOIN_GROUP = %q", got)
	}
	if got := cl.ok("HEARTBEAT topic=t group=g member=m-4821 generation=3"); got != "OK member=m-4821 generation=3" {
		t.Fatalf("HEARTBEAT = %q", got)
	}
	if e := cl.fail("HEARTBEAT topic=t group=g member=m-4821 generation=2"); e.Code != "GEN_MISMATCH" || e.Field("current") != "3" {
		t.Fatalf("stale heartbeat: %v", e)
	}
	if e := cl.fail("COMMIT_OFFSET topic=t partition=0 group=g offset=3 member=m-4821"); e.Code != "missing_generation" {
		t.Fatalf("missing generation: %v", e)
	}
	if got := cl.ok("COMMIT_OFFSET topic=t partition=0 group=g offset=3 member=m-4821 generation=3"); got != "OK" {
		t.Fatalf("COMMIT_OFFSET = %q", got)
	}
	if got := cl.ok("FETCH_OFFSET topic=t partition=0 group=g"); got != "OK offset=3" {
		t.Fatalf("FETCH_OFFSET = %q", got)
	}
	// The committed offset wins over a lower requested offset.
	b, err := wire.DecodeBatch(cl.do("CONSUME topic=t partition=0 offset=0 member=m group=g").Payload)
	if err != nil || len(b.Records) != 2 || b.Records[0].Offset != 3 {
		t.Fatalf("consume from committed: %+v %v", b, err)
	}
	// Without a commit the explicit offset applies; wildcards resolve.
	b, err = wire.DecodeBatch(cl.do("CONSUME topic=? partition=0 offset=1 member=m batch=2").Payload)
	if err != nil || b.Topic != "t" || len(b.Records) != 2 || b.Records[0].Offset != 1 {
		t.Fatalf("consume wildcard: %+v %v", b, err)
	}
	if got := cl.ok("BATCH_COMMIT topic=t group=g member=m-4821 generation=3 offsets=P0:4,P1:0"); got != "OK batched=2" {
		t.Fatalf("BATCH_COMMIT = %q", got)
	}
	if e := cl.fail("BATCH_COMMIT topic=t group=g member=m-4821 generation=3 offsets=P0:4,P0:5"); e.Code != "duplicate_partition" {
		t.Fatalf("duplicate partition: %v", e)
	}
	if e := cl.fail("BATCH_COMMIT topic=t group=g member=m-4821 generation=3 offsets=0:4"); e.Code != "invalid_batch_commit_entry" {
		t.Fatalf("bad entry: %v", e)
	}
	// Generation is checked before the entries (spec 4.5 order): the list
	// travels raw to the coordinator.
	if e := cl.fail("BATCH_COMMIT topic=t group=g member=m-4821 generation=2 offsets=P0:4,P0:5"); e.Code != "GEN_MISMATCH" {
		t.Fatalf("generation first: %v", e)
	}
	// The Python/Java SDK form: one positional list.
	if got := cl.ok("BATCH_COMMIT topic=t group=g member=m-4821 generation=3 P2:7"); got != "OK batched=1" {
		t.Fatalf("positional BATCH_COMMIT = %q", got)
	}
	fc := cl.ok("FIND_COORDINATOR group=g")
	r, err := wire.ParseOK(fc)
	if err != nil || r.Value("coordinator_id") != "c1" || r.Value("host")+":"+r.Value("port") != c.addr {
		t.Fatalf("FIND_COORDINATOR = %q", fc)
	}
	var st groupStatusJSON
	if err := json.Unmarshal([]byte(cl.ok("GROUP_STATUS group=g")), &st); err != nil || st.State != "Stable" || len(st.Members) != 1 {
		t.Fatalf("GROUP_STATUS %+v %v", st, err)
	}
	if c.coord.joins.Load() != 1 {
		t.Fatalf("joins forwarded %d", c.coord.joins.Load())
	}
}

func TestStreamPushesAndCloses(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		cfg.StreamKeepalive = 50 * time.Millisecond
		cfg.StreamInterval = 20 * time.Millisecond
	})
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("CREATE topic=s partitions=1")
	cl.ok("PUBLISH topic=s producerId=p message=one")
	id := cl.sendText("STREAM topic=s partition=0 group=g member=m")
	f := cl.read()
	if f.Header.Kind != wire.KindStream || f.Header.RequestID != id {
		t.Fatalf("stream frame %+v", f.Header)
	}
	b, err := wire.DecodeBatch(f.Payload)
	if err != nil || len(b.Records) != 1 {
		t.Fatalf("stream batch %+v %v", b, err)
	}
	// Silence brings keepalives: empty stream frames with status OK.
	f = cl.read()
	if f.Header.Kind != wire.KindStream || f.Header.Status != wire.StatusOK || len(f.Payload) != 0 {
		t.Fatalf("keepalive %+v %q", f.Header, f.Payload)
	}
	// A new request stops the stream with a CLOSE control frame first.
	next := cl.sendText("LIST")
	for {
		f = cl.read()
		if f.Header.RequestID == id && f.Header.Status == wire.StatusOK && len(f.Payload) == 0 {
			continue // a keepalive in flight
		}
		break
	}
	if f.Header.Status != wire.StatusStreamEnd || !wire.IsStreamControl(f.Payload) {
		t.Fatalf("close frame %+v %q", f.Header, f.Payload)
	}
	sc, err := wire.ParseStreamControl(f.Payload)
	if err != nil || sc.Reason != "stopped" || sc.Offset != 1 {
		t.Fatalf("close %+v %v", sc, err)
	}
	if f = cl.read(); f.Header.RequestID != next || string(f.Payload) != "OK count=1 topics=s" {
		t.Fatalf("after stream: %d %q", f.Header.RequestID, f.Payload)
	}
}

func TestMaxConnectionsRefusedCleanly(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.MaxConnections = 2 })
	a := dial(t, c.addr, wire.CompressionNone)
	dial(t, c.addr, wire.CompressionNone)
	nc := dialRaw(t, c.addr)
	fr := wire.NewFrameReader(nc)
	f := negotiate(t, nc, fr, wire.CompressionNone)
	if f.Header.Kind != wire.KindNegotiationResponse || f.Header.Status != wire.StatusError {
		t.Fatalf("refusal frame %+v", f.Header)
	}
	if e, err := wire.DecodeError(f.Payload); err != nil || e.Code != "connection_limit_reached" {
		t.Fatalf("refusal %v %v", e, err)
	}
	expectClosed(t, nc)
	// Closing a connection frees its slot.
	a.nc.Close()
	eventually(t, "slot freed", func() bool { return testutil.ToFloat64(c.gw.m.connsActive) == 1 })
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("LIST")
	if v := testutil.ToFloat64(c.gw.m.connsRefused); v != 1 {
		t.Fatalf("refused %v", v)
	}
}

func TestIdleTimeoutKeepsConnection(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.IdleTimeout = 20 * time.Millisecond })
	cl := dial(t, c.addr, wire.CompressionNone)
	time.Sleep(150 * time.Millisecond)
	if got := cl.ok("LIST"); got != "OK count=0 topics=" {
		t.Fatalf("LIST after idle = %q", got)
	}
}

// A Python-SDK client (table B: NEGOTIATE 47) gets its own command ids back.
func TestTableBClientSeesItsIDs(t *testing.T) {
	c := startCluster(t, nil)
	cl := dialTableB(t, c.addr)
	id := cl.sendText("FIND_COORDINATOR group=g")
	f := cl.read()
	if want, _ := wire.TableB.ID(wire.CmdFindCoordinator); f.Header.Command != want || f.Header.RequestID != id || f.Header.Status != wire.StatusOK {
		t.Fatalf("reply %+v %q (want command id %d)", f.Header, f.Payload, want)
	}
}

// Many concurrent connections are held and released: the active count goes
// back to zero once clients leave.
func TestManyConnectionsHeldAndReleased(t *testing.T) {
	c := startCluster(t, nil)
	const n = 100
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = dial(t, c.addr, wire.CompressionNone)
	}
	for _, cl := range clients {
		cl.ok("LIST")
	}
	if v := testutil.ToFloat64(c.gw.m.connsActive); v != n {
		t.Fatalf("active %v, want %d", v, n)
	}
	for _, cl := range clients {
		cl.nc.Close()
	}
	eventually(t, "connections released", func() bool { return testutil.ToFloat64(c.gw.m.connsActive) == 0 })
}
