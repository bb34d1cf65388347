// Package route is how a gateway command reaches the role that serves it
// over mTLS gRPC: metad for topics and cluster state, the partition leader
// on partitiond for records, the coordinatord owning a group for groups and
// committed offsets. Internal redirects (NOT_LEADER, NOT_COORDINATOR, a
// moved leader) are followed here with bounded retries, so clients see them
// only where the spec requires.
//
// Router is what a command family needs from the gateway; Cluster is the
// gateway's implementation. The generic helpers (ToMetad, ToGroupCoordinator,
// ToLeader, CallLeader) take a gRPC method expression, so a handler forwards
// a request in one line:
//
//	resp, err := route.ToGroupCoordinator(ctx, r, group, coordinatorv1.CoordinatorServiceClient.JoinGroup, req)
package route

import (
	"context"
	"strconv"

	"google.golang.org/grpc"

	"github.com/strataio/strata/gateway/internal/produce"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Router is what a command family needs from the gateway: the metadata
// cache and topic lookups, metad calls, partition leaders and their clients,
// the coordinatord owning a group, and the retry rule for internal
// redirects. Metrics and configuration reach a family when it is built.
type Router interface {
	// Cache is the Watch-fed metadata cache (View, Changed, WaitFor).
	Cache() *metaclient.Cache
	// LookupTopic returns a visible topic: from the cache, or, when the
	// cache does not know it yet (created through another gateway a moment
	// ago), from metad's leader (linearizable); else topic_not_found.
	LookupTopic(ctx context.Context, name string) (*metav1.Topic, error)
	// Advertised is this gateway's client address. Every address handed to
	// clients is this one: any gateway routes to the real owner.
	Advertised() string
	// Retry runs fn until it succeeds, fails with an error that is not
	// Reroutable, or the configured route retries or retry wait are spent
	// (a typed, retryable answer after about a second). Between
	// attempts it waits for the next metadata change (bounded by a short
	// backoff), so a leader move is picked up as soon as metad announces it.
	Retry(ctx context.Context, fn func() error) error
	// Metad runs fn against metad's leader, following its redirects.
	Metad(ctx context.Context, fn func(context.Context, metav1.MetadataServiceClient) error) error
	// PartitionLeader returns the topic and the leader node id of one
	// partition (partition_not_found, leader_not_found).
	PartitionLeader(ctx context.Context, topic string, part int32) (*metav1.Topic, string, error)
	// Partition returns a client of the partitiond node nodeID.
	Partition(nodeID string) (partitionv1.PartitionServiceClient, error)
	// Conn returns the connection to the role node nodeID, for the services
	// that have no method of their own here (partitiond's StreamService).
	Conn(nodeID string) (grpc.ClientConnInterface, error)
	// ProduceStream returns the shared produce stream to the partitiond
	// node nodeID.
	ProduceStream(nodeID string) (*produce.Mux, error)
	// GroupCoordinator returns the id of the coordinatord owning group.
	GroupCoordinator(group string) (string, error)
	// TxnCoordinator returns the id of the coordinatord owning the
	// transaction shard of a transactional id.
	TxnCoordinator(txnID string) (string, error)
	// Coordinator runs fn against the coordinatord owning group, following
	// NOT_COORDINATOR answers and ring changes (Retry).
	Coordinator(ctx context.Context, group string, fn func(coordinatorv1.CoordinatorServiceClient) error) error
	// TxnCoordinatorCall runs fn against the coordinatord owning the
	// transaction shard of txnID, following NOT_COORDINATOR (Retry).
	TxnCoordinatorCall(ctx context.Context, txnID string, fn func(coordinatorv1.CoordinatorServiceClient) error) error
	// EachCoordinator runs fn against every live coordinatord in turn,
	// stopping at the first error; coordinator_not_available when none is
	// live.
	EachCoordinator(fn func(coordinatorv1.CoordinatorServiceClient) error) error
}

// MetadMethod is a MetadataServiceClient method expression, such as
// metav1.MetadataServiceClient.CreateTopic.
type MetadMethod[Req, Resp any] = func(metav1.MetadataServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// CoordinatorMethod is a CoordinatorServiceClient method expression, such
// as coordinatorv1.CoordinatorServiceClient.JoinGroup.
type CoordinatorMethod[Req, Resp any] = func(coordinatorv1.CoordinatorServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// PartitionMethod is a PartitionServiceClient method expression, such as
// partitionv1.PartitionServiceClient.Fetch.
type PartitionMethod[Req, Resp any] = func(partitionv1.PartitionServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// ToMetad calls method with req on metad's leader.
func ToMetad[Req, Resp any](ctx context.Context, r Router, method MetadMethod[Req, Resp], req Req) (Resp, error) {
	var resp Resp
	err := r.Metad(ctx, func(ctx context.Context, m metav1.MetadataServiceClient) (err error) {
		resp, err = method(m, ctx, req)
		return err
	})
	return resp, err
}

// ToGroupCoordinator calls method with req on the coordinatord owning
// group, following NOT_COORDINATOR.
func ToGroupCoordinator[Req, Resp any](ctx context.Context, r Router, group string, method CoordinatorMethod[Req, Resp], req Req) (Resp, error) {
	var resp Resp
	err := r.Coordinator(ctx, group, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = method(c, ctx, req)
		return err
	})
	return resp, err
}

// ToTxnCoordinator calls method with req on the coordinatord owning the
// transaction shard of txnID, following NOT_COORDINATOR.
func ToTxnCoordinator[Req, Resp any](ctx context.Context, r Router, txnID string, method CoordinatorMethod[Req, Resp], req Req) (Resp, error) {
	var resp Resp
	err := r.TxnCoordinatorCall(ctx, txnID, func(c coordinatorv1.CoordinatorServiceClient) (err error) {
		resp, err = method(c, ctx, req)
		return err
	})
	return resp, err
}

// CallLeader calls method once on the leader of partition part of topic.
// build makes the request from the topic as the cache knows it (for its
// lifecycle epoch).
func CallLeader[Req, Resp any](ctx context.Context, r Router, topic string, part int32, method PartitionMethod[Req, Resp], build func(*metav1.Topic) Req) (Resp, error) {
	var resp Resp
	t, leader, err := r.PartitionLeader(ctx, topic, part)
	if err != nil {
		return resp, err
	}
	pc, err := r.Partition(leader)
	if err != nil {
		return resp, err
	}
	resp, err = method(pc, ctx, build(t))
	return resp, LeaderErr(r, topic, err)
}

// LeaderErr turns a partition leader's topic_not_found for a topic this
// gateway's view lists into leader_not_found (reroutable): the partition
// server's view lags (it already waited view_catch_up for it, e.g. while its
// metad watch reconnects after a metad restart), and the topic is not
// gone. A topic the gateway does not list either stays topic_not_found.
func LeaderErr(r Router, topic string, err error) error {
	if errcode.CodeOf(err) != errcode.TopicNotFound.Name() {
		return err
	}
	if t, ok := r.Cache().View().Topic(topic); ok && Visible(t) {
		return errcode.LeaderNotFound.New("the partition leader does not know the topic yet", "topic", topic)
	}
	return err
}

// ToLeader is CallLeader following leader moves (Retry); build runs again
// for every attempt. It is for requests that are safe to repeat (reads): a
// leader that cannot be reached (a dead process whose lease has not run out
// yet, so no election has happened) is waited out like a moving one, and
// answered leader_not_found when the wait ends.
func ToLeader[Req, Resp any](ctx context.Context, r Router, topic string, part int32, method PartitionMethod[Req, Resp], build func(*metav1.Topic) Req) (Resp, error) {
	var resp Resp
	err := r.Retry(ctx, func() (err error) {
		resp, err = CallLeader(ctx, r, topic, part, method, build)
		if e, ok := errcode.As(err); ok && e.Code == errcode.RouterNotAvailable.Name() {
			return errcode.LeaderNotFound.New("the partition leader cannot be reached", "topic", topic,
				"partition", strconv.Itoa(int(part)), "reason", e.Message)
		}
		return err
	})
	return resp, err
}
