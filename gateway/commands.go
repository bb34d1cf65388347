package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/strataio/strata/gateway/internal/admin"
	"github.com/strataio/strata/gateway/internal/auth"
	"github.com/strataio/strata/gateway/internal/browse"
	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/eventsourcing"
	"github.com/strataio/strata/gateway/internal/groups"
	"github.com/strataio/strata/gateway/internal/records"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/gateway/internal/txn"
	"github.com/strataio/strata/libs/wire"
)

// newCommandTable wires every command family to the router: the one table
// the connections dispatch through (gateway/internal/command). AUTH and the
// guard every client command passes (gateway/internal/auth) are wired here
// too.
func newCommandTable(r route.Router, cfg Config, m *metrics, log *slog.Logger, guard *auth.Guard) *command.Table {
	t := command.NewTable(
		admin.New(r),
		records.New(r, records.Config{RequestTimeout: cfg.RequestTimeout, StreamInterval: cfg.StreamInterval, StreamKeepalive: cfg.StreamKeepalive},
			records.Metrics{Acks: m.acks, ReplicationRetries: m.replRetries, PublishRecords: m.publishRecords, PublishBytes: m.publishBytes,
				ConsumeRecords: m.consumeRecords, ConsumeBytes: m.consumeBytes}, log),
		groups.New(r),
		eventsourcing.New(r),
		browse.New(r),
		txn.New(r),
	)
	t.Handle(wire.CmdAuth, func(ctx context.Context, c *command.Call) ([]byte, error) {
		return guard.Auth(ctx, c.Session, c.Req, c.Out)
	})
	t.SetGuard(func(ctx context.Context, c *command.Call, next command.Handler) ([]byte, error) {
		reply, err := guard.Check(ctx, c.Session, c.Command, c.Req, c.Batch, func(ctx context.Context) ([]byte, error) {
			return next(ctx, c)
		})
		if err != nil && c.Command == wire.CmdPublish && !errors.Is(err, command.ErrNoReply) && records.AcksZero(c.Req, c.Batch) {
			// A denied acks=0 publish is not answered either (its handler's
			// own failures already are not): the denial is in the audit log.
			return nil, command.ErrNoReply
		}
		return reply, err
	})
	return t
}
