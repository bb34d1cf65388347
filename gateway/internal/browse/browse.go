// Package browse holds BROWSE_MESSAGES: a read of one partition from an
// offset for operators and admin tools, outside any consumer group. It never
// reads or moves a committed offset (coordinatord is not involved), and it
// answers in two frames: a JSON envelope saying where the partition stands
// and where to continue, then the CBV2 batch (WIRE-V2 9.1, 9.3; G-browse).
package browse

import (
	"context"
	"strconv"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// The limits of one browse (WIRE-V2 3).
const (
	DefaultMaxRecords = 100
	MaxRecords        = 1000
	DefaultMaxBytes   = 1 << 20
	MaxBytes          = 4 << 20
)

// Handlers is BROWSE_MESSAGES over a Router.
type Handlers struct{ r route.Router }

// New returns BROWSE_MESSAGES routed through r.
func New(r route.Router) *Handlers { return &Handlers{r: r} }

// Register implements command.Family.
func (h *Handlers) Register(t *command.Table) { t.Handle(wire.CmdBrowseMessages, h.browse) }

// envelope is the first frame, in the reference's field order.
type envelope struct {
	Status            string `json:"status"`
	Topic             string `json:"topic"`
	Partition         int32  `json:"partition"`
	NextOffset        uint64 `json:"next_offset"`
	EarliestOffset    uint64 `json:"earliest_offset"`
	ReadableEndOffset uint64 `json:"readable_end_offset"`
	HasMore           bool   `json:"has_more"`
}

// browse is BROWSE_MESSAGES topic= partition= [offset=] [max_records=]
// [max_bytes=]: committed records (below the high watermark) from offset,
// the earliest retained one when absent or already removed by retention.
// Early failures are one JSON ERROR frame.
func (h *Handlers) browse(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	topic := p.Required(param.Topic)
	part, _ := p.OptPartition()
	offset, hasOffset := p.OptUint("offset", 0)
	maxRecords := p.OptInt("max_records", DefaultMaxRecords, 1, MaxRecords)
	maxBytes := p.OptInt("max_bytes", DefaultMaxBytes, 1, MaxBytes)
	if err := p.Err(); err != nil {
		return command.JSONError(c.Out, err)
	}
	if _, err := h.r.LookupTopic(ctx, topic); err != nil {
		return command.JSONError(c.Out, err)
	}
	fetch := func(off uint64) (*partitionv1.FetchResponse, error) {
		return route.ToLeader(ctx, h.r, topic, part, partitionv1.PartitionServiceClient.Fetch, func(t *metav1.Topic) *partitionv1.FetchRequest {
			return &partitionv1.FetchRequest{Topic: topic, Partition: part, Offset: off, MaxRecords: uint32(maxRecords),
				MaxBytes: uint32(maxBytes), LifecycleEpoch: t.GetConfig().GetLifecycleEpoch()}
		})
	}
	resp, err := fetch(offset)
	if e, ok := errcode.As(err); ok && e.Code == errcode.OffsetOutOfRange.Name() {
		earliest, perr := strconv.ParseUint(e.Field("earliest"), 10, 64)
		if perr == nil && (!hasOffset || offset < earliest) {
			resp, err = fetch(earliest)
		}
	}
	if err != nil {
		return command.JSONError(c.Out, err)
	}
	env := envelope{Status: "OK", Topic: topic, Partition: part, NextOffset: resp.GetNextOffset(),
		EarliestOffset: resp.GetLogStartOffset(), ReadableEndOffset: resp.GetHighWatermark(),
		HasMore: resp.GetNextOffset() < resp.GetHighWatermark()}
	return command.TwoFrames(c, env, topic, part, resp.GetRecords())
}
