package metad

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// A Watch over mTLS gRPC: a snapshot, then one event per change with
// consecutive revisions; after the stream is dropped and changes happen
// meanwhile, resuming from the last revision delivers exactly the missed
// changes, in order, with no snapshot and no repeat, then live ones.
func TestWatchOverGRPCResumesExactlyOnceInOrder(t *testing.T) {
	ca := pkitest.New(t)
	m := startSingleStable(t, ca, t.TempDir()) // no lease expiry event in between
	ctx := ctxT(t, 20*time.Second)
	admin := client(t, ca, pki.RoleAdmin, m.rpc)
	registerPartitionServers(t, ctx, client(t, ca, pki.RolePartitiond, m.rpc), "p1")
	create := func(name string, parts int32) {
		t.Helper()
		if _, err := admin.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: name, Partitions: proto.Int32(parts)}); err != nil {
			t.Fatal(err)
		}
	}
	open := func(from uint64) (metav1.MetadataService_WatchClient, context.CancelFunc) {
		t.Helper()
		wctx, cancel := context.WithCancel(ctx)
		var stream metav1.MetadataService_WatchClient
		err := admin.Call(wctx, func(_ context.Context, c metav1.MetadataServiceClient) (err error) {
			stream, err = c.Watch(wctx, &metav1.WatchRequest{FromRevision: from})
			return err
		})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return stream, cancel
	}
	// next reads one event, which must be the topic change at want.
	var last uint64
	next := func(stream metav1.MetadataService_WatchClient, topic string, parts int) {
		t.Helper()
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		tp := ev.GetTopicUpserted()
		if ev.GetRevision() != last+1 || tp.GetConfig().GetName() != topic || len(tp.GetPartitions()) != parts {
			t.Fatalf("after revision %d got %v, want %s with %d partitions at %d", last, ev, topic, parts, last+1)
		}
		last = ev.GetRevision()
	}

	// Until the new cluster's INIT_CLUSTER commits, Watch asks to retry.
	var stream metav1.MetadataService_WatchClient
	var cancel context.CancelFunc
	var first *metav1.WatchResponse
	for {
		var err error
		stream, cancel = open(0)
		first, err = stream.Recv()
		if err == nil && first.GetSnapshot() != nil {
			break
		}
		cancel()
		if !errcode.IsRetryable(err) || ctx.Err() != nil {
			t.Fatalf("first event %v %v, want a snapshot", first, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	last = first.GetRevision()
	for i := range 3 {
		create(fmt.Sprintf("a%d", i), 1)
		next(stream, fmt.Sprintf("a%d", i), 1)
	}
	cancel()

	// Changes while disconnected: two new topics, a growth, a no-op
	// (emits nothing) and a rejected patch (emits nothing).
	create("b0", 1)
	create("a0", 3)
	create("a1", 1)
	if _, err := admin.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "a2", Partitions: proto.Int32(0)}); err == nil {
		t.Fatal("a partition decrease was accepted")
	}
	create("b1", 2)

	stream, cancel = open(last)
	defer cancel()
	next(stream, "b0", 1)
	next(stream, "a0", 3)
	next(stream, "b1", 2)
	create("c0", 1) // live after the backlog
	next(stream, "c0", 1)
}
