package fsm

import (
	"errors"
	"fmt"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// h drives an FSM through encoded commands, as raft would.
type h struct {
	t   testing.TB
	f   *FSM
	idx uint64
	now int64 // proposer time, ms
}

const lease = 10_000 // ms

func newH(t testing.TB) *h {
	return &h{t: t, f: New(Options{}), now: 1_700_000_000_000}
}

func (x *h) apply(p proto.Message) *Result {
	x.t.Helper()
	x.idx++
	return x.f.ApplyCommand(x.idx, MustEncode(p))
}

func (x *h) ok(p proto.Message) any {
	x.t.Helper()
	r := x.apply(p)
	if r.Err != nil {
		x.t.Fatalf("%T: %v", p, r.Err)
	}
	return r.Response
}

// fails applies p, requires the typed error code, and requires that the
// state did not change at all.
func (x *h) fails(p proto.Message, code errcode.Code) *errcode.Error {
	x.t.Helper()
	before := x.f.EncodeState()
	r := x.apply(p)
	if r.Err == nil {
		x.t.Fatalf("%T succeeded, want %s", p, code.Name())
	}
	e, ok := errcode.As(r.Err)
	if !ok || !errors.Is(r.Err, code) {
		x.t.Fatalf("%T: error %v, want %s", p, r.Err, code.Name())
	}
	if after := x.f.EncodeState(); string(after) != string(before) {
		x.t.Fatalf("%T: rejected command changed the state", p)
	}
	return e
}

// rejects runs one case of a rejection table as a subtest: on a fresh
// harness with three partition servers, the setup steps run in order (nil
// ones are skipped), then cmd must fail with code and change nothing.
func rejects(t *testing.T, name string, cmd proto.Message, code errcode.Code, setup ...func(x *h)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		x := newH(t)
		x.partitionds(3)
		for _, s := range setup {
			if s != nil {
				s(x)
			}
		}
		x.fails(cmd, code)
	})
}

// createT creates topic "t" with the defaults.
func createT(x *h) { x.ok(create("t")) }

func (x *h) state() *State {
	var s *State
	x.f.Read(func(st *State) { s = st })
	return s
}

func (x *h) topic(name string) *metav1.Topic {
	x.t.Helper()
	t, ok := x.state().Topic(name)
	if !ok {
		x.t.Fatalf("topic %s missing", name)
	}
	return t
}

func (x *h) node(id string) *metav1.Node {
	x.t.Helper()
	n, ok := x.state().Node(id)
	if !ok {
		x.t.Fatalf("node %s missing", id)
	}
	return n
}

func (x *h) init() {
	x.ok(&metav1.InitClusterCommand{TransactionCoordinatorShards: DefaultTxnShards, CreatedUnixMs: x.now})
}

func pnode(id string, inc uint64, versions ...uint32) *metav1.Node {
	if versions == nil {
		versions = []uint32{1, 2}
	}
	return &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:7" + id[len(id)-1:] + "00",
		LifecycleVersions: versions, Incarnation: inc}
}

func (x *h) register(n *metav1.Node) {
	x.t.Helper()
	x.ok(&metav1.RegisterNodeCommand{Node: n, NowUnixMs: x.now})
}

// partitionds registers p1..pn.
func (x *h) partitionds(n int) {
	for i := 1; i <= n; i++ {
		x.register(pnode(fmt.Sprintf("p%d", i), 1))
	}
}

func create(name string, mods ...func(*metav1.CreateTopicRequest)) *metav1.CreateTopicCommand {
	req := &metav1.CreateTopicRequest{Name: name}
	for _, m := range mods {
		m(req)
	}
	return &metav1.CreateTopicCommand{Request: req, Defaults: &metav1.TopicDefaults{ReplicationFactor: 3, CleanupPolicy: "delete"}}
}

func ptr[T any](v T) *T { return &v }

func (x *h) heartbeat(id string, inc uint64) *Result {
	return x.apply(&metav1.NodeHeartbeatCommand{NodeId: id, Incarnation: inc, NowUnixMs: x.now})
}

func (x *h) reconcile() *ReconcileResult {
	x.t.Helper()
	return x.ok(&metav1.ReconcileCommand{NowUnixMs: x.now, LeaseTimeoutMs: lease}).(*ReconcileResult)
}

// watchAll subscribes from revision 0 and returns a function that drains
// events published since.
func (x *h) watchFrom(rev uint64) func() []*metav1.WatchResponse {
	backlog, sub := x.f.Watch(rev)
	x.t.Cleanup(sub.Close)
	pending := backlog
	return func() []*metav1.WatchResponse {
		out := pending
		pending = nil
		for {
			select {
			case ev := <-sub.C():
				out = append(out, ev)
			default:
				return out
			}
		}
	}
}
