package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/client/fakebroker"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startBroker(t *testing.T, o fakebroker.Options) *fakebroker.Broker {
	t.Helper()
	b, err := fakebroker.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func dial(t *testing.T, b *fakebroker.Broker, o client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.Addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startDialed starts a broker with default options and a client dialed to
// it, with the test's context.
func startDialed(t *testing.T) (*fakebroker.Broker, *client.Client, context.Context) {
	t.Helper()
	b := startBroker(t, fakebroker.Options{})
	return b, dial(t, b, client.Options{}), testCtx(t)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic or fails t.
func createTopic(ctx context.Context, t *testing.T, c *client.Client, name string, partitions int) {
	t.Helper()
	if _, err := c.CreateTopic(ctx, client.TopicConfig{Name: name, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
}

func mustCode(t *testing.T, err error, code errcode.Code) *errcode.Error {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok || !errors.Is(err, code) {
		t.Fatalf("error %v, want code %s", err, code.Name())
	}
	if e.Class != code.Class() || e.Retryable != code.Retryable() {
		t.Fatalf("error %v: class %s retryable %v, want %s %v", err, e.Class, e.Retryable, code.Class(), code.Retryable())
	}
	return e
}

func TestNegotiation(t *testing.T) {
	b := startBroker(t, fakebroker.Options{Compressions: []wire.Compression{wire.CompressionNone, wire.CompressionLZ4, wire.CompressionSnappy}})
	for _, tc := range []struct {
		prefs []wire.Compression
		want  wire.Compression
	}{
		{nil, wire.CompressionNone},
		{[]wire.Compression{wire.CompressionLZ4}, wire.CompressionLZ4},
		{[]wire.Compression{wire.CompressionSnappy, wire.CompressionLZ4}, wire.CompressionSnappy},
		// gzip is not offered by this server: the client's appended "none" wins.
		{[]wire.Compression{wire.CompressionGzip}, wire.CompressionNone},
	} {
		c := dial(t, b, client.Options{Compressions: tc.prefs})
		if got := c.Compression(); got != tc.want {
			t.Fatalf("prefs %v: negotiated %v, want %v", tc.prefs, got, tc.want)
		}
		// A compressed round trip proves both sides agree on the codec.
		ctx := testCtx(t)
		name := "neg-" + tc.want.String() + fmt.Sprint(len(tc.prefs))
		createTopic(ctx, t, c, name, 1)
		payload := make([]byte, 4096)
		if _, err := c.PublishBatch(ctx, &wire.Batch{BatchHeader: wire.BatchHeader{Topic: name, Acks: "1"},
			Records: []wire.Record{{Payload: payload}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNegotiationRefused(t *testing.T) {
	b := startBroker(t, fakebroker.Options{RefuseNegotiation: true})
	_, err := client.Dial(testCtx(t), b.Addr(), client.Options{})
	mustCode(t, err, errcode.NegotiationFailed)
}

func TestDialFailureIsTypedAndRetryable(t *testing.T) {
	b := startBroker(t, fakebroker.Options{})
	addr := b.Addr()
	b.Close()
	_, err := client.Dial(testCtx(t), addr, client.Options{DialTimeout: time.Second})
	e, ok := errcode.As(err)
	if !ok || e.Code != client.CodeConnectionLost || !e.Retryable || e.Class != errcode.ClassAvailability {
		t.Fatalf("dial error %v, want retryable connection_lost", err)
	}
}

func TestAdminCommandsAndErrorMapping(t *testing.T) {
	b, c, ctx := startDialed(t)
	r, err := c.CreateTopic(ctx, client.TopicConfig{Name: "orders", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Int("partitions"); n != 3 || r.Value("topic") != "orders" {
		t.Fatalf("create reply %q", r.Text)
	}
	if _, err := c.CreateTopic(ctx, client.TopicConfig{Name: "bad/name"}); err == nil {
		t.Fatal("bad name accepted")
	} else {
		mustCode(t, err, errcode.InvalidTopicName)
	}
	names, err := c.ListTopics(ctx)
	if err != nil || len(names) != 1 || names[0] != "orders" {
		t.Fatalf("list %v %v", names, err)
	}
	d, err := c.Describe(ctx, "orders")
	if err != nil || d.Definition.Partitions != 3 || len(d.Partitions) != 3 {
		t.Fatalf("describe %+v %v", d, err)
	}
	md, err := c.Metadata(ctx, "orders")
	if err != nil || md.Partitions != 3 || len(md.Leaders) != 3 || len(md.Epochs) != 3 {
		t.Fatalf("metadata %+v %v", md, err)
	}
	if _, err := c.Publish(ctx, client.PublishRequest{Topic: "orders", Partition: 1, Acks: "1", Message: "hello world"}); err != nil {
		t.Fatal(err)
	}
	offs, err := c.ListOffsets(ctx, "orders", -1)
	if err != nil || len(offs) != 3 || offs[1].Latest != 1 || offs[0].Latest != 0 {
		t.Fatalf("offsets %+v %v", offs, err)
	}
	cs, err := c.ClusterStatus(ctx)
	if err != nil || len(cs) == 0 {
		t.Fatalf("cluster status %s %v", cs, err)
	}
	nodes, err := c.ListCluster(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ClientAddress != b.Addr() || !nodes[0].Live || nodes[0].Role != "gateway" {
		t.Fatalf("list cluster %+v %v", nodes, err)
	}
	co, err := c.FindCoordinator(ctx, "g")
	if err != nil || co.Addr() != b.Addr() {
		t.Fatalf("coordinator %+v %v", co, err)
	}
	// The server's typed error arrives with code, class, retryable, fields.
	_, err = c.DeleteTopic(ctx, "missing", false)
	e := mustCode(t, err, errcode.TopicNotFound)
	if e.Field("topic") != "missing" {
		t.Fatalf("fields lost: %v", e)
	}
	if del, err := c.DeleteTopic(ctx, "missing", true); err != nil || del {
		t.Fatalf("if_exists delete %v %v", del, err)
	}
	if del, err := c.DeleteTopic(ctx, "orders", false); err != nil || !del {
		t.Fatalf("delete %v %v", del, err)
	}
	// An injected routing error keeps its redirect data and retryability.
	b.Inject(wire.CmdList, errcode.NotLeader.New("not the leader", "leader", "10.0.0.7:9000"), 1)
	_, err = c.ListTopics(ctx)
	e = mustCode(t, err, errcode.NotLeader)
	if !e.Retryable || e.Class != errcode.ClassRouting || e.Field("leader") != "10.0.0.7:9000" {
		t.Fatalf("routing error %v", e)
	}
	// Raw Do: the SDK text form, message= taking the rest of the line.
	createTopic(ctx, t, c, "raw", 1)
	resp, err := c.Do(ctx, "PUBLISH topic=raw acks=1 producerId=p1 message=a b  c")
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := wire.ParseAck(resp.Frames[0]); err != nil || ack.Status != "OK" {
		t.Fatalf("ack %+v %v", ack, err)
	}
	if got := string(b.Records("raw", 0)[0].Payload); got != "a b  c" {
		t.Fatalf("message %q", got)
	}
	if _, err := c.Do(ctx, "REPLICATE_MESSAGE topic=raw"); err == nil {
		t.Fatal("internal command sent")
	}
	_, err = c.Do(ctx, "TRUNCATE topic=raw expected_revision=1")
	mustCode(t, err, errcode.UnsupportedFeature)
}

func TestPipeliningOnOneConnection(t *testing.T) {
	b, c, ctx := startDialed(t)
	createTopic(ctx, t, c, "p", 1)
	b.SetDelay(wire.CmdDescribe, time.Second)
	slowDone := make(chan time.Time, 1)
	go func() {
		_, err := c.Describe(ctx, "p")
		if err != nil {
			t.Error(err)
		}
		slowDone <- time.Now()
	}()
	time.Sleep(50 * time.Millisecond) // the slow request is on the wire first
	// Fast requests overtake it on the same connection.
	var wg sync.WaitGroup
	offsets := make([]uint64, 200)
	for i := range offsets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ack, err := c.PublishBatch(ctx, &wire.Batch{BatchHeader: wire.BatchHeader{Topic: "p", Acks: "1"},
				Records: []wire.Record{{Payload: []byte(fmt.Sprint(i))}}})
			if err != nil {
				t.Error(err)
			}
			offsets[i] = ack.LastOffset
		}()
	}
	wg.Wait()
	fastDone := time.Now()
	slow := <-slowDone
	if !fastDone.Before(slow) {
		t.Fatalf("fast requests finished after the slow one: pipelining not effective")
	}
	// Each answer went to its own request: the stored record at the acked
	// offset is the one that request sent.
	recs := b.Records("p", 0)
	for i, off := range offsets {
		if string(recs[off].Payload) != fmt.Sprint(i) {
			t.Fatalf("request %d got ack for offset %d holding %q", i, off, recs[off].Payload)
		}
	}
}

func TestAcksZeroWaitsForNothing(t *testing.T) {
	b, c, ctx := startDialed(t)
	createTopic(ctx, t, c, "fire", 1)
	// Any answer would take 1 s; acks=0 must not wait for one.
	b.SetDelay(wire.CmdPublish, time.Second)
	start := time.Now()
	for i := range 5 {
		if _, err := c.PublishBatch(ctx, &wire.Batch{BatchHeader: wire.BatchHeader{Topic: "fire", Acks: "0"},
			Records: []wire.Record{{Payload: []byte{byte(i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Publish(ctx, client.PublishRequest{Topic: "fire", Partition: 0, Acks: "0", Message: "text"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Fatalf("acks=0 publishes took %v", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.Records("fire", 0)) < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("stored %d of 6", len(b.Records("fire", 0)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRequestTimeoutLeavesConnectionUsable(t *testing.T) {
	b := startBroker(t, fakebroker.Options{})
	c := dial(t, b, client.Options{RequestTimeout: 250 * time.Millisecond})
	ctx := context.Background()
	// The answer comes long after the request timeout: the error code (not
	// a measured duration) shows the timeout fired first.
	b.SetDelay(wire.CmdList, 1500*time.Millisecond)
	_, err := c.ListTopics(ctx)
	mustCode(t, err, errcode.RequestTimeout)
	b.SetDelay(wire.CmdList, 0)
	time.Sleep(1500 * time.Millisecond) // the late answer arrives and is dropped
	// The connection still serves. A loaded CI machine may stretch one
	// answer past 250 ms, so a few attempts are allowed; a connection the
	// late answer broke would fail them all with another code.
	for i := 0; ; i++ {
		_, err := c.ListTopics(ctx)
		if err == nil {
			break
		}
		if e, ok := errcode.As(err); !ok || e.Code != errcode.RequestTimeout.Name() || i == 9 {
			t.Fatalf("after a timed-out request: %v", err)
		}
	}
	// A caller's cancellation is request_cancelled.
	b.SetDelay(wire.CmdList, 1500*time.Millisecond)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = c.ListTopics(cctx)
	mustCode(t, err, errcode.RequestCancelled)
}

func TestReconnectAfterConnectionLoss(t *testing.T) {
	b := startBroker(t, fakebroker.Options{})
	c := dial(t, b, client.Options{ReconnectBackoff: 10 * time.Millisecond})
	ctx := testCtx(t)
	b.SetDelay(wire.CmdList, time.Second)
	errc := make(chan error, 1)
	go func() { _, err := c.ListTopics(ctx); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	b.DropConnections()
	err := <-errc
	e, ok := errcode.As(err)
	if !ok || e.Code != client.CodeConnectionLost || !e.Retryable {
		t.Fatalf("in-flight request on a dropped connection: %v", err)
	}
	b.SetDelay(wire.CmdList, 0)
	// The next call redials.
	if _, err := c.ListTopics(ctx); err != nil {
		t.Fatalf("after reconnect: %v", err)
	}
	// Closing the client fails later calls with client_closed.
	_ = c.Close()
	if _, err := c.ListTopics(ctx); !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("closed client: %v", err)
	}
}

func TestStream(t *testing.T) {
	b := startBroker(t, fakebroker.Options{StreamInterval: 10 * time.Millisecond})
	c := dial(t, b, client.Options{})
	ctx := testCtx(t)
	createTopic(ctx, t, c, "s", 1)
	st, err := c.Stream(ctx, client.StreamRequest{Topic: "s", Partition: 0, Member: "m", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 10 {
		if _, err := c.Publish(ctx, client.PublishRequest{Topic: "s", Partition: 0, Acks: "1", Message: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for bt, err := range st.Batches(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range bt.Records {
			got = append(got, string(r.Payload))
		}
		if len(got) >= 10 {
			break
		}
	}
	for i, s := range got {
		if s != fmt.Sprint(i) {
			t.Fatalf("record %d = %q", i, s)
		}
	}
	// With nothing to send the server sends keepalives, which Next skips.
	time.Sleep(60 * time.Millisecond)
	b.StopStreams(wire.CloseStopped)
	_, err = st.Next(ctx)
	var sc *client.StreamClosedError
	if !errors.As(err, &sc) || sc.Control.Reason != wire.CloseStopped || sc.Control.Offset != 10 {
		t.Fatalf("close: %v", err)
	}
	if st.Keepalives() == 0 {
		t.Fatal("no keepalive seen")
	}
	// A stream on a missing topic ends with the server's typed error.
	st2, err := c.Stream(ctx, client.StreamRequest{Topic: "nope", Partition: 0, Member: "m", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	_, err = st2.Next(ctx)
	mustCode(t, err, errcode.TopicNotFound)
}

func TestProducerBatchesRoutesAndRetries(t *testing.T) {
	b := startBroker(t, fakebroker.Options{})
	c := dial(t, b, client.Options{ClientID: "prod"})
	ctx := testCtx(t)
	createTopic(ctx, t, c, "events", 4)
	// Two retryable failures are absorbed by retries.
	b.Inject(wire.CmdPublish, errcode.InsufficientInSyncReplicas.New("isr shrank"), 2)
	p := client.NewProducer(c, client.ProducerOptions{Idempotent: true, BatchRecords: 100, Linger: 5 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	const n = 1000
	results := make([]*client.Result, n)
	for i := range n {
		r, err := p.Send(ctx, client.Message{Topic: "events", Partition: -1, Key: fmt.Sprintf("k%d", i%17), Value: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		results[i] = r
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]int32{}
	for i, r := range results {
		if _, err := r.Wait(ctx); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		k := fmt.Sprintf("k%d", i%17)
		if p, ok := byKey[k]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", k, p, r.Partition)
		}
		byKey[k] = r.Partition
		rec := b.Records("events", r.Partition)[r.Offset]
		if string(rec.Payload) != fmt.Sprint(i) || rec.ProducerID != p.ProducerID() || rec.SeqNum == 0 {
			t.Fatalf("record %d stored as %+v", i, rec)
		}
	}
	total := 0
	for part := range int32(4) {
		recs := b.Records("events", part)
		total += len(recs)
		for j := 1; j < len(recs); j++ {
			if recs[j].SeqNum != recs[j-1].SeqNum+1 {
				t.Fatalf("partition %d sequence gap at %d", part, j)
			}
		}
	}
	if total != n {
		t.Fatalf("stored %d records, want %d (retries must not duplicate)", total, n)
	}
	// A non-retryable failure reaches the results without retries.
	p2 := client.NewProducer(c, client.ProducerOptions{Linger: -1})
	r, err := p2.Send(ctx, client.Message{Topic: "events", Partition: 9, Value: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Wait(ctx)
	mustCode(t, err, errcode.PartitionNotFound)
	if err := p2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Send(ctx, client.Message{Topic: "events", Partition: 0}); err == nil {
		t.Fatal("send after close accepted")
	}
}

func TestConsumerGroupLifecycle(t *testing.T) {
	b, c, ctx := startDialed(t)
	createTopic(ctx, t, c, "g", 4)
	p := client.NewProducer(c, client.ProducerOptions{})
	for i := range 100 {
		if _, err := p.Send(ctx, client.Message{Topic: "g", Partition: int32(i % 4), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	k := client.NewConsumer(c, client.ConsumerOptions{Group: "grp", Topic: "g", Member: "m", WaitMS: 10, HeartbeatInterval: 20 * time.Millisecond})
	seen := map[string]bool{}
	for len(seen) < 100 {
		recs, err := k.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seen[string(r.Payload)] = true
		}
	}
	if len(k.Assignments()) != 4 {
		t.Fatalf("assignments %v", k.Assignments())
	}
	if err := k.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for part := range int32(4) {
		if v, _ := b.Committed("g", "grp", part); v != 25 {
			t.Fatalf("partition %d committed %d, want 25", part, v)
		}
	}
	gen := k.Generation()
	// A second member joins: the generation moves on, the first member's
	// heartbeat gets GEN_MISMATCH and it rejoins with half the partitions.
	k2 := client.NewConsumer(c, client.ConsumerOptions{Group: "grp", Topic: "g", Member: "m2", WaitMS: 10, HeartbeatInterval: 20 * time.Millisecond})
	if _, err := k2.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for k.Generation() == gen || len(k.Assignments()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("first member did not rejoin: gen %d assignments %v", k.Generation(), k.Assignments())
		}
		if _, err := k.Poll(ctx); err != nil && !errcode.IsRetryable(err) {
			var e *errcode.Error
			if !errors.As(err, &e) || e.Class != errcode.ClassFencing {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Committed positions survive the rebalance: the new owner starts there.
	for _, part := range k2.Assignments() {
		if k2.Position(part) != 25 {
			t.Fatalf("member 2 starts partition %d at %d", part, k2.Position(part))
		}
	}
	st, err := c.GroupStatus(ctx, "grp")
	if err != nil || st.MemberCount != 2 || len(st.Members) != 2 {
		t.Fatalf("group status %+v %v", st, err)
	}
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = c.GroupStatus(ctx, "grp")
	if err != nil || st.MemberCount != 0 {
		t.Fatalf("after leave %+v %v", st, err)
	}
	// Raw group commands: a stale generation is a fencing error.
	jr, err := c.JoinGroup(ctx, "grp", "m3", "g")
	if err != nil {
		t.Fatal(err)
	}
	err = c.CommitOffset(ctx, "g", 0, "grp", 30, jr.Member, jr.Generation-1)
	mustCode(t, err, errcode.GenMismatch)
	err = c.CommitOffset(ctx, "g", 0, "grp", 1, jr.Member, jr.Generation)
	mustCode(t, err, errcode.OffsetRegression)
	if n, err := c.BatchCommit(ctx, "g", "grp", jr.Member, jr.Generation, []wire.PartitionOffset{{Partition: 0, Offset: 26}, {Partition: 1, Offset: 27}}); err != nil || n != 2 {
		t.Fatalf("batch commit %d %v", n, err)
	}
	if off, err := c.FetchOffset(ctx, "g", 1, "grp"); err != nil || off != 27 {
		t.Fatalf("fetch offset %d %v", off, err)
	}
	if _, err := c.Heartbeat(ctx, "g", "grp", jr.Member, jr.Generation); err != nil {
		t.Fatal(err)
	}
	if err := c.LeaveGroup(ctx, "g", "grp", jr.Member); err != nil {
		t.Fatal(err)
	}
	_, err = c.Heartbeat(ctx, "g", "grp", jr.Member, jr.Generation)
	mustCode(t, err, errcode.MemberNotFound)
}

func TestTLS(t *testing.T) {
	pk := pkitest.New(t)
	files := pk.Files(t, pki.RoleGateway, "gw-1")
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	// The client listener does not require client certificates.
	srvCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	b := startBroker(t, fakebroker.Options{TLS: srvCfg})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pk.CA.CertPEM)
	c := dial(t, b, client.Options{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if _, err := c.ListTopics(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Without the CA the handshake fails with a typed, retryable error.
	_, err = client.Dial(testCtx(t), b.Addr(), client.Options{TLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	if e, ok := errcode.As(err); !ok || e.Code != client.CodeConnectionLost {
		t.Fatalf("untrusted server: %v", err)
	}
	// The same from PEM files, as the environment names them.
	t.Setenv(client.EnvTLSCA, files.CA)
	t.Setenv(client.EnvTLSServerName, "")
	c2 := dial(t, b, client.Options{TLSFiles: client.TLSFilesFromEnv()})
	if _, err := c2.ListTopics(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	_, err = client.Dial(testCtx(t), b.Addr(), client.Options{TLSFiles: client.TLSFiles{CA: files.CA, Cert: files.Cert}})
	mustCode(t, err, errcode.InvalidParameter)
}

func TestUnbuiltCommandsPassTheTypedErrorThrough(t *testing.T) {
	b, c, ctx := startDialed(t)
	_, err := c.InitProducerID(ctx, "tx-1")
	if e := mustCode(t, err, errcode.UnsupportedFeature); e.Field("command") != "INIT_PRODUCER_ID" {
		t.Fatalf("fields %v", e)
	}
	_, err = c.ReadStream(ctx, "t", "k", 1, 0)
	mustCode(t, err, errcode.UnsupportedFeature)
	_, err = c.AppendStream(ctx, client.Event{Topic: "t", Key: "k", Version: 1, Metadata: `{"a":1}`, Payload: []byte("p q")})
	mustCode(t, err, errcode.UnsupportedFeature)
	if b.Requests(wire.CmdAppendStream) != 1 || b.Requests(wire.CmdReadStream) != 1 {
		t.Fatal("requests not sent")
	}
}

// DeleteGroup and ResetOffsets send the extension commands and map their
// answers: reset moves offsets down, a missing group is registered, active
// groups are group_not_empty, bad lists fail before anything is sent.
func TestGroupAdminCommands(t *testing.T) {
	b, c, ctx := startDialed(t)
	createTopic(ctx, t, c, "t", 2)
	jr, err := c.JoinGroup(ctx, "g", "m", "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.BatchCommit(ctx, "t", "g", jr.Member, jr.Generation, []wire.PartitionOffset{{Partition: 0, Offset: 9}, {Partition: 1, Offset: 4}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ResetOffsets(ctx, "g", "t", []wire.PartitionOffset{{Partition: 0, Offset: 1}})
	mustCode(t, err, errcode.GroupNotEmpty)
	mustCode(t, c.DeleteGroup(ctx, "g"), errcode.GroupNotEmpty)
	if err := c.LeaveGroup(ctx, "t", "g", jr.Member); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		group   string
		offsets []wire.PartitionOffset
		n       int
		want    map[int32]uint64
	}{
		{name: "lowers and raises", group: "g", offsets: []wire.PartitionOffset{{Partition: 0, Offset: 2}, {Partition: 1, Offset: 50}}, n: 2,
			want: map[int32]uint64{0: 2, 1: 50}},
		{name: "registers a missing group", group: "new", offsets: []wire.PartitionOffset{{Partition: 1, Offset: 3}}, n: 1,
			want: map[int32]uint64{1: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := c.ResetOffsets(ctx, tc.group, "t", tc.offsets)
			if err != nil || n != tc.n {
				t.Fatalf("ResetOffsets = %d %v", n, err)
			}
			for p, w := range tc.want {
				if v, ok := b.Committed("t", tc.group, p); !ok || v != w {
					t.Fatalf("P%d committed %d %v, want %d", p, v, ok, w)
				}
			}
		})
	}
	before := b.Requests(wire.CmdResetOffsets)
	_, err = c.ResetOffsets(ctx, "g", "t", nil)
	mustCode(t, err, errcode.NoValidOffsets)
	_, err = c.ResetOffsets(ctx, "g", "t", []wire.PartitionOffset{{Partition: -1, Offset: 1}})
	mustCode(t, err, errcode.InvalidBatchCommitEntry)
	if b.Requests(wire.CmdResetOffsets) != before {
		t.Fatal("an invalid list was sent")
	}
	_, err = c.ResetOffsets(ctx, "g", "t", []wire.PartitionOffset{{Partition: 7, Offset: 1}})
	mustCode(t, err, errcode.PartitionNotFound)
	if err := c.DeleteGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Committed("t", "g", 1); ok {
		t.Fatal("offsets survive DeleteGroup")
	}
	mustCode(t, c.DeleteGroup(ctx, "g"), errcode.GroupNotFound)
	r, err := c.ListGroups(ctx)
	if err != nil || r.Value("groups") != "new" {
		t.Fatalf("groups after delete %q %v", r.Text, err)
	}
}

// ConsumeView reads the same records as Consume, without Record structs, and
// a bad reply is the same typed error.
func TestConsumeView(t *testing.T) {
	_, c, ctx := startDialed(t)
	createTopic(ctx, t, c, "v", 1)
	recs := make([]wire.Record, 5)
	for i := range recs {
		recs[i] = wire.Record{Payload: []byte(fmt.Sprint("m", i)), Key: fmt.Sprint("k", i), Timestamp: int64(i + 1)}
	}
	if _, err := c.PublishBatch(ctx, &wire.Batch{BatchHeader: wire.BatchHeader{Topic: "v", Acks: "1"}, Records: recs}); err != nil {
		t.Fatal(err)
	}
	req := client.ConsumeRequest{Topic: "v", Partition: 0, Offset: 1}
	want, err := c.Consume(ctx, req)
	if err != nil || len(want.Records) != 4 {
		t.Fatalf("consume: %v, %+v", err, want)
	}
	v, err := c.ConsumeView(ctx, req)
	if err != nil || v.RecordCount() != 4 {
		t.Fatalf("view: %v, %d records", err, v.RecordCount())
	}
	it := v.Records()
	i := 0
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		if got := r.Record(); !reflect.DeepEqual(got, want.Records[i]) {
			t.Fatalf("record %d: %+v, want %+v", i, got, want.Records[i])
		}
		i++
	}
	if it.Err() != nil || i != 4 {
		t.Fatalf("iterated %d records: %v", i, it.Err())
	}
	_, err = c.ConsumeView(ctx, client.ConsumeRequest{Topic: "nope", Partition: 0})
	mustCode(t, err, errcode.TopicNotFound)
}

// A reply buffer given back with Recycle holds a later reply of its size
// class, which reads as a fresh one; before any Recycle, replies are
// allocated at their size.
func TestRecycleReusesReplyBuffers(t *testing.T) {
	_, c, ctx := startDialed(t)
	createTopic(ctx, t, c, "r", 1)
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 1000) }
	recs := make([]wire.Record, 100) // a reply of about 100 KB: pooled
	for i := range recs {
		recs[i] = wire.Record{Payload: payload(i % 26), Timestamp: int64(i + 1)}
	}
	for range 3 {
		if _, err := c.PublishBatch(ctx, &wire.Batch{BatchHeader: wire.BatchHeader{Topic: "r", Acks: "1"}, Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(off uint64) wire.BatchView {
		t.Helper()
		v, err := c.ConsumeView(ctx, client.ConsumeRequest{Topic: "r", Partition: 0, Offset: off, MaxRecords: 100})
		if err != nil || v.RecordCount() != 100 {
			t.Fatalf("view at %d: %v, %d records", off, err, v.RecordCount())
		}
		it := v.Records()
		i := 0
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			if r.Offset() != off+uint64(i) || !bytes.Equal(r.Payload(), payload(i%26)) {
				t.Fatalf("record %d at %d: offset %d, payload %.10q", i, off, r.Offset(), r.Payload())
			}
			i++
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		return v
	}
	first := read(0)
	if b := first.Bytes(); cap(b) != len(b) {
		t.Fatalf("before any Recycle a reply is allocated at its size: cap %d, len %d", cap(b), len(b))
	}
	c.Recycle(first) // not a class's capacity: left to the garbage collector
	second := read(100)
	if b := second.Bytes(); cap(b)&(cap(b)-1) != 0 {
		t.Fatalf("once recycling, a reply gets a buffer of a size class: cap %d", cap(b))
	}
	// sync.Pool may drop what it is given (at random under the race
	// detector, and at every GC), so a few rounds, each reading over the
	// bytes of the last.
	last := second
	for round := 0; ; round++ {
		c.Recycle(last)
		next := read(200)
		if &next.Bytes()[:1][0] == &last.Bytes()[:1][0] {
			break
		}
		if round == 20 {
			t.Fatal("a recycled buffer was never reused")
		}
		last = next
	}
}

// A batch above the size the connection writes with writev (header and
// payload side by side) arrives whole, with and without compression.
func TestLargeBatchRoundTrip(t *testing.T) {
	for _, comp := range []wire.Compression{wire.CompressionNone, wire.CompressionLZ4} {
		b := startBroker(t, fakebroker.Options{})
		c := dial(t, b, client.Options{Compressions: []wire.Compression{comp}})
		ctx := testCtx(t)
		createTopic(ctx, t, c, "big", 1)
		recs := make([]wire.Record, 200)
		for i := range recs {
			recs[i] = wire.Record{Payload: bytes.Repeat([]byte{byte(i)}, 1000)}
		}
		if _, err := c.PublishBatch(ctx, &wire.Batch{BatchHeader: wire.BatchHeader{Topic: "big", Acks: "1"}, Records: recs}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Consume(ctx, client.ConsumeRequest{Topic: "big", Partition: 0})
		if err != nil || len(got.Records) != len(recs) {
			t.Fatalf("%v: %v, %d records", comp, err, len(got.Records))
		}
		for i, r := range got.Records {
			if !bytes.Equal(r.Payload, recs[i].Payload) {
				t.Fatalf("%v: record %d differs", comp, i)
			}
		}
	}
}
