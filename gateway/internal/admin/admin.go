// Package admin holds the gateway's topic and cluster commands: CREATE,
// ALTER_TOPIC_CONFIG, DELETE, TRUNCATE (metad), LIST, METADATA (the
// metadata cache), DESCRIBE and LIST_OFFSETS (cache plus the partition
// leaders), LIST_CLUSTER, CLUSTER_STATUS and ELECT_LEADER (metad).
package admin

import (
	"context"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/wire"
)

// internalOffsetsTopic is the broker-owned group/offset topic (spec 2.1).
const internalOffsetsTopic = "__consumer_offsets"

// topicChangeWait bounds how long a topic change waits for the cache (and a
// truncate for the partition leaders) before answering anyway.
const topicChangeWait = 3 * time.Second

// Handlers are the admin commands over a Router.
type Handlers struct {
	r route.Router
}

// New returns the admin commands routed through r.
func New(r route.Router) *Handlers { return &Handlers{r: r} }

// Register implements command.Family.
func (a *Handlers) Register(t *command.Table) {
	t.Handle(wire.CmdCreate, a.create)
	t.Handle(wire.CmdAlterTopicConfig, a.alterTopicConfig)
	t.Handle(wire.CmdDelete, a.delete)
	t.Handle(wire.CmdTruncate, a.truncate)
	t.Handle(wire.CmdList, a.list)
	t.Handle(wire.CmdMetadata, a.metadata)
	t.Handle(wire.CmdDescribe, a.describe)
	t.Handle(wire.CmdListOffsets, a.listOffsets)
	t.Handle(wire.CmdListCluster, a.listCluster)
	t.Handle(wire.CmdClusterStatus, a.clusterStatus)
	t.Handle(wire.CmdElectLeader, a.electLeader)
}

// toMetad calls method with req on the metad leader unless reading the
// command's parameters failed (paramErr): nothing travels before the
// parameters are checked.
func toMetad[Req, Resp any](ctx context.Context, r route.Router, paramErr error, method route.MetadMethod[Req, Resp], req Req) (Resp, error) {
	if paramErr != nil {
		var zero Resp
		return zero, paramErr
	}
	return route.ToMetad(ctx, r, method, req)
}

// waitTopic waits briefly until the cache reflects a change metad
// acknowledged, so the client's next command through this gateway sees it.
func (a *Handlers) waitTopic(ctx context.Context, cond func(*metaclient.View) bool) {
	wctx, cancel := context.WithTimeout(ctx, topicChangeWait)
	defer cancel()
	a.r.Cache().WaitFor(wctx, cond)
}

// revisionAtLeast is a waitTopic condition: the cache holds topic name at
// revision rev or later.
func revisionAtLeast(name string, rev uint64) func(*metaclient.View) bool {
	return func(v *metaclient.View) bool {
		t, ok := v.Topic(name)
		return ok && t.GetConfig().GetRevision() >= rev
	}
}
