package client

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Reply is a parsed "OK key=value ..." answer with typed accessors.
type Reply struct {
	wire.OKReply
	// Text is the reply as received.
	Text string
}

// Int returns key as a signed integer; a missing or malformed value is a
// decode_failed error.
func (r Reply) Int(key string) (int64, error) {
	return replyNumber(r, key, "an integer", func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) })
}

// Uint returns key as an unsigned integer.
func (r Reply) Uint(key string) (uint64, error) {
	return replyNumber(r, key, "an unsigned integer", func(v string) (uint64, error) { return strconv.ParseUint(v, 10, 64) })
}

// replyNumber reads key with parse; kind names the number in the error of
// a malformed value.
func replyNumber[N int64 | uint64](r Reply, key, kind string, parse func(string) (N, error)) (N, error) {
	v, ok := r.Get(key)
	if !ok {
		return 0, errcode.DecodeFailed.New("reply field missing", "payload", "ok_text", "field", key)
	}
	n, err := parse(v)
	if err != nil {
		return 0, errcode.DecodeFailed.New("reply field is not "+kind, "payload", "ok_text", "field", key, "value", v)
	}
	return n, nil
}

// Bool returns key as a boolean ("true"/"false"); absent is false.
func (r Reply) Bool(key string) bool { return r.Value(key) == "true" }

// Map returns the fields as a map (for printing).
func (r Reply) Map() map[string]string {
	m := make(map[string]string, len(r.Fields))
	for _, f := range r.Fields {
		m[f.Key] = f.Value
	}
	return m
}

// TopicConfig is the CREATE request (spec 4.4); zero values are omitted so
// the server applies its defaults, and CREATE on an existing topic patches it.
type TopicConfig struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	// Idempotent and EventSourcing are sent only when non-nil (restating an
	// immutable value is allowed, changing it is not).
	Idempotent, EventSourcing *bool
	CleanupPolicy             string
	RetentionHours            int64
	RetentionBytes            int64
	Partitioner               string
	AuthPolicy                string
	ReadACL, WriteACL         string
	// MinInSyncReplicas is a number or "default".
	MinInSyncReplicas string
}

func itoaIf(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

func boolIf(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// CreateTopic creates or patches a topic and returns the definition the
// server answered (topic, partitions, revision, ...).
func (c *Client) CreateTopic(ctx context.Context, t TopicConfig) (Reply, error) {
	if t.Name == "" {
		return Reply{}, errcode.MissingTopic.New("topic name required", "command", "CREATE")
	}
	return c.ok(ctx, wire.CmdCreate, params(
		"topic", t.Name,
		"partitions", itoaIf(int64(t.Partitions)),
		"replication_factor", itoaIf(int64(t.ReplicationFactor)),
		"idempotent", boolIf(t.Idempotent),
		"event_sourcing", boolIf(t.EventSourcing),
		"min_in_sync_replicas", t.MinInSyncReplicas,
		"cleanup_policy", t.CleanupPolicy,
		"retention_hours", itoaIf(t.RetentionHours),
		"retention_bytes", itoaIf(t.RetentionBytes),
		"partitioner", t.Partitioner,
		"auth_policy", t.AuthPolicy,
		"read_acl", t.ReadACL,
		"write_acl", t.WriteACL,
	))
}

// DeleteTopic deletes a topic; with ifExists a missing topic is not an error
// and deleted is false.
func (c *Client) DeleteTopic(ctx context.Context, name string, ifExists bool) (deleted bool, err error) {
	ie := ""
	if ifExists {
		ie = "true"
	}
	r, err := c.ok(ctx, wire.CmdDelete, params("topic", name, "if_exists", ie))
	if err != nil {
		return false, err
	}
	return r.Bool("deleted"), nil
}

// ListTopics returns the topic names.
func (c *Client) ListTopics(ctx context.Context) ([]string, error) {
	r, err := c.ok(ctx, wire.CmdList, params())
	if err != nil {
		return nil, err
	}
	return splitCSV(r.Value("topics")), nil
}

func splitCSV(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// TopicDescription is the DESCRIBE JSON (spec 4.4).
type TopicDescription struct {
	Status     string `json:"status"`
	Topic      string `json:"topic"`
	Definition struct {
		Name              string `json:"name"`
		Revision          int64  `json:"revision"`
		Partitions        int    `json:"partitions"`
		ReplicationFactor int    `json:"replication_factor"`
		Idempotent        bool   `json:"idempotent"`
		EventSourcing     bool   `json:"event_sourcing"`
		Policy            struct {
			CleanupPolicy string `json:"cleanup_policy"`
			Partitioner   string `json:"partitioner"`
			AuthPolicy    string `json:"auth_policy"`
		} `json:"policy"`
	} `json:"definition"`
	Partitions []PartitionDescription `json:"partitions"`
	// Raw is the JSON as received (fields this version does not model).
	Raw json.RawMessage `json:"-"`
}

// PartitionDescription is one partition of a DESCRIBE answer.
type PartitionDescription struct {
	ID       int32  `json:"id"`
	Leader   string `json:"leader"`
	Replicas IDList `json:"replicas"`
	ISR      IDList `json:"isr"`
	LEO      uint64 `json:"leo"`
	HWM      uint64 `json:"hwm"`
}

// Describe returns a topic's definition and partitions.
func (c *Client) Describe(ctx context.Context, topic string) (*TopicDescription, error) {
	s, err := c.answer(ctx, wire.CmdDescribe, params("topic", topic))
	if err != nil {
		return nil, err
	}
	var d TopicDescription
	if err := decodeJSON(wire.CmdDescribe, "describe", s, &d); err != nil {
		return nil, err
	}
	d.Raw = json.RawMessage(s)
	return &d, nil
}

// decodeJSON decodes the JSON answer s of cmd into dst; payload names the
// answer in the decode_failed error of one that is not the expected JSON.
func decodeJSON(cmd wire.Command, payload, s string, dst any) error {
	if err := json.Unmarshal([]byte(s), dst); err != nil {
		return errcode.DecodeFailed.New(cmd.String()+" reply is not the expected JSON", "payload", payload, "reason", err.Error())
	}
	return nil
}

// TopicMetadata is the METADATA answer: the routing view of a topic.
type TopicMetadata struct {
	Topic      string
	Partitions int
	// Leaders holds the advertised host:port of each partition's leader, in
	// partition order.
	Leaders []string
	Epochs  []int64
	Reply   Reply
}

// Metadata returns a topic's partitions and leaders (any broker answers).
func (c *Client) Metadata(ctx context.Context, topic string) (*TopicMetadata, error) {
	r, err := c.ok(ctx, wire.CmdMetadata, params("topic", topic))
	if err != nil {
		return nil, err
	}
	n, err := r.Int("partitions")
	if err != nil {
		return nil, err
	}
	m := &TopicMetadata{Topic: r.Value("topic"), Partitions: int(n), Leaders: splitCSV(r.Value("leaders")), Reply: r}
	for _, e := range splitCSV(r.Value("epochs")) {
		v, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return nil, errcode.DecodeFailed.New("bad epoch in METADATA reply", "payload", "ok_text", "value", e)
		}
		m.Epochs = append(m.Epochs, v)
	}
	return m, nil
}

// PartitionOffsets is one entry of LIST_OFFSETS.
type PartitionOffsets struct {
	Partition                  int32
	Earliest, Latest, LEO, HWM uint64
	// LSO is the last stable offset, the end of what read_committed
	// readers see (ListOffsetsCommitted); HWM when the server did not send
	// it (ListOffsets does not ask for it).
	LSO uint64
	// Time is the offset of the time ListOffsetsAt asked for (the first
	// offset whose batch holds a timestamp at or after it, within
	// [Earliest, HWM]); zero from ListOffsets.
	Time uint64
}

// ListOffsetsAt is ListOffsets that also looks up the offset of time at in
// every partition (Strata's LIST_OFFSETS timestamp= extension parameter,
// served from partitiond's time index): PartitionOffsets.Time.
func (c *Client) ListOffsetsAt(ctx context.Context, topic string, partition int32, at time.Time) ([]PartitionOffsets, error) {
	return c.listOffsets(ctx, topic, partition, "timestamp", strconv.FormatInt(max(at.UnixMilli(), 0), 10))
}

// ListOffsets returns the offset range of every partition of topic, or of
// one partition when partition >= 0.
func (c *Client) ListOffsets(ctx context.Context, topic string, partition int32) ([]PartitionOffsets, error) {
	return c.listOffsets(ctx, topic, partition)
}

// ListOffsetsCommitted is ListOffsets with each partition's last stable
// offset (LIST_OFFSETS isolation=read_committed, a Strata extension
// parameter): what a read_committed consumer's lag is measured against.
func (c *Client) ListOffsetsCommitted(ctx context.Context, topic string, partition int32) ([]PartitionOffsets, error) {
	return c.listOffsets(ctx, topic, partition, "isolation", "read_committed")
}

// listOffsets runs LIST_OFFSETS for topic (one partition when partition >=
// 0) with the extension parameters extra (key, value pairs).
func (c *Client) listOffsets(ctx context.Context, topic string, partition int32, extra ...string) ([]PartitionOffsets, error) {
	p := ""
	if partition >= 0 {
		p = strconv.Itoa(int(partition))
	}
	r, err := c.ok(ctx, wire.CmdListOffsets, params(append([]string{"topic", topic, "partition", p}, extra...)...))
	if err != nil {
		return nil, err
	}
	return parsePartitionOffsets(r.Value("offsets"))
}

// parsePartitionOffsets reads "P0:earliest=0:latest=5:leo=5:hwm=5,P1:...".
func parsePartitionOffsets(s string) ([]PartitionOffsets, error) {
	var out []PartitionOffsets
	for _, ent := range splitCSV(s) {
		parts := strings.Split(ent, ":")
		bad := errcode.DecodeFailed.New("bad LIST_OFFSETS entry", "payload", "ok_text", "entry", ent)
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "P") {
			return nil, bad
		}
		pn, err := strconv.ParseInt(parts[0][1:], 10, 32)
		if err != nil {
			return nil, bad
		}
		po := PartitionOffsets{Partition: int32(pn)}
		hasLSO := false
		for _, kv := range parts[1:] {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.ParseUint(v, 10, 64)
			if !ok || err != nil {
				return nil, bad
			}
			switch k {
			case "earliest":
				po.Earliest = n
			case "latest":
				po.Latest = n
			case "leo":
				po.LEO = n
			case "hwm":
				po.HWM = n
			case "time":
				po.Time = n
			case "lso":
				po.LSO, hasLSO = n, true
			}
		}
		if !hasLSO {
			po.LSO = po.HWM
		}
		out = append(out, po)
	}
	return out, nil
}

// ClusterStatus returns the CLUSTER_STATUS JSON document as received, the
// application topics' partitions only (ClusterStatusWith for the rest).
func (c *Client) ClusterStatus(ctx context.Context) (json.RawMessage, error) {
	return c.ClusterStatusWith(ctx, ClusterStatusOptions{})
}

// IDList is a list of broker ids. Strata's node ids are strings; the public
// broker uses numbers; both decode.
type IDList []string

// UnmarshalJSON accepts an array of strings and/or numbers.
func (l *IDList) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(IDList, 0, len(raw))
	for _, r := range raw {
		var s string
		if err := json.Unmarshal(r, &s); err == nil {
			out = append(out, s)
			continue
		}
		var n json.Number
		if err := json.Unmarshal(r, &n); err != nil {
			return err
		}
		out = append(out, n.String())
	}
	*l = out
	return nil
}
