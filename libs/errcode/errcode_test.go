package errcode

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadableFormMatchesSDKShape(t *testing.T) {
	e := OffsetOutOfRange.New("", "requested", "3", "earliest", "10", "latest", "12")
	want := "ERROR: OFFSET_OUT_OF_RANGE class=conflict retryable=false earliest=10 latest=12 requested=3"
	if got := e.Error(); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	e = ReplicationUnavailable.New("replication quorum unavailable", "reason", "replica timeout", "offset", "7")
	want = `ERROR: replication_unavailable class=availability retryable=true offset=7 reason="replica timeout" replication quorum unavailable`
	if got := e.Error(); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestParseTextRoundTrips(t *testing.T) {
	for _, e := range []*Error{
		OffsetOutOfRange.New("", "requested", "3", "earliest", "10", "latest", "12"),
		ReplicationUnavailable.New("replication quorum unavailable", "reason", "replica timeout", "offset", "7"),
		NotCoordinator.New("", "host", "127.0.0.1", "port", "9000"),
		InvalidTopicName.New("name has \"quotes\"", "topic", ""),
	} {
		got, ok := ParseText(e.Error())
		if !ok {
			t.Fatalf("ParseText(%q) failed", e.Error())
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Fatalf("round trip of %q (-want +got):\n%s", e.Error(), diff)
		}
	}
	if _, ok := ParseText("OK topic=x"); ok {
		t.Fatal("OK text must not parse as an error")
	}
}

func TestParseTextHonoursExplicitClassAndRetryable(t *testing.T) {
	e, ok := ParseText("ERROR: custom_thing class=availability retryable=true topic=t something broke")
	if !ok || e.Class != ClassAvailability || !e.Retryable || e.Field("topic") != "t" || e.Message != "something broke" {
		t.Fatalf("got %+v", e)
	}
}

func TestLookupDerivesUnregisteredClasses(t *testing.T) {
	cases := map[string]Class{
		"not_authorized_x":   ClassAuthorization,
		"authorization_fail": ClassAuthorization,
		"widget_not_found":   ClassNotFound,
		"widget_missing":     ClassNotFound,
		"missing_widget":     ClassValidation,
		"invalid_widget":     ClassValidation,
		"decode_widget":      ClassValidation,
		"unknown_command":    ClassValidation,
		"distribution_off":   ClassValidation,
		"widget_exploded":    ClassInternal,
		"topic_not_found":    ClassNotFound,
		"NOT_LEADER":         ClassRouting,
	}
	for name, want := range cases {
		if got := Lookup(name).Class(); got != want {
			t.Errorf("Lookup(%q).Class() = %v, want %v", name, got, want)
		}
	}
	if !Lookup("NOT_LEADER").Retryable() || Lookup("widget_exploded").Retryable() {
		t.Error("retryable must be true only for routing and availability")
	}
}

func TestCatalogueRetryableOnlyForRoutingAndAvailability(t *testing.T) {
	for _, c := range All() {
		want := c.Class() == ClassRouting || c.Class() == ClassAvailability
		if c.Retryable() != want {
			t.Errorf("%s: retryable=%v class=%v", c.Name(), c.Retryable(), c.Class())
		}
		if !c.Class().Valid() {
			t.Errorf("%s: invalid class", c.Name())
		}
	}
}

// TestWaitAndRetryCodesAreRetryable: codes whose condition ends by itself,
// so that the same request later succeeds, are spec 7's availability class
// and retryable (topic_cleanup_pending was conflict, retryable=false, while
// its message said to retry).
func TestWaitAndRetryCodesAreRetryable(t *testing.T) {
	for _, c := range []Code{TopicCleanupPending, LifecycleEpochPending, LeaderElectionResultUnavail, UnstableOffsetCommit} {
		if c.Class() != ClassAvailability || !c.Retryable() {
			t.Errorf("%s: class=%v retryable=%v, want availability, retryable", c.Name(), c.Class(), c.Retryable())
		}
	}
}

func TestErrorsIsThroughWrapping(t *testing.T) {
	err := fmt.Errorf("append: %w", StaleProducerEpoch.New("", "producer", "p1"))
	if !errors.Is(err, StaleProducerEpoch) || errors.Is(err, TopicNotFound) {
		t.Fatal("errors.Is must match on code through wrapping")
	}
	if CodeOf(err) != "stale_producer_epoch" || IsRetryable(err) {
		t.Fatal("CodeOf/IsRetryable wrong")
	}
	if From(errors.New("plain")).Code != "internal_error" || From(nil) != nil {
		t.Fatal("From must type untyped errors as internal and keep nil")
	}
}

func TestStatusRoundTripKeepsEverything(t *testing.T) {
	e := GenMismatch.New("stale", "current", "4", "requested", "3", "group", "g", "member", "m-1234")
	got := FromStatus(ToStatus(e))
	if diff := cmp.Diff(e, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if FromStatus(ToStatus(context.DeadlineExceeded)).Code != "request_timeout" {
		t.Fatal("deadline must map to request_timeout")
	}
	if FromStatus(nil) != nil || ToStatus(nil) != nil {
		t.Fatal("nil must stay nil")
	}
}

func TestWithReplacesAndKeepsOrder(t *testing.T) {
	e := TopicNotFound.New("", "topic", "a", "b", "1")
	e2 := e.With("topic", "z").With("a", "0")
	if e.Field("topic") != "a" {
		t.Fatal("With must not mutate the original")
	}
	want := []Field{{"a", "0"}, {"b", "1"}, {"topic", "z"}}
	if diff := cmp.Diff(want, e2.Fields); diff != "" {
		t.Fatal(diff)
	}
}
