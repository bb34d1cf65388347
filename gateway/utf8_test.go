package gateway

import "testing"

// TestNonUTF8ValuesAreValidationErrors: names and ids travel to the other
// roles in protobuf strings, which must be UTF-8; a client value that is not
// gets invalid_parameter naming the field, not an internal error from deep
// inside. Record payloads are bytes and may hold anything.
func TestNonUTF8ValuesAreValidationErrors(t *testing.T) {
	_, cl := startDialed(t)
	cl.OK("CREATE topic=orders partitions=1")
	for _, tc := range []struct{ cmd, param string }{
		{"JOIN_GROUP group=bad\xff member=m topic=orders", "group"},
		{"JOIN_GROUP group=g member=m\xfe topic=orders", "member"},
		{"FETCH_OFFSET group=bad\xff topic=orders partition=0", "group"},
		{"REGISTER_GROUP group=g pattern=ord\xff*", "pattern"},
		{"DELETE_GROUP group=\xc3", "group"},
		{"BATCH_COMMIT group=g topic=orders member=m generation=1 P0:1\xff", "positional"},
	} {
		e := cl.Fail(tc.cmd)
		if e.Code != "invalid_parameter" || e.Class.String() != "validation" || e.Retryable || e.Field("param") != tc.param {
			t.Errorf("%q: %v", tc.cmd, e)
		}
	}
	if got := cl.OK("PUBLISH topic=orders producerId=p acks=1 message=bin\xff\xfeary"); got == "" {
		t.Fatal("PUBLISH of a non-UTF-8 payload answered nothing")
	}
}
