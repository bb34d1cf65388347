package wire

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/strataio/strata/libs/errcode"
)

// crq2 builds a CRQ2 payload by hand, bypassing the encoder's checks.
func crq2(magic uint32, version uint16, pos []string, kv ...string) []byte {
	b := appendU16(appendU32(nil, magic), version)
	return appendCounted(appendCounted(b, len(pos), pos), len(kv)/2, kv)
}

func TestDecodeRequestRejectsInvalidPayloads(t *testing.T) {
	manyFields := make([]string, 0, 40)
	for i := range 20 {
		manyFields = append(manyFields, fmt.Sprintf("k%d", i), "v")
	}
	manyFields = append(manyFields, "k3", "again")
	cases := []struct {
		name   string
		b      []byte
		reason string
	}{
		{"Empty", nil, "truncated"},
		{"BadMagic", crq2(0x43525133, 2, nil), "bad_magic"},
		{"BatchMagic", crq2(BatchMagic, 2, nil), "bad_magic"},
		{"Version1", crq2(RequestMagic, 1, nil), "bad_version"},
		{"MissingFieldCount", crq2(RequestMagic, 2, nil)[:8], "truncated"},
		{"PositionalCountAboveLimit", appendU16(appendU16(appendU32(nil, RequestMagic), 2), 1025), "too_many_positionals"},
		{"PositionalCountBeyondBytes", appendU16(appendU16(appendU32(nil, RequestMagic), 2), 1000), "truncated"},
		{"EmptyPositional", crq2(RequestMagic, 2, []string{""}), "bad_positional"},
		{"PositionalWithSpace", crq2(RequestMagic, 2, []string{"a b"}), "bad_positional"},
		{"PositionalWithTab", crq2(RequestMagic, 2, []string{"a\tb"}), "bad_positional"},
		{"PositionalWithNewline", crq2(RequestMagic, 2, []string{"a\n"}), "bad_positional"},
		{"PositionalLengthBeyondBytes", append(appendU16(appendU16(appendU32(nil, RequestMagic), 2), 1), 0, 0, 0, 9, 'x'), "truncated"},
		{"FieldCountAboveLimit", appendU16(crq2(RequestMagic, 2, nil)[:8], 1025), "too_many_fields"},
		{"FieldCountBeyondBytes", appendU16(crq2(RequestMagic, 2, nil)[:8], 3), "truncated"},
		{"EmptyKey", crq2(RequestMagic, 2, nil, "", "v"), "bad_key"},
		{"UpperFirstKey", crq2(RequestMagic, 2, nil, "Topic", "v"), "bad_key"},
		{"DigitFirstKey", crq2(RequestMagic, 2, nil, "1topic", "v"), "bad_key"},
		{"DashKey", crq2(RequestMagic, 2, nil, "a-b", "v"), "bad_key"},
		{"DuplicateKey", crq2(RequestMagic, 2, nil, "topic", "a", "topic", "b"), "duplicate_key"},
		{"DuplicateKeyManyFields", crq2(RequestMagic, 2, nil, manyFields...), "duplicate_key"},
		{"ValueTruncated", crq2(RequestMagic, 2, nil, "topic", "events")[:20], "truncated"},
		{"TrailingByte", append(crq2(RequestMagic, 2, nil, "topic", "t"), 0), "trailing_bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest(tc.b)
			wantCode(t, err, errcode.DecodeFailed, tc.reason)
			if e, _ := errcode.As(err); e.Field("payload") != "crq2" {
				t.Fatalf("payload field %q", e.Field("payload"))
			}
		})
	}
}

func TestRequestRoundTripKeepsOrderAndLookups(t *testing.T) {
	r := Request{Positionals: []string{"P0:5,P1:9"}, Fields: []Field{{"topic", "t"}, {"_internal", ""}, {"message", "a b\tc"}, {"camelCase9", "x"}}}
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !IsRequestPayload(b) || IsBatch(b) {
		t.Fatal("payload detection")
	}
	got, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if v, ok := got.Get("message"); !ok || v != "a b\tc" {
		t.Fatalf("Get = %q %v", v, ok)
	}
	if !got.Has("_internal") || got.Has("missing") || got.Value("missing") != "" {
		t.Fatal("Has/Value")
	}
	var keys []string
	for k := range got.All() {
		keys = append(keys, k)
	}
	if strings.Join(keys, ",") != "topic,_internal,message,camelCase9" {
		t.Fatalf("order %v", keys)
	}
	if txt := got.Text(CmdBatchCommit); txt != "BATCH_COMMIT P0:5,P1:9 topic=t _internal= message=a b\tc camelCase9=x" {
		t.Fatalf("Text = %q", txt)
	}
	// Decode reuses the request's slices and does not alias the input.
	b2 := bytes.Clone(b)
	if err := got.Decode(b2); err != nil {
		t.Fatal(err)
	}
	for i := range b2 {
		b2[i] = 0
	}
	if got.Value("topic") != "t" {
		t.Fatal("decoded strings alias the input buffer")
	}
}

func TestRequestAppendToRefusesInvalidRequests(t *testing.T) {
	many := make([]Field, MaxRequestArgs+1)
	for i := range many {
		many[i] = Field{fmt.Sprintf("k%d", i), ""}
	}
	cases := map[string]Request{
		"EmptyPositional": {Positionals: []string{""}},
		"SpacePositional": {Positionals: []string{"a b"}},
		"BadKey":          {Fields: []Field{{"Bad", "x"}}},
		"DuplicateKey":    {Fields: []Field{{"a", "x"}, {"a", "y"}}},
		"TooManyFields":   {Fields: many},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := r.AppendTo(nil)
			wantCode(t, err, errcode.MalformedInput, "")
		})
	}
}

func TestParseTextFollowsTheSDKAlgorithm(t *testing.T) {
	cases := []struct {
		text string
		cmd  Command
		want Request
	}{
		{"PUBLISH topic=t acks=1 message=hello world  ", CmdPublish,
			Request{Fields: []Field{{"topic", "t"}, {"acks", "1"}, {"message", "hello world"}}}},
		{"publish   topic=t message=a=b message=c", CmdPublish,
			Request{Fields: []Field{{"topic", "t"}, {"message", "a=b message=c"}}}},
		{"APPEND_STREAM topic=t metadata={\"a\": 1} version=2 message={\"v\": \"x y\"}", CmdAppendStream,
			Request{Fields: []Field{{"topic", "t"}, {"metadata", "{\"a\": 1} version=2"}, {"message", "{\"v\": \"x y\"}"}}}},
		{"PUBLISH topic=t xmessage=1 message=real", CmdPublish,
			Request{Fields: []Field{{"topic", "t"}, {"xmessage", "1"}, {"message", "real"}}}},
		{"REPLICATE_SNAPSHOT internal_token=s payload={\"k\": [1, 2]}", CmdReplicateSnapshot,
			Request{Fields: []Field{{"internal_token", "s"}, {"payload", "{\"k\": [1, 2]}"}}}},
		{"PUBLISH topic=t message=m payload=p", CmdPublish,
			Request{Fields: []Field{{"topic", "t"}, {"message", "m payload=p"}}}},
		{"BATCH_COMMIT P0:10,P1:20 topic=t group=g", CmdBatchCommit,
			Request{Positionals: []string{"P0:10,P1:20"}, Fields: []Field{{"topic", "t"}, {"group", "g"}}}},
		{"HELP", CmdHelp, Request{}},
		{"  list\t", CmdList, Request{}},
		{"PUBLISH topic= message=", CmdPublish, Request{Fields: []Field{{"topic", ""}, {"message", ""}}}},
		{"PUBLISH topic=t\tmessage=tab separated", CmdPublish, Request{Fields: []Field{{"topic", "t"}, {"message", "tab separated"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			cmd, req, err := ParseText(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if cmd != tc.cmd {
				t.Fatalf("command %v", cmd)
			}
			if diff := cmp.Diff(tc.want, req, cmpEmpty); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if _, err := req.AppendTo(nil); err != nil {
				t.Fatalf("parsed request does not encode: %v", err)
			}
		})
	}
}

func TestParseTextRejectsBadCommands(t *testing.T) {
	cases := []struct {
		text string
		code errcode.Code
	}{
		{"", errcode.MalformedInput},
		{"   ", errcode.MalformedInput},
		{"NOPE topic=t", errcode.UnknownCommand},
		{"PROTOCOL_INFO", errcode.UnknownCommand},
		{"PUBLISH Topic=t", errcode.MalformedInput},
		{"PUBLISH =x", errcode.MalformedInput},
		{"PUBLISH topic=a topic=b", errcode.MalformedInput},
		{"PUBLISH metadata=a metadata=b", errcode.MalformedInput},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			_, _, err := ParseText(tc.text)
			wantCode(t, err, tc.code, "")
		})
	}
}
