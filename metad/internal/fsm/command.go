package fsm

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
)

// Type identifies a command in the Raft log. Values are persisted: never
// renumber or reuse one.
type Type uint16

// Command types.
const (
	TypeInitCluster      Type = 1
	TypeCreateTopic      Type = 2
	TypeAlterTopicConfig Type = 3
	TypeDeleteTopic      Type = 4
	TypeTruncateTopic    Type = 5
	TypeReportCleanup    Type = 6
	TypeRegisterNode     Type = 7
	TypeNodeHeartbeat    Type = 8
	TypeReconcile        Type = 9
	TypeElectLeader      Type = 10
	TypeAlterIsr         Type = 11
	TypeCheckpointHwm    Type = 12
	TypeShutdownNode     Type = 13
)

// commandVersion is the first byte of every encoded command. A node that
// meets another value refuses the entry (mixed-version clusters are not
// supported, spec 7).
const commandVersion = 1

const commandHeaderLen = 3

// String returns the command's name, or "type(N)" for an unknown one.
func (t Type) String() string {
	if s, ok := registry[t]; ok {
		return s.name
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Encode encodes a command payload: one version byte, the big-endian type id
// and the deterministic protobuf encoding of payload. The type follows from
// the payload's message type (see registry.go); a payload no handler takes
// is an error.
func Encode(payload proto.Message) ([]byte, error) {
	if payload == nil {
		return nil, errcode.UnknownCommand.New("nil command payload")
	}
	typ, ok := typeByMessage[payload.ProtoReflect().Descriptor().FullName()]
	if !ok {
		return nil, errcode.UnknownCommand.New("no command takes this payload", "payload", string(payload.ProtoReflect().Descriptor().FullName()))
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", typ, err)
	}
	out := make([]byte, commandHeaderLen, commandHeaderLen+len(body))
	out[0] = commandVersion
	binary.BigEndian.PutUint16(out[1:], uint16(typ))
	return append(out, body...), nil
}

// MustEncode is Encode for payloads known to be valid (tests, the
// controller); it panics on error.
func MustEncode(payload proto.Message) []byte {
	b, err := Encode(payload)
	if err != nil {
		panic(err)
	}
	return b
}

// Decode splits an encoded command into its type and payload. A short entry,
// another version or a malformed payload is decode_failed; an unknown type is
// unknown_command.
func Decode(b []byte) (Type, proto.Message, error) {
	if len(b) < commandHeaderLen {
		return 0, nil, errcode.DecodeFailed.New("metadata command shorter than its header", "reason", "short")
	}
	if b[0] != commandVersion {
		return 0, nil, errcode.DecodeFailed.New("unsupported metadata command version", "reason", "version", "version", strconv.Itoa(int(b[0])))
	}
	typ := Type(binary.BigEndian.Uint16(b[1:3]))
	s, ok := registry[typ]
	if !ok {
		return typ, nil, errcode.UnknownCommand.New("unknown metadata command type", "type", strconv.Itoa(int(typ)))
	}
	msg := s.newMsg()
	if err := proto.Unmarshal(b[commandHeaderLen:], msg); err != nil {
		return typ, nil, errcode.DecodeFailed.New("malformed metadata command payload", "reason", "payload", "command", s.name)
	}
	return typ, msg, nil
}
