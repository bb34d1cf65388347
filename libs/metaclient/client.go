package metaclient

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Dialer returns a connection to a metad RPC address (rpc.Pool.Get fits).
type Dialer func(addr string) (rpc.Conn, error)

// Options configures a Client.
type Options struct {
	// Addrs are metad RPC addresses to start from; the leader is learned.
	Addrs  []string
	Dial   Dialer
	Logger *slog.Logger
	// CallTimeout bounds one attempt when the caller's context has no
	// earlier deadline (default 5s).
	CallTimeout time.Duration
}

// Client calls metad, following the leader.
type Client struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	leader string // last known leader address ("" unknown)
	next   int    // round-robin index into Addrs

	cache *Cache
}

// New returns a client; no connection is made until the first call.
func New(o Options) *Client {
	if o.CallTimeout == 0 {
		o.CallTimeout = 5 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{opts: o, log: log}
	c.cache = newCache()
	return c
}

// Cache returns the client's watch-fed cache (empty until Watch runs).
func (c *Client) Cache() *Cache { return c.cache }

func (c *Client) target() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != "" {
		return c.leader
	}
	if len(c.opts.Addrs) == 0 {
		return ""
	}
	a := c.opts.Addrs[c.next%len(c.opts.Addrs)]
	return a
}

// moveOn forgets a failed target and advances to the next seed address.
func (c *Client) moveOn(failed string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == failed {
		c.leader = ""
	}
	c.next++
}

func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	c.leader = addr
	c.mu.Unlock()
}

// Call runs fn against the metad leader, retrying on NOT_LEADER redirects
// and retryable availability errors with capped exponential backoff until
// ctx ends. Non-retryable errors return at once.
func (c *Client) Call(ctx context.Context, fn func(context.Context, metav1.MetadataServiceClient) error) error {
	backoff := pace.Backoff{Initial: 20 * time.Millisecond, Max: time.Second, Jitter: 0.5}
	var last error
	for attempt := 0; ; attempt++ {
		addr := c.target()
		if addr == "" {
			return errcode.ClusterMetadataUnavailable.New("no metad address configured")
		}
		err := c.attempt(ctx, addr, fn)
		if err == nil {
			return nil
		}
		last = err
		e := errcode.From(err)
		switch {
		case e.Code == errcode.NotLeader.Name():
			if l := e.Field("leader"); l != "" && l != addr {
				c.setLeader(l)
				continue // follow the redirect at once
			}
			c.moveOn(addr)
		case e.Retryable:
			c.moveOn(addr)
		default:
			return err
		}
		if ctx.Err() != nil {
			return errcode.ClusterMetadataUnavailable.New("metad unreachable: " + last.Error())
		}
		if !backoff.Wait(ctx) {
			return errcode.ClusterMetadataUnavailable.New("metad unreachable: " + last.Error())
		}
	}
}

func (c *Client) attempt(ctx context.Context, addr string, fn func(context.Context, metav1.MetadataServiceClient) error) error {
	conn, err := c.opts.Dial(addr)
	if err != nil {
		return errcode.ClusterMetadataUnavailable.New(err.Error())
	}
	actx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	return fn(actx, metav1.NewMetadataServiceClient(conn))
}

// Method is a MetadataServiceClient method expression, such as
// metav1.MetadataServiceClient.CreateTopic.
type Method[Req, Resp any] = func(metav1.MetadataServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// Invoke runs one metad RPC through c.Call (leader-following, retried) and
// returns its answer: the one place that turns a method expression into a
// Call closure.
func Invoke[Req, Resp any](ctx context.Context, c *Client, method Method[Req, Resp], req Req) (resp Resp, err error) {
	err = c.Call(ctx, func(ctx context.Context, m metav1.MetadataServiceClient) (err error) {
		resp, err = method(m, ctx, req)
		return err
	})
	return resp, err
}

// CreateTopic creates or patches a topic.
func (c *Client) CreateTopic(ctx context.Context, req *metav1.CreateTopicRequest) (*metav1.CreateTopicResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.CreateTopic, req)
}

// AlterTopicConfig replaces a topic's min ISR override.
func (c *Client) AlterTopicConfig(ctx context.Context, req *metav1.AlterTopicConfigRequest) (*metav1.AlterTopicConfigResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.AlterTopicConfig, req)
}

// DeleteTopic deletes a topic.
func (c *Client) DeleteTopic(ctx context.Context, req *metav1.DeleteTopicRequest) (*metav1.DeleteTopicResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.DeleteTopic, req)
}

// TruncateTopic truncates a topic.
func (c *Client) TruncateTopic(ctx context.Context, req *metav1.TruncateTopicRequest) (*metav1.TruncateTopicResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.TruncateTopic, req)
}

// GetTopic reads one topic from the leader (linearizable).
func (c *Client) GetTopic(ctx context.Context, name string) (*metav1.GetTopicResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.GetTopic, &metav1.GetTopicRequest{Name: name})
}

// ElectLeader asks the controller to move partition leadership.
func (c *Client) ElectLeader(ctx context.Context, req *metav1.ElectLeaderRequest) (*metav1.ElectLeaderResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.ElectLeader, req)
}

// ClusterStatus reads the cluster status from the leader.
func (c *Client) ClusterStatus(ctx context.Context) (*metav1.ClusterStatusResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.ClusterStatus, &metav1.ClusterStatusRequest{})
}

// AlterIsr changes a partition's ISR (compare-and-set on the leader epoch).
func (c *Client) AlterIsr(ctx context.Context, req *metav1.AlterIsrRequest) (*metav1.AlterIsrResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.AlterIsr, req)
}

// ShutdownNode is the node's controlled shutdown (see the RPC): metad moves
// its partition leaderships before the process stops.
func (c *Client) ShutdownNode(ctx context.Context, req *metav1.ShutdownNodeRequest) (*metav1.ShutdownNodeResponse, error) {
	return Invoke(ctx, c, metav1.MetadataServiceClient.ShutdownNode, req)
}

// CheckpointHwm records a partition's committed high watermark.
func (c *Client) CheckpointHwm(ctx context.Context, req *metav1.CheckpointHwmRequest) error {
	_, err := Invoke(ctx, c, metav1.MetadataServiceClient.CheckpointHwm, req)
	return err
}

// ReportCleanup reports finished node-local cleanup of a topic.
func (c *Client) ReportCleanup(ctx context.Context, req *metav1.ReportCleanupRequest) error {
	_, err := Invoke(ctx, c, metav1.MetadataServiceClient.ReportCleanup, req)
	return err
}
