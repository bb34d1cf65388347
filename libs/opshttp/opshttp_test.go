package opshttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHealthListenerFollowsSpec(t *testing.T) {
	h := NewHealth()
	storageErr := errors.New("disk fenced")
	var storage error
	h.Register("storage", func(context.Context) error { return storage })
	h.Register("topic_metadata", func(context.Context) error { return nil })
	srv, err := Listen("127.0.0.1:0", h.Handler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	base := "http://" + srv.Addr()

	do := func(method, path string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if len(body) > 0 {
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("%s %s: body is not JSON: %q", method, path, body)
			}
		}
		return resp.StatusCode, m
	}

	if code, body := do("GET", "/live"); code != 200 || body["status"] != "live" {
		t.Fatalf("/live = %d %v", code, body)
	}
	if code, body := do("GET", "/ready"); code != 503 || body["status"] != "not_ready" {
		t.Fatalf("/ready before start = %d %v", code, body)
	}
	h.SetStarted(true)
	if code, body := do("GET", "/ready"); code != 200 || body["status"] != "ready" {
		t.Fatalf("/ready = %d %v", code, body)
	} else if checks := body["checks"].(map[string]any); checks["storage"] != "ok" || checks["topic_metadata"] != "ok" || len(checks) != 2 {
		t.Fatalf("checks = %v", checks)
	}
	storage = storageErr
	if code, body := do("GET", "/ready"); code != 503 || body["checks"].(map[string]any)["storage"] != "disk fenced" {
		t.Fatalf("/ready with failing check = %d %v", code, body)
	}
	if code, body := do("HEAD", "/ready"); code != 503 || body != nil {
		t.Fatalf("HEAD /ready = %d %v", code, body)
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		if code, _ := do(m, "/live"); code != 405 {
			t.Fatalf("%s /live = %d, want 405", m, code)
		}
	}
	for _, p := range []string{"/health", "/", "/metrics", "/ready/x"} {
		if code, _ := do("GET", p); code != 404 {
			t.Fatalf("GET %s = %d, want 404", p, code)
		}
	}
}

func TestListenReportsBindFailure(t *testing.T) {
	a, err := Listen("127.0.0.1:0", NewHealth().Handler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	if _, err := Listen(a.Addr(), NewHealth().Handler(), nil); err == nil || !strings.Contains(err.Error(), "bind") {
		t.Fatalf("second bind on %s must fail, got %v", a.Addr(), err)
	}
}

func TestMetricsListenerServesOnlyMetrics(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", MetricsHandler(NewRegistry()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("/metrics = %d %q", resp.StatusCode, body[:min(len(body), 200)])
	}
	resp, err = http.Get("http://" + srv.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("/ = %d, want 404", resp.StatusCode)
	}
}

// TestChecksSharingANameMustAllPass: the roles of the all-in-one register
// the spec's check names each; none may hide another's failure.
func TestChecksSharingANameMustAllPass(t *testing.T) {
	h := NewHealth()
	h.SetStarted(true)
	var replay error
	h.Register("consumer_metadata", func(context.Context) error { return nil })                 // a live coordinator is known
	h.Register("consumer_metadata", func(context.Context) error { return replay })              // its partitions are replayed
	h.Register("storage", func(context.Context) error { return errors.New("b: disk full") })    // failing twice:
	h.Register("storage", func(context.Context) error { return errors.New("a: not writable") }) // both reported
	res, ok := h.Evaluate(context.Background())
	if ok || res.Checks["consumer_metadata"] != "ok" || res.Checks["storage"] != "a: not writable; b: disk full" {
		t.Fatalf("%v %+v", ok, res)
	}
	h = NewHealth()
	h.SetStarted(true)
	h.Register("consumer_metadata", func(context.Context) error { return replay })
	h.Register("consumer_metadata", func(context.Context) error { return nil })
	replay = errors.New("offsets partition 3 corrupt")
	if res, ok := h.Evaluate(context.Background()); ok || res.Checks["consumer_metadata"] != "offsets partition 3 corrupt" || res.Status != "not_ready" {
		t.Fatalf("a later check hid an earlier failure: %v %+v", ok, res)
	}
	replay = nil
	if res, ok := h.Evaluate(context.Background()); !ok || len(res.Checks) != 1 {
		t.Fatalf("%v %+v", ok, res)
	}
}
