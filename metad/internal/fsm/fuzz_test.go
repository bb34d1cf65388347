package fsm

import (
	"bytes"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func seedCommands(f *testing.F) {
	f.Add(MustEncode(create("orders", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](3) })))
	f.Add(MustEncode(&metav1.TruncateTopicRequest{Name: "orders", ExpectedRevision: 2}))
	f.Add(MustEncode(&metav1.AlterIsrRequest{Topic: "orders", Partition: 1, LeaderEpoch: 2, Isr: []string{"p1", "p2"}}))
	f.Add(MustEncode(&metav1.RegisterNodeCommand{Node: pnode("p4", 1)}))
	f.Add(MustEncode(&metav1.ReconcileCommand{NowUnixMs: 1_800_000_000_000, LeaseTimeoutMs: lease}))
	f.Add([]byte{1, 0, 99})
}

// FuzzDecodeCommand: the command decoder never panics and fails only with
// typed errors.
func FuzzDecodeCommand(f *testing.F) {
	seedCommands(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, msg, err := Decode(b)
		if err != nil {
			if _, ok := errcode.As(err); !ok {
				t.Fatalf("untyped decode error %v", err)
			}
			return
		}
		if _, err := Encode(msg); err != nil {
			t.Fatalf("decoded payload does not re-encode: %v", err)
		}
	})
}

// FuzzApplyCommand applies arbitrary entries to a populated FSM: never a
// panic, every failure typed and leaving the state untouched, every success
// keeping the invariants the snapshot decoder checks.
func FuzzApplyCommand(f *testing.F) {
	seedCommands(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		x := populated(t)
		before := x.f.EncodeState()
		r := x.f.ApplyCommand(1000, b)
		if r.Err != nil {
			if _, ok := errcode.As(r.Err); !ok {
				t.Fatalf("untyped error %v", r.Err)
			}
			if !bytes.Equal(before, x.f.EncodeState()) {
				t.Fatal("failed command changed the state")
			}
			return
		}
		if err := checkInvariants(x.state()); err != nil {
			t.Fatalf("invariant broken by %s: %v", r.Type, err)
		}
	})
}

// FuzzDecodeSnapshot: arbitrary snapshot files never panic the decoder and
// fail with unsupported_recovery_protocol or storage_corrupt.
func FuzzDecodeSnapshot(f *testing.F) {
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, populated(f).state()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:30])
	var empty bytes.Buffer
	if err := EncodeSnapshot(&empty, newState()); err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeSnapshot(bytes.NewReader(b))
		if err != nil {
			e, ok := errcode.As(err)
			if !ok || (e.Code != errcode.UnsupportedRecoveryProtocol.Name() && e.Code != errcode.StorageCorrupt.Name()) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		var again bytes.Buffer
		if err := EncodeSnapshot(&again, st); err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeSnapshot(&again); err != nil {
			t.Fatalf("accepted snapshot does not re-decode: %v", err)
		}
	})
}
