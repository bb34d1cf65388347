package fsm

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestEncodeDecodeRoundTripsEveryCommand(t *testing.T) {
	payloads := []proto.Message{
		&metav1.InitClusterCommand{TransactionCoordinatorShards: 50},
		create("t"),
		&metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "1"},
		&metav1.DeleteTopicRequest{Name: "t"},
		&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: 1},
		&metav1.ReportCleanupRequest{NodeId: "p1", Topic: "t"},
		&metav1.RegisterNodeCommand{Node: pnode("p1", 1)},
		&metav1.NodeHeartbeatCommand{NodeId: "p1"},
		&metav1.ReconcileCommand{LeaseTimeoutMs: 1},
		&metav1.ElectLeaderRequest{Topic: "t"},
		&metav1.AlterIsrRequest{Topic: "t"},
		&metav1.CheckpointHwmRequest{Topic: "t"},
		&metav1.ShutdownNodeRequest{NodeId: "p1", Incarnation: 1},
	}
	if len(payloads) != len(registry) {
		t.Fatalf("%d payloads for %d registered commands", len(payloads), len(registry))
	}
	seen := map[Type]bool{}
	for _, msg := range payloads {
		b, err := Encode(msg)
		if err != nil {
			t.Fatal(err)
		}
		typ, got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if seen[typ] {
			t.Fatalf("type %s twice", typ)
		}
		seen[typ] = true
		if !proto.Equal(got, msg) {
			t.Fatalf("%s: round trip %v -> %v", typ, msg, got)
		}
	}
}

func TestDecodeRejectsMalformedCommands(t *testing.T) {
	good := MustEncode(&metav1.DeleteTopicRequest{Name: "t"})
	cases := []struct {
		name string
		b    []byte
		code errcode.Code
	}{
		{"Empty", nil, errcode.DecodeFailed},
		{"Short", good[:2], errcode.DecodeFailed},
		{"OtherVersion", append([]byte{2}, good[1:]...), errcode.DecodeFailed},
		{"UnknownType", append([]byte{1, 0xff, 0xfe}, good[3:]...), errcode.UnknownCommand},
		{"TypeZero", append([]byte{1, 0, 0}, good[3:]...), errcode.UnknownCommand},
		{"BadPayload", append([]byte{1, 0, byte(TypeDeleteTopic)}, 0xff, 0xff, 0xff), errcode.DecodeFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Decode(c.b); !errors.Is(err, c.code) {
				t.Fatalf("Decode = %v, want %s", err, c.code.Name())
			}
		})
	}
}

// TestUnknownCommandFailsLoudlyAndChangesNothing: an entry no handler takes
// is an error in the Result (the node surfaces it), never skipped silently.
func TestUnknownCommandFailsLoudlyAndChangesNothing(t *testing.T) {
	x := newH(t)
	x.partitionds(1)
	before := x.f.EncodeState()
	r := x.f.ApplyCommand(99, []byte{1, 0x7f, 0x00})
	if !errors.Is(r.Err, errcode.UnknownCommand) || r.Index != 99 {
		t.Fatalf("result = %+v", r)
	}
	if string(before) != string(x.f.EncodeState()) {
		t.Fatal("unknown command changed the state")
	}
	if x.f.AppliedIndex() != 99 {
		t.Fatalf("applied index %d", x.f.AppliedIndex())
	}
}

func TestEncodeRejectsPayloadsNoCommandTakes(t *testing.T) {
	if _, err := Encode(&metav1.Topic{}); !errors.Is(err, errcode.UnknownCommand) {
		t.Fatalf("Encode(Topic) = %v", err)
	}
	if _, err := Encode(nil); !errors.Is(err, errcode.UnknownCommand) {
		t.Fatalf("Encode(nil) = %v", err)
	}
}
