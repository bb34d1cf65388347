package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/fake/partitionfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCreatePublishConsumeRoundTrip(t *testing.T) {
	c, cl := startDialed(t)

	got := cl.OK("CREATE topic=orders partitions=3")
	want := "OK topic=orders partitions=3 cleanup_policy=delete partitioner=hash_key auth_policy=open read_acl= write_acl= retention_hours=0 retention_bytes=0 revision=1 replication_factor=1 idempotent=false event_sourcing=false lifecycle_epoch=0 min_in_sync_replicas=default effective_min_in_sync_replicas=1"
	if got != want {
		t.Fatalf("CREATE reply\n got %q\nwant %q", got, want)
	}
	if got := cl.OK("LIST"); got != "OK count=1 topics=orders" {
		t.Fatalf("LIST = %q", got)
	}
	md := cl.OK("METADATA topic=orders")
	if !strings.Contains(md, "leaders="+c.addr+","+c.addr+","+c.addr+" epochs=1,1,1") {
		t.Fatalf("METADATA must hand out gateway addresses: %q", md)
	}
	if h := cl.OK("HELP"); !strings.Contains(h, "PUBLISH") || strings.Contains(h, "REPLICATE_MESSAGE") || strings.Contains(h, "NEGOTIATE") {
		t.Fatalf("HELP = %q", h)
	}

	ackText := cl.OK("PUBLISH topic=orders partition=1 producerId=p-1 acks=1 message=hello world")
	ack, err := wire.ParseAck([]byte(ackText))
	if err != nil || ack.Status != "OK" || ack.LastOffset != 0 || ack.ProducerID != "p-1" || ack.Leader != c.addr {
		t.Fatalf("ack %q -> %+v, %v", ackText, ack, err)
	}
	cl.OK("PUBLISH topic=orders partition=1 producerId=p-1 message=second")

	f := cl.Do("CONSUME topic=orders partition=1 offset=0 member=m1")
	if f.Header.Status != wire.StatusOK {
		t.Fatalf("CONSUME failed: %v", wiretest.FrameErr(t, f))
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
	f = cl.Do("CONSUME topic=orders partition=1 offset=2 member=m1")
	if b, err := wire.DecodeBatch(f.Payload); err != nil || len(b.Records) != 0 {
		t.Fatalf("empty consume: %+v %v", b, err)
	}
	// Beyond the log: the partition's OFFSET_OUT_OF_RANGE reaches the client.
	cl.FailWith("CONSUME topic=orders partition=1 offset=99 member=m1", "OFFSET_OUT_OF_RANGE", "latest", "2")
	lo := cl.OK("LIST_OFFSETS topic=orders partition=1")
	if lo != "OK topic=orders partitions=3 offsets=P1:earliest=0:latest=2:leo=2:hwm=2" {
		t.Fatalf("LIST_OFFSETS = %q", lo)
	}
	// The DESCRIBE envelope's fields this test reads (WIRE-V2 9.3).
	var d struct {
		Status     string `json:"status"`
		Partitions []struct {
			Leader string `json:"leader"`
			LEO    uint64 `json:"leo"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(cl.OK("DESCRIBE topic=orders")), &d); err != nil || d.Status != "OK" || len(d.Partitions) != 3 || d.Partitions[1].LEO != 2 || d.Partitions[0].Leader != c.addr {
		t.Fatalf("DESCRIBE %+v %v", d, err)
	}
	if s := cl.OK("CLUSTER_STATUS"); !strings.HasPrefix(s, `OK cluster={"brokers":{"active":[`) {
		t.Fatalf("CLUSTER_STATUS = %q", s)
	}
	cl.FailWith("DESCRIBE topic=nope", "topic_not_found")
	cl.FailWith("CREATE topic=bad/name", "invalid_topic_name")
	if got := cl.OK("DELETE topic=orders"); got != "OK topic=orders deleted=true" {
		t.Fatalf("DELETE = %q", got)
	}
	if got := cl.OK("DELETE topic=orders if_exists=true"); got != "OK topic=orders deleted=false" {
		t.Fatalf("DELETE if_exists = %q", got)
	}
	cl.FailWith("DELETE topic=x if_exists=maybe", "invalid_if_exists")
	if got := cl.OK("EXIT"); got != "OK" {
		t.Fatalf("EXIT = %q", got)
	}
	wiretest.ExpectClosed(t, cl.Conn)
	if v := testutil.ToFloat64(c.gw.m.commands.WithLabelValues("PUBLISH", "ok")); v != 2 {
		t.Fatalf("publish ok count %v", v)
	}
	if v := testutil.ToFloat64(c.gw.m.publishRecords.WithLabelValues("orders")); v != 2 {
		t.Fatalf("publish records %v", v)
	}
}

func TestAcksZeroSendsNoResponse(t *testing.T) {
	c := startCluster(t, nil)
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionSnappy)
	cl.OK("CREATE topic=fire partitions=1")
	cl.SendText("PUBLISH topic=fire producerId=p acks=0 message=one")
	id := cl.SendText("PUBLISH topic=fire producerId=p acks=1 message=two")
	f := cl.MustRead()
	if f.Header.RequestID != id {
		t.Fatalf("first frame answers request %d; acks=0 must get no frame", f.Header.RequestID)
	}
	looptest.Eventually(t, "both records stored", func() bool { return len(c.part.Records("fire", 0)) == 2 })
	// Batch frame with acks "0": no answer either.
	cl.SendBatch("fire", "0", "three")
	if got := cl.OK("LIST"); got != "OK count=1 topics=fire" {
		t.Fatalf("LIST after acks=0 batch = %q", got)
	}
	looptest.Eventually(t, "batch stored", func() bool { return len(c.part.Records("fire", 0)) == 3 })
	if v := testutil.ToFloat64(c.gw.m.acks.WithLabelValues("0", "ok")); v != 2 {
		t.Fatalf("acks=0 count %v", v)
	}
}

func TestPublishRoutingAndRules(t *testing.T) {
	c := startCluster(t, nil)
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionGzip)
	cl.OK("CREATE topic=keyed partitions=4")
	want := placement.KeyPartition([]byte("user-42"), 4)
	cl.OK("PUBLISH topic=keyed producerId=p key=user-42 message=a")
	cl.OK("PUBLISH topic=keyed producerId=p key=user-42 message=b")
	if n := len(c.part.Records("keyed", want)); n != 2 {
		t.Fatalf("partition %d holds %d records, want 2", want, n)
	}
	// A batch with partition -1 is routed by its first key and patched.
	var b wire.Batch
	b.Topic, b.Partition, b.Acks = "keyed", -1, "all"
	b.Records = []wire.Record{{Topic: "keyed", Partition: -1, Key: "user-42", Payload: []byte("c")}, {Topic: "keyed", Partition: -1, Key: "user-42", Payload: []byte("d")}}
	payload, _ := b.AppendTo(nil)
	cl.Send(wire.CmdPublish, payload)
	f := cl.MustRead()
	ack, err := wire.ParseAck(f.Payload)
	if err != nil || ack.LastOffset != 3 {
		t.Fatalf("batch ack %q: %+v %v", f.Payload, ack, err)
	}
	recs := c.part.Records("keyed", want)
	if len(recs) != 4 {
		t.Fatalf("want 4 records in partition %d, got %d", want, len(recs))
	}
	if r, err := wire.DecodeRecord(recs[3]); err != nil || r.Partition != want || string(r.Payload) != "d" {
		t.Fatalf("routed record %+v %v", r, err)
	}
	// round_robin ignores keys.
	cl.OK("CREATE topic=rr partitions=2 partitioner=round_robin")
	for i := 0; i < 4; i++ {
		cl.OK("PUBLISH topic=rr producerId=p key=same message=x")
	}
	if a, b := len(c.part.Records("rr", 0)), len(c.part.Records("rr", 1)); a != 2 || b != 2 {
		t.Fatalf("round robin spread %d/%d", a, b)
	}
	// Spec rules.
	cl.FailWith("PUBLISH topic=keyed producerId=p isIdempotent=true acks=1 message=x", "idempotence_requires_acks_all")
	cl.FailWith("PUBLISH topic=keyed producerId=p transactional_id=t1 message=x", "transaction_metadata_forbidden", "command", "PUBLISH")
	cl.FailWith("PUBLISH topic=keyed producerId=p acks=2 message=x", "invalid_parameter")
	cl.FailWith("PUBLISH topic=keyed message=x", "missing_producer_id")
	cl.FailWith("PUBLISH topic=keyed producerId=p partition=9 message=x", "partition_not_found")
	cl.FailWith("TXN_APPEND_STREAM transactional_id=t1 producerId=p epoch=1 seqNum=1 topic=keyed key=k version=1 message=x", "event_sourcing_not_enabled", "topic", "keyed")
	cl.FailWith("TXN_APPEND_STREAM transactional_id=t1 producerId=p epoch=1 topic=keyed key=k version=1 message=x", "invalid_parameter", "param", "seqNum")
	cl.FailWith("TXN_APPEND_STREAM transactional_id=t1 producerId=p epoch=1 seqNum=1 topic=keyed key=k version=0 message=x", "invalid_parameter", "param", "version")
	cl.FailWith("REPLICATE_MESSAGE topic=keyed", "internal_command_unauthorized")
}

func TestPublishFollowsNotLeader(t *testing.T) {
	c, cl := startDialed(t)
	cl.OK("CREATE topic=moving partitions=1")
	c.part.On("Produce", 2, partitionfake.InBand(errcode.NotLeader.New("moved", "leader", "p1")))
	cl.OK("PUBLISH topic=moving producerId=p message=x")
	if n, sent := len(c.part.Records("moving", 0)), c.part.Calls("Produce"); n != 1 || sent != 3 {
		t.Fatalf("stored %d records after %d appends, want 1 after 2 refused", n, sent)
	}
	if v := testutil.ToFloat64(c.gw.m.replRetries.WithLabelValues("moving", "1", "routing")); v != 2 {
		t.Fatalf("replication retries {moving,1,routing} = %v, want 2", v)
	}
}

func TestGroupCommandsAndCommittedOffsetPrecedence(t *testing.T) {
	c, cl := startDialed(t)
	cl.OK("CREATE topic=t partitions=3")
	for i := 0; i < 5; i++ {
		cl.OK("PUBLISH topic=t partition=0 producerId=p message=m")
	}
	c.coord.SetPartitions("t", 3)
	m := join(t, c, cl, "g", "m", "t")
	if m.reply != fmt.Sprintf("OK generation=%d member=%s assignments=[0 1 2]", m.generation, m.id) {
		t.Fatalf("JOIN_GROUP = %q", m.reply)
	}
	if got := cl.OK(m.with("HEARTBEAT topic=t group=g")); got != fmt.Sprintf("OK member=%s generation=%d", m.id, m.generation) {
		t.Fatalf("HEARTBEAT = %q", got)
	}
	other := fmt.Sprintf("HEARTBEAT topic=t group=g member=%s generation=%d", m.id, m.generation+1)
	cl.FailWith(other, "GEN_MISMATCH", "current", strconv.FormatUint(m.generation, 10))
	cl.FailWith("COMMIT_OFFSET topic=t partition=0 group=g offset=3 member="+m.id, "missing_generation")
	if got := cl.OK(m.with("COMMIT_OFFSET topic=t partition=0 group=g offset=3")); got != "OK" {
		t.Fatalf("COMMIT_OFFSET = %q", got)
	}
	if got := cl.OK("FETCH_OFFSET topic=t partition=0 group=g"); got != "OK offset=3" {
		t.Fatalf("FETCH_OFFSET = %q", got)
	}
	// The committed offset wins over a lower requested offset.
	b, err := wire.DecodeBatch(cl.Do("CONSUME topic=t partition=0 offset=0 member=m group=g").Payload)
	if err != nil || len(b.Records) != 2 || b.Records[0].Offset != 3 {
		t.Fatalf("consume from committed: %+v %v", b, err)
	}
	// A later requested offset wins over the committed one (spec 4.6: the
	// commit wins only when the request is lower).
	b, err = wire.DecodeBatch(cl.Do("CONSUME topic=t partition=0 offset=4 member=m group=g").Payload)
	if err != nil || len(b.Records) != 1 || b.Records[0].Offset != 4 {
		t.Fatalf("consume past committed: %+v %v", b, err)
	}
	// Without a commit the explicit offset applies; wildcards resolve.
	b, err = wire.DecodeBatch(cl.Do("CONSUME topic=? partition=0 offset=1 member=m batch=2").Payload)
	if err != nil || b.Topic != "t" || len(b.Records) != 2 || b.Records[0].Offset != 1 {
		t.Fatalf("consume wildcard: %+v %v", b, err)
	}
	if got := cl.OK(m.with("BATCH_COMMIT topic=t group=g offsets=P0:4,P1:0")); got != "OK batched=2" {
		t.Fatalf("BATCH_COMMIT = %q", got)
	}
	cl.FailWith(m.with("BATCH_COMMIT topic=t group=g offsets=P0:4,P0:5"), "duplicate_partition")
	cl.FailWith(m.with("BATCH_COMMIT topic=t group=g offsets=0:4"), "invalid_batch_commit_entry")
	// Generation is checked before the entries (spec 4.5 order): the list
	// travels raw to the coordinator.
	other = fmt.Sprintf("BATCH_COMMIT topic=t group=g member=%s generation=%d offsets=P0:4,P0:5", m.id, m.generation+1)
	cl.FailWith(other, "GEN_MISMATCH")
	// The Python/Java SDK form: one positional list.
	if got := cl.OK(m.with("BATCH_COMMIT topic=t group=g") + " P2:7"); got != "OK batched=1" {
		t.Fatalf("positional BATCH_COMMIT = %q", got)
	}
	fc := cl.OK("FIND_COORDINATOR group=g")
	r, err := wire.ParseOK(fc)
	if err != nil || r.Value("coordinator_id") != "c1" || r.Value("host")+":"+r.Value("port") != c.addr {
		t.Fatalf("FIND_COORDINATOR = %q", fc)
	}
	// The GROUP_STATUS fields this test reads (spec 2.3).
	var st struct {
		State   string            `json:"state"`
		Members []json.RawMessage `json:"members"`
	}
	if err := json.Unmarshal([]byte(cl.OK("GROUP_STATUS group=g")), &st); err != nil || st.State != "Stable" || len(st.Members) != 1 {
		t.Fatalf("GROUP_STATUS %+v %v", st, err)
	}
	if n := c.coord.Calls("JoinGroup"); n != 1 {
		t.Fatalf("joins forwarded %d", n)
	}
}

func TestStreamPushesAndCloses(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		cfg.StreamKeepalive = 50 * time.Millisecond
		cfg.StreamInterval = 20 * time.Millisecond
	})
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("CREATE topic=s partitions=1")
	cl.OK("PUBLISH topic=s producerId=p message=one")
	id := cl.SendText("STREAM topic=s partition=0 group=g member=m")
	f := cl.MustRead()
	if f.Header.Kind != wire.KindStream || f.Header.RequestID != id {
		t.Fatalf("stream frame %+v", f.Header)
	}
	b, err := wire.DecodeBatch(f.Payload)
	if err != nil || len(b.Records) != 1 {
		t.Fatalf("stream batch %+v %v", b, err)
	}
	// Silence brings keepalives: empty stream frames with status OK.
	f = cl.MustRead()
	if f.Header.Kind != wire.KindStream || f.Header.Status != wire.StatusOK || len(f.Payload) != 0 {
		t.Fatalf("keepalive %+v %q", f.Header, f.Payload)
	}
	// A new request stops the stream with a CLOSE control frame first.
	next := cl.SendText("LIST")
	for {
		f = cl.MustRead()
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
	if f = cl.MustRead(); f.Header.RequestID != next || string(f.Payload) != "OK count=1 topics=s" {
		t.Fatalf("after stream: %d %q", f.Header.RequestID, f.Payload)
	}
}

// TestListOffsetsAtTime: LIST_OFFSETS timestamp=<ms> (a Strata extension
// parameter) passes the time to the partition leader and answers its
// offset_for_time as time=<offset> per partition; a bad timestamp is
// invalid_parameter.
func TestListOffsetsAtTime(t *testing.T) {
	c := startCluster(t, nil)
	var asked atomic.Int64
	c.part.On("ListOffsets", 0, func(ctx context.Context, req proto.Message, next fakerpc.Next) (proto.Message, error) {
		r := req.(*partitionv1.ListOffsetsRequest)
		if r.TimestampMs == nil {
			return next()
		}
		asked.Store(r.GetTimestampMs())
		out := &partitionv1.ListOffsetsResponse{}
		for _, p := range r.GetPartitions() {
			out.Partitions = append(out.Partitions, &partitionv1.PartitionOffsets{Partition: p, Latest: 9, Leo: 9, Hwm: 9, Lso: 9, OffsetForTime: 4})
		}
		return out, nil
	})
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("CREATE topic=timed partitions=1")
	got := cl.OK("LIST_OFFSETS topic=timed timestamp=1700000000000")
	if !strings.Contains(got, "P0:earliest=0:latest=9:leo=9:hwm=9:time=4") || asked.Load() != 1700000000000 {
		t.Fatalf("LIST_OFFSETS at a time = %q (leader asked for %d)", got, asked.Load())
	}
	if got := cl.OK("LIST_OFFSETS topic=timed"); strings.Contains(got, "time=") {
		t.Fatalf("LIST_OFFSETS without a time = %q", got)
	}
	cl.FailWith("LIST_OFFSETS topic=timed timestamp=noon", "invalid_parameter")
}
