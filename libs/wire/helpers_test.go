package wire

import (
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/strataio/strata/libs/errcode"
)

// cmpEmpty treats nil and empty slices as equal where the distinction is not
// part of the wire format.
var cmpEmpty = cmpopts.EquateEmpty()

// wantCode fails t unless err is a typed error with the given code and, when
// reason is not empty, that "reason" field.
func wantCode(t testing.TB, err error, code errcode.Code, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s reason=%s", code.Name(), reason)
	}
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("untyped error %v, want %s", err, code.Name())
	}
	if e.Code != code.Name() || e.Class != code.Class() || e.Retryable != code.Retryable() {
		t.Fatalf("error %v, want code %s", err, code.Name())
	}
	if reason != "" && e.Field("reason") != reason {
		t.Fatalf("error %v, want reason=%s", err, reason)
	}
}
