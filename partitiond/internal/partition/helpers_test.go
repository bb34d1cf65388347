package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/clock"
	"github.com/strataio/strata/partitiond/internal/recordtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type nodeEnv struct {
	fs    *vfs.MemFS
	clock *clock.Manual
	cfg   NodeConfig
}

// crashClone returns an environment on a copy of the file system as a power
// loss now would leave it (unsyncedPct of unsynced data kept).
func (e *nodeEnv) crashClone(unsyncedPct int) *nodeEnv {
	c := *e
	c.fs = e.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsyncedPct, RNG: rand.New(rand.NewPCG(1, 2))})
	c.cfg.FS = c.fs
	c.cfg.StateFS = nil
	return &c
}

func newNodeEnv(t testing.TB, mod ...func(*NodeConfig)) *nodeEnv {
	t.Helper()
	e := &nodeEnv{fs: vfs.NewCrashableMem(), clock: clock.NewManual(t0)}
	e.cfg = NodeConfig{Dir: "/data", FS: e.fs, Clock: e.clock,
		Defaults: Defaults{SegmentBytes: 16 << 10, IndexInterval: 1024}}
	for _, m := range mod {
		m(&e.cfg)
	}
	return e
}

func (e *nodeEnv) open(t testing.TB) *Node {
	t.Helper()
	if err := e.fs.MkdirAll(e.cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsyncDir(e.fs, "/"); err != nil {
		t.Fatal(err)
	}
	n, err := Open(context.Background(), e.cfg)
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	return n
}

// openPartition opens a node on a fresh in-memory env, closed when t ends,
// and creates partition id of topic with cfg on it.
func openPartition(t testing.TB, topic string, id int32, cfg TopicConfig) (*Node, *Partition) {
	t.Helper()
	n := newNodeEnv(t).open(t)
	t.Cleanup(func() { n.Close() })
	return n, mustCreate(t, n, topic, id, cfg)
}

func mustCreate(t testing.TB, n *Node, topic string, id int32, cfg TopicConfig) *Partition {
	t.Helper()
	p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: topic, Partition: id, Config: cfg})
	if err != nil {
		t.Fatalf("create %s/%d: %v", topic, id, err)
	}
	return p
}

// rec is one test record.
type rec struct {
	key     string
	payload []byte
	ts      int64
}

// recordSet encodes records of topic as a record set; the partition and
// offset fields are left for the partition to fill.
func recordSet(t testing.TB, topic string, recs ...rec) []byte {
	t.Helper()
	ws := make([]wire.Record, len(recs))
	for i, r := range recs {
		ws[i] = wire.Record{Topic: topic, Payload: r.payload, Key: r.key, Timestamp: r.ts, Partition: 99}
	}
	return recordtest.Set(t, ws...)
}

func payloads(t testing.TB, topic string, ps ...string) ([]byte, uint32) {
	t.Helper()
	rs := make([]rec, len(ps))
	for i, p := range ps {
		rs[i] = rec{payload: []byte(p)}
	}
	return recordSet(t, topic, rs...), uint32(len(ps))
}

func appendPayloads(t testing.TB, p *Partition, ps ...string) AppendResult {
	t.Helper()
	set, n := payloads(t, p.Topic(), ps...)
	res, err := p.Append(context.Background(), &AppendRequest{LifecycleEpoch: p.LifecycleEpoch(), Acks: AcksLeader, Records: set, RecordCount: n})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

// decoded is a fetched record.
type decoded struct {
	offset    uint64
	partition int32
	key       string
	payload   string
}

func decode(t testing.TB, set []byte) []decoded {
	t.Helper()
	var out []decoded
	for _, v := range recordtest.Records(t, set) {
		k, _ := v.Key()
		out = append(out, decoded{offset: v.Offset(), partition: v.Partition(), key: string(k), payload: string(v.Payload())})
	}
	return out
}

func fetchAll(t testing.TB, p *Partition, from uint64) []decoded {
	t.Helper()
	var out []decoded
	for {
		r, err := p.Fetch(context.Background(), &FetchRequest{LifecycleEpoch: p.LifecycleEpoch(), Offset: from})
		if err != nil {
			t.Fatalf("fetch %d: %v", from, err)
		}
		out = append(out, decode(t, r.Records)...)
		if r.NextOffset == from {
			return out
		}
		from = r.NextOffset
	}
}

func wantCode(t testing.TB, err error, code errcode.Code) *errcode.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %s", code.Name())
	}
	if !errors.Is(err, code) {
		t.Fatalf("got %v, want %s", err, code.Name())
	}
	var e *errcode.Error
	errors.As(err, &e)
	return e
}

func field(e *errcode.Error, k string) string {
	for _, f := range e.Fields {
		if f.Key == k {
			return f.Value
		}
	}
	return ""
}

func payloadN(i int) string { return fmt.Sprintf("payload-%06d", i) }

var _ = bytes.Equal

func fsyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
