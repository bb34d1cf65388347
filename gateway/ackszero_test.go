package gateway

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strataio/strata/libs/wire"
)

// An acks=0 PUBLISH gets no frame even when it fails validation (spec 4.6,
// docs/gateway.md "even on failure"); an invalid acks value is answered,
// since the request then is not known to be acks=0.
func TestAcksZeroFailureSendsNoResponse(t *testing.T) {
	c, cl := startDialed(t)
	cl.SendText("PUBLISH topic=nope producerId=p acks=0 message=x")
	cl.SendText("PUBLISH topic=nope acks=0 message=x") // missing producerId
	cl.SendText("PUBLISH topic=nope producerId=p acks=0 message=x transactional_id=t")
	cl.SendBatch("nope", "0", "y")
	id := cl.SendText("LIST")
	if f := cl.MustRead(); f.Header.RequestID != id {
		t.Fatalf("first frame answers request %d (%q); acks=0 must get no frame", f.Header.RequestID, f.Payload)
	}
	if v := testutil.ToFloat64(c.gw.m.acks.WithLabelValues("0", "rejected")); v != 4 {
		t.Fatalf("rejected acks=0 publishes counted %v, want 4", v)
	}
	bad := cl.SendText("PUBLISH topic=nope producerId=p acks=7 message=x")
	if f := cl.MustRead(); f.Header.RequestID != bad || f.Header.Status != wire.StatusError {
		t.Fatalf("invalid acks answered %+v %q", f.Header, f.Payload)
	}
}
