package looptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// DefaultWait bounds Eventually.
const DefaultWait = 10 * time.Second

// pollEvery is how often conditions are checked.
const pollEvery = 10 * time.Millisecond

// Condition is what Eventually waits on: a func reporting true, or one
// returning nil, once the awaited state holds (the error says what is
// still missing and ends up in the failure message).
type Condition interface {
	func() bool | func() error
}

// Eventually checks cond every few milliseconds until it holds, failing
// the test after DefaultWait with what and cond's last error.
func Eventually[C Condition](t testing.TB, what string, cond C) {
	t.Helper()
	EventuallyWithin(t, DefaultWait, what, cond)
}

// EventuallyWithin is Eventually with its own bound.
func EventuallyWithin[C Condition](t testing.TB, d time.Duration, what string, cond C) {
	t.Helper()
	check := asCheck(cond)
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
		}
		time.Sleep(pollEvery)
	}
}

var errNotYet = errors.New("condition still false")

func asCheck[C Condition](cond C) func() error {
	if f, ok := any(cond).(func() error); ok {
		return f
	}
	f := any(cond).(func() bool)
	return func() error {
		if f() {
			return nil
		}
		return errNotYet
	}
}

// Context returns a context that ends after d or when the test ends,
// whichever comes first: the bound of a test's calls.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// CheckReady asks http://<healthAddr>/ready once: nil on 200, else why not.
func CheckReady(ctx context.Context, healthAddr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+healthAddr+"/ready", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/ready answered %s", resp.Status)
	}
	return nil
}

// ReadyChecks asks http://<healthAddr>/ready once and returns its status
// code and the checks its body names (a transport failure fails t).
func ReadyChecks(t testing.TB, healthAddr string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + healthAddr + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Checks
}

// WaitReady waits until http://<healthAddr>/ready answers 200, failing the
// test after timeout.
func WaitReady(t testing.TB, healthAddr string, timeout time.Duration) {
	t.Helper()
	EventuallyWithin(t, timeout, healthAddr+" ready", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return CheckReady(ctx, healthAddr)
	})
}
