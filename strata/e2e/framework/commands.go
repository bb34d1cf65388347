package framework

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// ExpectedError describes an expected typed error: code, class and
// retryable flag, plus fields that must be present with the given value
// ("*" = any value).
type ExpectedError struct {
	Code      string
	Class     errcode.Class
	Retryable bool
	Fields    map[string]string
}

// Want builds an ExpectedError; kv are field name/value pairs.
func Want(code string, class errcode.Class, retryable bool, kv ...string) *ExpectedError {
	w := &ExpectedError{Code: code, Class: class, Retryable: retryable, Fields: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		w.Fields[kv[i]] = kv[i+1]
	}
	return w
}

// CheckErr fails the test unless err is the typed error w describes, and
// returns it.
func CheckErr(t testing.TB, what string, err error, w ExpectedError) *errcode.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want %s", what, w.Code)
	}
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("%s: untyped error %v, want %s", what, err, w.Code)
	}
	if e.Code != w.Code || e.Class != w.Class || e.Retryable != w.Retryable {
		t.Fatalf("%s: got %s class=%s retryable=%v (%v), want %s class=%s retryable=%v",
			what, e.Code, e.Class, e.Retryable, e, w.Code, w.Class, w.Retryable)
	}
	for k, v := range w.Fields {
		got := e.Field(k)
		if got == "" || (v != "*" && got != v) {
			t.Fatalf("%s: field %s=%q, want %q (%v)", what, k, got, v, e)
		}
	}
	return e
}

// Case is one row of a command table: the SDK text form and either an
// expected typed error or the expected reply (prefix, and OK fields with
// "*" for any value).
type Case struct {
	Cmd    string
	Err    *ExpectedError
	Prefix string
	Fields map[string]string
}

// RunCases sends every case's command in order and checks its answer.
func RunCases(t testing.TB, ctx context.Context, cl *client.Client, cases []Case) {
	t.Helper()
	for _, c := range cases {
		resp, err := cl.Do(ctx, c.Cmd)
		// A retryable answer the row does not expect (a partition being
		// opened, an offsets partition being replayed right after startup)
		// is retried with backoff, as the spec tells clients to.
		for tries := 0; err != nil && errcode.IsRetryable(err) && (c.Err == nil || c.Err.Code != errcode.CodeOf(err)) && tries < 50; tries++ {
			time.Sleep(100 * time.Millisecond)
			resp, err = cl.Do(ctx, c.Cmd)
		}
		if c.Err != nil {
			CheckErr(t, c.Cmd, err, *c.Err)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.Cmd, err)
		}
		txt := resp.Text()
		if !strings.HasPrefix(txt, c.Prefix) {
			t.Fatalf("%s: reply %q, want prefix %q", c.Cmd, txt, c.Prefix)
		}
		if len(c.Fields) > 0 {
			ok, perr := wire.ParseOK(txt)
			if perr != nil {
				t.Fatalf("%s: reply %q: %v", c.Cmd, txt, perr)
			}
			for k, v := range c.Fields {
				if got, has := okField(ok, k); !has || (v != "*" && got != v) {
					t.Fatalf("%s: %s=%q, want %q (reply %q)", c.Cmd, k, got, v, txt)
				}
			}
		}
	}
}

func okField(r wire.OKReply, key string) (string, bool) {
	for _, f := range r.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// OK runs a command that must succeed and returns its reply's fields.
func OK(t testing.TB, ctx context.Context, cl *client.Client, cmd string) map[string]string {
	t.Helper()
	resp, err := cl.Do(ctx, cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	ok, err := wire.ParseOK(resp.Text())
	if err != nil {
		t.Fatalf("%s: reply %q: %v", cmd, resp.Text(), err)
	}
	m := map[string]string{}
	for _, f := range ok.Fields {
		m[f.Key] = f.Value
	}
	return m
}

// CreateTopics sends CREATE with each of args ("topic=orders partitions=3",
// as the text form takes them), then waits until every partition of every
// topic answers LIST_OFFSETS: the first append on a fresh partition may
// otherwise find it still being opened (a retryable leader_not_found).
func CreateTopics(t testing.TB, ctx context.Context, cl *client.Client, args ...string) {
	t.Helper()
	var topics []string
	for _, a := range args {
		topics = append(topics, OK(t, ctx, cl, "CREATE "+a)["topic"])
	}
	for _, topic := range topics {
		Offsets(t, ctx, cl, topic)
	}
}
