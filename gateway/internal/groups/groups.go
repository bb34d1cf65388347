// Package groups holds the gateway's consumer group commands: each is
// forwarded to the coordinatord owning the group (route.ToGroupCoordinator,
// following NOT_COORDINATOR), except FIND_COORDINATOR, answered from the
// coordinatord ring, and LIST_GROUPS, merged from every live coordinatord.
package groups

import (
	"context"
	"net"
	"slices"
	"strings"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// Handlers are the group commands over a Router.
type Handlers struct {
	r route.Router
}

// New returns the group commands routed through r.
func New(r route.Router) *Handlers { return &Handlers{r: r} }

// Register implements command.Family.
func (g *Handlers) Register(t *command.Table) {
	t.Handle(wire.CmdFindCoordinator, g.findCoordinator)
	t.Handle(wire.CmdRegisterGroup, g.registerGroup)
	t.Handle(wire.CmdListGroups, g.listGroups)
	t.Handle(wire.CmdJoinGroup, g.joinGroup)
	t.Handle(wire.CmdSyncGroup, g.syncGroup)
	t.Handle(wire.CmdHeartbeat, g.heartbeat)
	t.Handle(wire.CmdLeaveGroup, g.leaveGroup)
	t.Handle(wire.CmdGroupStatus, g.groupStatus)
	t.Handle(wire.CmdCommitOffset, g.commitOffset)
	t.Handle(wire.CmdBatchCommit, g.batchCommit)
	t.Handle(wire.CmdFetchOffset, g.fetchOffset)
	t.Handle(wire.CmdDeleteGroup, g.deleteGroup)
	t.Handle(wire.CmdResetOffsets, g.resetOffsets)
}

// forward calls method with req on the coordinatord owning group, following
// NOT_COORDINATOR, unless reading the command's parameters failed
// (paramErr): nothing travels before the parameters are checked.
func forward[Req, Resp any](ctx context.Context, r route.Router, paramErr error, group string,
	method route.CoordinatorMethod[Req, Resp], req Req) (Resp, error) {
	if paramErr != nil {
		var zero Resp
		return zero, paramErr
	}
	return route.ToGroupCoordinator(ctx, r, group, method, req)
}

// findCoordinator is FIND_COORDINATOR for a group or a transactional id.
func (g *Handlers) findCoordinator(_ context.Context, c *command.Call) ([]byte, error) {
	var owner string
	var err error
	if group := c.Req.Value("group"); group != "" {
		owner, err = g.r.GroupCoordinator(group)
	} else if txn := c.Req.Value("transactional_id"); txn != "" {
		owner, err = g.r.TxnCoordinator(txn)
	} else {
		err = errcode.MissingGroup.New("group or transactional_id is required", "param", "group")
	}
	if err != nil {
		return nil, err
	}
	// The client talks to coordinators through gateways: host and port are
	// this gateway's client address, which routes to the owner.
	host, port, err := net.SplitHostPort(g.r.Advertised())
	if err != nil {
		return nil, errcode.Internal.New("advertised client address: " + err.Error())
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "coordinator_id", owner)
	out = wire.AppendOKField(out, "host", host)
	return wire.AppendOKField(out, "port", port), nil
}

// registerGroup is REGISTER_GROUP: a group over exactly one of a topic, a
// topic list or a pattern.
func (g *Handlers) registerGroup(ctx context.Context, c *command.Call) ([]byte, error) {
	group, err := requiredGroup(c)
	if err != nil {
		return nil, err
	}
	r := c.Req
	req := &coordinatorv1.RegisterGroupRequest{Group: group, Topic: r.Value("topic"), Pattern: r.Value("pattern")}
	if v := r.Value("topics"); v != "" {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				req.Topics = append(req.Topics, t)
			}
		}
	}
	n := 0
	for _, set := range []bool{req.Topic != "", len(req.Topics) > 0, req.Pattern != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errcode.InvalidGroupSelector.New("exactly one of topic, topics or pattern is required", "group", group)
	}
	resp, err := route.ToGroupCoordinator(ctx, g.r, group, coordinatorv1.CoordinatorServiceClient.RegisterGroup, req)
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "group", group)
	out = wire.AppendOKInt(out, "partitions", int64(len(resp.GetPartitions())))
	return wire.AppendOKBool(out, "created", resp.GetCreated()), nil
}

// listGroups is LIST_GROUPS: every live coordinatord owns part of the
// groups, so each is asked and the answer is `OK count=<n> groups=<csv>`
// sorted by name.
func (g *Handlers) listGroups(ctx context.Context, c *command.Call) ([]byte, error) {
	seen := map[string]bool{}
	var names []string
	err := g.r.EachCoordinator(func(cc coordinatorv1.CoordinatorServiceClient) error {
		resp, err := cc.ListGroups(ctx, &coordinatorv1.ListGroupsRequest{})
		if err != nil {
			return err
		}
		for _, s := range resp.GetGroups() {
			if !seen[s.GetGroup()] {
				seen[s.GetGroup()] = true
				names = append(names, s.GetGroup())
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := wire.AppendOKInt(wire.AppendOK(c.Out), "count", int64(len(names)))
	return wire.AppendOKField(out, "groups", strings.Join(names, ",")), nil
}
