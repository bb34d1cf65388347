package route

import (
	"context"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pace"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// unstableReserve is the part of a request's deadline kept for answering:
// the wait for an unstable committed offset ends this long before the
// deadline, so the client gets unstable_offset_commit, not a timeout.
const unstableReserve = 250 * time.Millisecond

// FetchCommitted is the group coordinator's FetchOffset (FETCH_OFFSET and
// the start offset of a group's CONSUME or STREAM), waiting out
// unstable_offset_commit: a transaction that staged offsets of the
// partition is about to commit or abort them, normally within one
// coordinator round trip, so the gateway asks again (backing off) until the
// request's deadline draws near, and only then answers the client with the
// retryable code (docs/transactions.md, "Pending transactional offsets").
func FetchCommitted(ctx context.Context, r Router, req *coordinatorv1.FetchOffsetRequest) (*coordinatorv1.FetchOffsetResponse, error) {
	backoff := pace.Backoff{Initial: 10 * time.Millisecond, Max: 250 * time.Millisecond}
	for {
		resp, err := ToGroupCoordinator(ctx, r, req.GetGroup(), coordinatorv1.CoordinatorServiceClient.FetchOffset, req)
		if errcode.CodeOf(err) != errcode.UnstableOffsetCommit.Name() {
			return resp, err
		}
		wait := backoff.Next()
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < wait+unstableReserve || !pace.Sleep(ctx, wait) {
			return nil, err
		}
	}
}
