package eventsourcing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"
)

const (
	// historyPage and historyMaxPage are READ_STREAM_HISTORY's limit
	// default and cap (the READ_STREAM page figures of WIRE-V2 3).
	historyPage    = 256
	historyMaxPage = 1024
)

// appendStream is APPEND_STREAM: topic, key, version (current + 1),
// message; event_type, schema_version (>= 1, default 1), metadata (JSON).
// On aggregate replay topics also event_id (required), producerId, seqNum
// and epoch; the payload's SHA-256 digest is stored with the event.
func (h *Handlers) appendStream(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	topic, key := p.Required(param.Topic), p.Required(keyParam)
	s, rec, err := h.eventRecord(ctx, c, &p, topic, key)
	if err != nil {
		return nil, err
	}
	b, err := rec.AppendTo(nil)
	if err != nil {
		return nil, err
	}
	resp, err := toLeader(ctx, h.r, s, streamv1.StreamServiceClient.AppendStream, func(t *metav1.Topic) *streamv1.AppendStreamRequest {
		return &streamv1.AppendStreamRequest{Stream: s.ref(t), Version: rec.AggregateVersion, Record: b, AggregateReplay: s.replay()}
	})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOK(c.Out)
	out = wire.AppendOKUint(out, "version", resp.GetVersion())
	out = wire.AppendOKUint(out, "offset", resp.GetOffset())
	out = wire.AppendOKInt(out, "partition", int64(s.part))
	if resp.GetDuplicate() {
		out = wire.AppendOKBool(out, "duplicate", true)
	}
	return out, nil
}

// event is an event's parameters (APPEND_STREAM's and TXN_APPEND_STREAM's).
type event struct {
	version uint64
	schema  uint64
	meta    string
	msg     string
}

// readEvent reads version, message, schema_version and metadata; a
// version of 0 is refused once the other parameters are present.
func readEvent(c *command.Call, p *param.Reader) event {
	ev := event{version: p.RequiredUint(versionParam), msg: p.Present(param.Message), schema: 1}
	if v, ok := c.Req.Get("schema_version"); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 {
			p.Check(errcode.InvalidSchemaVersion.New("schema_version must be an integer of at least 1", "schema_version", param.Clip(v)))
		}
		ev.schema = n
	}
	ev.meta = c.Req.Value("metadata")
	if ev.meta != "" && !json.Valid([]byte(ev.meta)) {
		p.Check(param.Invalid("metadata", ev.meta, "must be JSON"))
	}
	if p.Err() == nil && ev.version == 0 {
		p.Check(param.Invalid("version", "0", "must be at least 1 (the stream's current version + 1)"))
	}
	return ev
}

// eventRecord reads the event (after the parameters p read already),
// resolves the stream of topic and key and builds the event record:
// APPEND_STREAM's and TXN_APPEND_STREAM's common part.
func (h *Handlers) eventRecord(ctx context.Context, c *command.Call, p *param.Reader, topic, key string) (*stream, wire.Record, error) {
	ev := readEvent(c, p)
	if err := p.Err(); err != nil {
		return nil, wire.Record{}, err
	}
	s, err := h.resolve(ctx, topic, key)
	if err != nil {
		return nil, wire.Record{}, err
	}
	rec, err := ev.record(c, s)
	return s, rec, err
}

// record builds the event record for stream s. On aggregate replay topics
// it also carries event_id (required), the producer fields (producerId,
// seqNum, epoch) and the payload's SHA-256 digest.
func (ev event) record(c *command.Call, s *stream) (wire.Record, error) {
	rec := wire.Record{Topic: s.name, Timestamp: time.Now().UnixMilli(), Key: s.key, EventType: c.Req.Value("event_type"),
		SchemaVersion: uint32(ev.schema), AggregateVersion: ev.version, Metadata: ev.meta, Payload: []byte(ev.msg)}
	if s.replay() {
		p := param.Read(c.Req, c.Command)
		rec.EventID = p.Required(param.Name{Key: "event_id", Missing: errcode.MissingParameter})
		rec.ProducerID = c.Req.Value("producerId")
		seq, _ := p.OptUint("seqNum", 0)
		epoch := p.OptInt("epoch", 0, -1<<31, 1<<31-1)
		if err := p.Err(); err != nil {
			return rec, err
		}
		rec.SeqNum, rec.Epoch = seq, epoch
		sum := sha256.Sum256(rec.Payload)
		rec.PayloadDigest = hex.EncodeToString(sum[:])
	}
	return rec, nil
}

// streamVersion is STREAM_VERSION: `OK version=<n>`, 0 for an unknown
// aggregate.
func (h *Handlers) streamVersion(ctx context.Context, c *command.Call) ([]byte, error) {
	s, err := h.lookup(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	resp, err := toLeader(ctx, h.r, s, streamv1.StreamServiceClient.StreamVersion, func(t *metav1.Topic) *streamv1.StreamVersionRequest {
		return &streamv1.StreamVersionRequest{Stream: s.ref(t)}
	})
	if err != nil {
		return nil, err
	}
	return wire.AppendOKUint(wire.AppendOK(c.Out), "version", resp.GetVersion()), nil
}

// saveSnapshot is SAVE_SNAPSHOT: `OK version= partition=` once the leader
// and every in-sync replica stored it.
func (h *Handlers) saveSnapshot(ctx context.Context, c *command.Call) ([]byte, error) {
	var ver uint64
	var msg string
	s, err := h.lookup(ctx, c, func(p *param.Reader) {
		ver, msg = p.RequiredUint(versionParam), p.Present(param.Message)
		if p.Err() == nil && ver == 0 {
			p.Check(param.Invalid("version", "0", "must be at least 1"))
		}
	})
	if err != nil {
		return nil, err
	}
	resp, err := toLeader(ctx, h.r, s, streamv1.StreamServiceClient.SaveSnapshot, func(t *metav1.Topic) *streamv1.SaveSnapshotRequest {
		return &streamv1.SaveSnapshotRequest{Stream: s.ref(t), Version: ver, Payload: []byte(msg)}
	})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKUint(wire.AppendOK(c.Out), "version", resp.GetVersion())
	return wire.AppendOKInt(out, "partition", int64(s.part)), nil
}

// snapshotJSON is a snapshot as READ_SNAPSHOT and READ_STREAM show it.
type snapshotJSON struct {
	Version uint64 `json:"version"`
	Payload string `json:"payload"`
}

// readSnapshot is READ_SNAPSHOT: `OK snapshot=<json>` or `OK snapshot=null`.
func (h *Handlers) readSnapshot(ctx context.Context, c *command.Call) ([]byte, error) {
	s, err := h.lookup(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	resp, err := toLeader(ctx, h.r, s, streamv1.StreamServiceClient.ReadSnapshot, func(t *metav1.Topic) *streamv1.ReadSnapshotRequest {
		return &streamv1.ReadSnapshotRequest{Stream: s.ref(t)}
	})
	if err != nil {
		return nil, err
	}
	out := append(wire.AppendOK(c.Out), " snapshot="...)
	sn := resp.GetSnapshot()
	if sn == nil {
		return append(out, "null"...), nil
	}
	b, err := json.Marshal(snapshotJSON{Version: sn.GetVersion(), Payload: string(sn.GetPayload())})
	if err != nil {
		return nil, err
	}
	return append(out, b...), nil
}

// readStreamEnvelope is READ_STREAM's first frame (WIRE-V2 9.3, Go marshal
// order); the paged fields appear for paged reads (limit given, or more
// events than one answer holds).
type readStreamEnvelope struct {
	Status         string        `json:"status"`
	Topic          string        `json:"topic"`
	Key            string        `json:"key"`
	Partition      int32         `json:"partition"`
	Count          uint32        `json:"count"`
	Snapshot       *snapshotJSON `json:"snapshot,omitempty"`
	StreamVersion  *uint64       `json:"stream_version,omitempty"`
	HasMore        *bool         `json:"has_more,omitempty"`
	NextVersion    *uint64       `json:"next_version,omitempty"`
	LifecycleEpoch *uint64       `json:"lifecycle_epoch,omitempty"`
}

// fromVersion reads from_version: default 1, a positive integer, else
// invalid_from_version.
func fromVersion(c *command.Call, p *param.Reader) uint64 {
	v, ok := c.Req.Get("from_version")
	if !ok {
		return 1
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		p.Check(errcode.InvalidFromVersion.New("from_version must be a positive integer", "from_version", param.Clip(v)))
	}
	return n
}

// readStream is READ_STREAM: a JSON envelope (with the snapshot when one
// at or after from_version exists; the events then start after it), then
// the batch of events. Early failures are one JSON ERROR frame.
func (h *Handlers) readStream(ctx context.Context, c *command.Call) ([]byte, error) {
	var limit int64
	var paged bool
	var from uint64
	s, err := h.lookup(ctx, c, func(p *param.Reader) {
		limit, paged = p.OptIntIfSet("limit", 1, historyMaxPage)
		from = fromVersion(c, p)
	})
	if err != nil {
		return command.JSONError(c.Out, err)
	}
	resp, err := toLeader(ctx, h.r, s, streamv1.StreamServiceClient.ReadStream, func(t *metav1.Topic) *streamv1.ReadStreamRequest {
		return &streamv1.ReadStreamRequest{Stream: s.ref(t), FromVersion: from, UseSnapshot: true, MaxRecords: uint32(limit)}
	})
	if err != nil {
		return command.JSONError(c.Out, err)
	}
	env := readStreamEnvelope{Status: "OK", Topic: s.name, Key: s.key, Partition: s.part, Count: resp.GetCount()}
	if sn := resp.GetSnapshot(); sn != nil {
		env.Snapshot = &snapshotJSON{Version: sn.GetVersion(), Payload: string(sn.GetPayload())}
	}
	if paged || resp.GetHasMore() {
		head, more, next, epoch := resp.GetHeadVersion(), resp.GetHasMore(), resp.GetNextVersion(), resp.GetLifecycleEpoch()
		env.StreamVersion, env.HasMore, env.NextVersion, env.LifecycleEpoch = &head, &more, &next, &epoch
	}
	return command.TwoFrames(c, env, s.name, s.part, resp.GetRecords())
}

// historyEnvelope is READ_STREAM_HISTORY's first frame (WIRE-V2 9.3: the
// fields the Go SDK reads, after READ_STREAM's identification).
type historyEnvelope struct {
	Status       string `json:"status"`
	Topic        string `json:"topic"`
	Key          string `json:"key"`
	Partition    int32  `json:"partition"`
	Count        uint32 `json:"count"`
	NextVersion  uint64 `json:"next_version"`
	HeadVersion  uint64 `json:"head_version"`
	Completeness string `json:"completeness"`
	HasMore      bool   `json:"has_more"`
}

// Completeness values of READ_STREAM_HISTORY.
const (
	// complete: every version from from_version up to the page's end is in
	// the batch.
	historyComplete = "complete"
	// partial: retention removed versions the read asked for; the batch
	// starts at the first retained one.
	historyPartial = "partial"
	// unknown: the log holds no event of the aggregate, so the broker
	// cannot tell a new aggregate from one whose history retention
	// removed entirely.
	historyUnknown = "unknown"
)

// readStreamHistory is READ_STREAM_HISTORY: one page of raw events from
// from_version (default 1) without snapshots, limit default 256 (at most
// 1,024), with where the next page starts and whether the history is
// complete.
func (h *Handlers) readStreamHistory(ctx context.Context, c *command.Call) ([]byte, error) {
	var limit int64
	var from uint64
	s, err := h.lookup(ctx, c, func(p *param.Reader) {
		limit = p.OptInt("limit", historyPage, 1, historyMaxPage)
		from = fromVersion(c, p)
	})
	if err != nil {
		return command.JSONError(c.Out, err)
	}
	resp, err := toLeader(ctx, h.r, s, streamv1.StreamServiceClient.ReadStream, func(t *metav1.Topic) *streamv1.ReadStreamRequest {
		return &streamv1.ReadStreamRequest{Stream: s.ref(t), FromVersion: from, MaxRecords: uint32(limit)}
	})
	if err != nil {
		return command.JSONError(c.Out, err)
	}
	env := historyEnvelope{Status: "OK", Topic: s.name, Key: s.key, Partition: s.part, Count: resp.GetCount(),
		NextVersion: resp.GetNextVersion(), HeadVersion: resp.GetHeadVersion(), HasMore: resp.GetHasMore()}
	switch {
	case resp.GetHeadVersion() == 0:
		env.Completeness = historyUnknown
	case from < resp.GetFirstRetainedVersion():
		env.Completeness = historyPartial
	default:
		env.Completeness = historyComplete
	}
	return command.TwoFrames(c, env, s.name, s.part, resp.GetRecords())
}
