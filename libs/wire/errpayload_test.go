package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/strataio/strata/libs/errcode"
)

// rawError builds an error payload by hand.
func rawError(code string, class, retry byte, msg string, kv ...string) []byte {
	b := append(appendString(nil, code), class, retry)
	return appendCounted(appendString(b, msg), len(kv)/2, kv)
}

func TestDecodeErrorRejectsInvalidPayloads(t *testing.T) {
	many := make([]string, 0, 2*257)
	for i := range 257 {
		many = append(many, fmt.Sprintf("k%03d", i), "")
	}
	cases := []struct {
		name   string
		b      []byte
		reason string
	}{
		{"Empty", nil, "truncated"},
		{"EmptyCode", rawError("", 1, 0, "m"), "empty_code"},
		{"Class0", rawError("x", 0, 0, ""), "bad_class"},
		{"Class9", rawError("x", 9, 0, ""), "bad_class"},
		{"Retryable2", rawError("x", 1, 2, ""), "bad_retryable"},
		{"TooManyFields", rawError("x", 1, 0, "", many...), "too_many_fields"},
		{"FieldCountBeyondBytes", appendU16(rawError("x", 1, 0, "")[:len(rawError("x", 1, 0, ""))-2], 5), "truncated"},
		{"EmptyKey", rawError("x", 1, 0, "", "", "v"), "empty_key"},
		{"DuplicateKey", rawError("x", 1, 0, "", "a", "1", "a", "2"), "duplicate_key"},
		{"FieldTruncated", rawError("x", 1, 0, "", "a", "1")[:20], "truncated"},
		{"TrailingByte", append(rawError("x", 1, 0, ""), 0), "trailing_bytes"},
		{"MessageBeyondBytes", append(append(appendString(nil, "x"), 1, 0), 0, 0, 0, 50), "truncated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeError(tc.b)
			wantCode(t, err, errcode.DecodeFailed, tc.reason)
		})
	}
}

func TestErrorPayloadSortsFieldsAndRoundTrips(t *testing.T) {
	// Decoding accepts unsorted fields and returns them sorted.
	got, err := DecodeError(rawError("NOT_LEADER", 3, 1, "", "leader", "h:1", "epoch", "4"))
	if err != nil {
		t.Fatal(err)
	}
	want := &errcode.Error{Code: "NOT_LEADER", Class: errcode.ClassRouting, Retryable: true,
		Fields: []errcode.Field{{Key: "epoch", Value: "4"}, {Key: "leader", Value: "h:1"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// Encoding sorts without touching the caller's error.
	unsorted := &errcode.Error{Code: "c", Class: errcode.ClassInternal, Fields: []errcode.Field{{Key: "z", Value: "1"}, {Key: "a", Value: "2"}}}
	enc, err := AppendError(nil, unsorted)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, rawError("c", 8, 0, "", "a", "2", "z", "1")) || unsorted.Fields[0].Key != "z" {
		t.Fatalf("encoded %x", enc)
	}
	for name, bad := range map[string]*errcode.Error{
		"Nil":       nil,
		"EmptyCode": {Class: 1},
		"BadClass":  {Code: "x", Class: 0},
		"EmptyKey":  {Code: "x", Class: 1, Fields: []errcode.Field{{Key: "", Value: "v"}}},
		"DupKey":    {Code: "x", Class: 1, Fields: []errcode.Field{{Key: "a"}, {Key: "a"}}},
	} {
		if _, err := AppendError(nil, bad); err == nil {
			t.Errorf("%s: encoded an invalid error", name)
		}
	}
}
