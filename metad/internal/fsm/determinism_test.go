package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// randomCommand draws a command from a small universe of names and nodes so
// that sequences hit every handler, valid and invalid, often on the same
// objects.
func randomCommand(rng *rand.Rand, now int64, st *State) proto.Message {
	topic := []string{"a", "b", "c", ConsumerOffsetsTopic, ".."}[rng.IntN(5)]
	node := fmt.Sprintf("p%d", 1+rng.IntN(4))
	part := int32(rng.IntN(4))
	epoch := uint64(1 + rng.IntN(4))
	switch rng.IntN(15) {
	case 0:
		return &metav1.InitClusterCommand{TransactionCoordinatorShards: uint32(50 + rng.IntN(2)), CreatedUnixMs: now}
	case 1, 2:
		req := &metav1.CreateTopicRequest{Name: topic, Internal: topic == ConsumerOffsetsTopic}
		if rng.IntN(2) == 0 {
			req.Partitions = ptr(int32(1 + rng.IntN(6)))
		}
		if rng.IntN(3) == 0 {
			req.CleanupPolicy = ptr([]string{"delete", "compact", "delete,compact", "bad"}[rng.IntN(4)])
		}
		if rng.IntN(3) == 0 {
			req.MinInSyncReplicas = ptr([]string{"1", "2", "default", "9"}[rng.IntN(4)])
		}
		if rng.IntN(4) == 0 {
			req.ReplicationFactor = ptr(int32(1 + rng.IntN(3)))
		}
		return &metav1.CreateTopicCommand{Request: req, Defaults: &metav1.TopicDefaults{ReplicationFactor: int32(1 + rng.IntN(3))}}
	case 3:
		return &metav1.AlterTopicConfigRequest{Name: topic, MinInSyncReplicas: []string{"1", "2", "default", "x"}[rng.IntN(4)]}
	case 4:
		return &metav1.DeleteTopicRequest{Name: topic, IfExists: rng.IntN(2) == 0}
	case 5:
		return &metav1.TruncateTopicRequest{Name: topic, ExpectedRevision: uint64(rng.IntN(4))}
	case 6:
		return &metav1.ReportCleanupRequest{NodeId: node, Topic: topic, LifecycleEpoch: uint64(rng.IntN(3))}
	case 7, 8:
		return &metav1.RegisterNodeCommand{Node: pnode(node, uint64(1+rng.IntN(2)), []uint32{1, 2}[:1+rng.IntN(2)]...), NowUnixMs: now}
	case 9:
		return &metav1.NodeHeartbeatCommand{NodeId: node, Incarnation: uint64(1 + rng.IntN(2)), NowUnixMs: now}
	case 10:
		return &metav1.ReconcileCommand{NowUnixMs: now, LeaseTimeoutMs: lease}
	case 11, 12, 13:
		// Partition commands: half the time aimed with the current epochs so
		// success paths run, half the time stale or random.
		tp, ok := st.Topic(topic)
		if ok && len(tp.GetPartitions()) > 0 && rng.IntN(2) == 0 {
			p := tp.GetPartitions()[rng.IntN(len(tp.GetPartitions()))]
			part, epoch = p.GetId(), p.GetLeaderEpoch()
			isr := []string{p.GetLeader()}
			for _, r := range p.GetReplicas() {
				if r != p.GetLeader() && rng.IntN(2) == 0 {
					isr = append(isr, r)
				}
			}
			switch rng.IntN(3) {
			case 0:
				return &metav1.ElectLeaderRequest{Topic: topic, Partition: part, BrokerId: p.GetIsr()[rng.IntN(len(p.GetIsr()))]}
			case 1:
				return &metav1.AlterIsrRequest{Topic: topic, Partition: part, LeaderEpoch: epoch, Isr: isr}
			default:
				return &metav1.CheckpointHwmRequest{Topic: topic, Partition: part, LeaderEpoch: epoch,
					LifecycleEpoch: tp.GetConfig().GetLifecycleEpoch(), Hwm: p.GetCommittedHwm() + uint64(rng.IntN(10))}
			}
		}
		switch rng.IntN(3) {
		case 0:
			return &metav1.ElectLeaderRequest{Topic: topic, Partition: part, BrokerId: node}
		case 1:
			return &metav1.AlterIsrRequest{Topic: topic, Partition: part, LeaderEpoch: epoch, Isr: []string{node, fmt.Sprintf("p%d", 1+rng.IntN(4))}[:1+rng.IntN(2)]}
		}
		return &metav1.CheckpointHwmRequest{Topic: topic, Partition: part, LeaderEpoch: epoch, LifecycleEpoch: uint64(1 + rng.IntN(2)), Hwm: uint64(rng.IntN(100))}
	case 14:
		return &metav1.ShutdownNodeRequest{NodeId: node, Incarnation: uint64(1 + rng.IntN(2))}
	default:
		return &metav1.ReconcileCommand{NowUnixMs: now, LeaseTimeoutMs: lease}
	}
}

// runRandom applies n random commands to x and returns them encoded.
func runRandom(x *h, seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 99))
	var cmds [][]byte
	for range n {
		x.now += int64(rng.IntN(1500))
		b := MustEncode(randomCommand(rng, x.now, x.state()))
		cmds = append(cmds, b)
		x.idx++
		x.f.ApplyCommand(x.idx, b)
	}
	return cmds
}

// TestSameCommandsGiveIdenticalSnapshots replays random command sequences on
// fresh FSMs, and on an FSM restored from a mid-sequence snapshot: every
// replica must end byte-identical, with identical results per command.
func TestSameCommandsGiveIdenticalSnapshots(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := range uint64(seeds) {
		x := newH(t)
		cmds := runRandom(x, seed, 400)
		want := x.f.EncodeState()

		y := New(Options{})
		z := New(Options{})
		for i, b := range cmds {
			ry := y.ApplyCommand(uint64(i+1), b)
			if i == len(cmds)/2 {
				snap := snapshotBytes(t, y)
				if err := z.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if i > len(cmds)/2 {
				rz := z.ApplyCommand(uint64(i+1), b)
				if (ry.Err == nil) != (rz.Err == nil) || ry.Revision != rz.Revision {
					t.Fatalf("seed %d command %d: results differ: %v/%v revision %d/%d", seed, i, ry.Err, rz.Err, ry.Revision, rz.Revision)
				}
			}
		}
		if !bytes.Equal(y.EncodeState(), want) {
			t.Fatalf("seed %d: replay differs", seed)
		}
		if !bytes.Equal(z.EncodeState(), want) {
			t.Fatalf("seed %d: replay from a snapshot differs", seed)
		}
	}
}

// TestRandomRunsKeepInvariants checks the invariants every handler must
// keep, after every command of random runs.
func TestRandomRunsKeepInvariants(t *testing.T) {
	okByType := map[Type]int{}
	allByType := map[Type]int{}
	for seed := range uint64(10) {
		x := newH(t)
		rng := rand.New(rand.NewPCG(seed, 5))
		for i := range 400 {
			x.now += int64(rng.IntN(1500))
			r := x.apply(randomCommand(rng, x.now, x.state()))
			allByType[r.Type]++
			if r.Err == nil {
				okByType[r.Type]++
			}
			if err := checkInvariants(x.state()); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, i, err)
			}
		}
	}
	// The generator must exercise success paths, not only rejections.
	for typ := range registry {
		t.Logf("%-18s %4d applied, %4d succeeded", typ, allByType[typ], okByType[typ])
		if okByType[typ] == 0 {
			t.Errorf("no %s succeeded in the random runs", typ)
		}
	}
}

func checkInvariants(st *State) error {
	// The snapshot decoder validates the structure; round-trip through it.
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, st); err != nil {
		return err
	}
	if _, err := DecodeSnapshot(&buf); err != nil {
		return err
	}
	for _, tp := range st.Topics() {
		for _, p := range tp.GetPartitions() {
			if p.GetLeader() != "" && !contains(p.GetIsr(), p.GetLeader()) {
				return fmt.Errorf("%s/%d: leader %s not in ISR %v", tp.GetConfig().GetName(), p.GetId(), p.GetLeader(), p.GetIsr())
			}
			if len(p.GetIsr()) == 0 {
				return fmt.Errorf("%s/%d: empty ISR", tp.GetConfig().GetName(), p.GetId())
			}
			for _, id := range p.GetIsr() {
				if !contains(p.GetReplicas(), id) {
					return fmt.Errorf("%s/%d: ISR member %s is not a replica", tp.GetConfig().GetName(), p.GetId(), id)
				}
			}
			if int32(len(p.GetReplicas())) != tp.GetConfig().GetReplicationFactor() {
				return fmt.Errorf("%s/%d: %d replicas for RF %d", tp.GetConfig().GetName(), p.GetId(), len(p.GetReplicas()), tp.GetConfig().GetReplicationFactor())
			}
		}
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
