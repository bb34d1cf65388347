package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/strata/e2e/framework"
)

// txnStreamsSurviveKill9: transactional event appends (TXN_APPEND_STREAM)
// across SIGKILL of the whole deployment. Before the kill, one transaction
// committed v2, v3 of an aggregate, one aborted v4, v5 (so the versions came
// back), and one is left open holding v4 of it and v1 of a new aggregate.
// After the restart the stream-version index, rebuilt from the log and its
// markers, shows v1..v3 with the committed payloads, the coordinator's
// recovery aborts the open transaction, and plain appends then take v4 and
// the new aggregate's v1: nothing aborted or left open is ever read.
func txnStreamsSurviveKill9(t *testing.T, c framework.Killable) {
	ctx, cl := framework.Connect(t, c, 3*time.Minute)
	const topic = "kill9-txn-streams"
	framework.CreateTopics(t, ctx, cl, "topic="+topic+" partitions=2 event_sourcing=true")
	ev := func(key string, v uint64, p string) client.Event {
		return client.Event{Topic: topic, Key: key, Version: v, EventType: "E", Payload: []byte(p)}
	}
	if _, err := cl.AppendStream(ctx, ev("acct", 1, "plain-1")); err != nil {
		t.Fatal(err)
	}
	run := func(id string, events []client.Event, end func(*client.TxnProducer) error) {
		t.Helper()
		p := cl.NewTxnProducer(id)
		if err := p.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if _, err := p.AppendStream(ctx, e); err != nil {
				t.Fatalf("%s: %s v%d: %v", id, e.Key, e.Version, err)
			}
		}
		if end != nil {
			if err := end(p); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
	}
	commit := func(p *client.TxnProducer) error { return p.Commit(ctx) }
	abort := func(p *client.TxnProducer) error { return p.Abort(ctx) }
	run("k9-committed", []client.Event{ev("acct", 2, "committed-2"), ev("acct", 3, "committed-3")}, commit)
	run("k9-aborted", []client.Event{ev("acct", 4, "aborted-4"), ev("acct", 5, "aborted-5")}, abort)
	run("k9-open", []client.Event{ev("acct", 4, "open-4"), ev("fresh", 1, "open-1")}, nil)
	if v, err := cl.StreamVersion(ctx, topic, "acct"); err != nil || v != 3 {
		t.Fatalf("version before the kill = %d %v", v, err)
	}

	cl.Close()
	c.Kill()
	c.Start()
	cl = framework.Dial(t, ctx, c.Gateways()[0].ClientAddr)

	// Once recovery aborted the open transaction, plain appends take its
	// versions; until then they are refused (retryably).
	appendPlain := func(e client.Event) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			_, err := cl.AppendStream(ctx, e)
			if err == nil {
				return
			}
			if x, ok := errcode.As(err); ok && x.Code == errcode.VersionConflict.Name() && x.Field("current") == fmt.Sprint(e.Version) {
				return // an earlier attempt was applied; the read below checks its payload
			}
			if !errcode.IsRetryable(err) || time.Now().After(deadline) {
				t.Fatalf("append %s v%d after the restart: %v", e.Key, e.Version, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	appendPlain(ev("acct", 4, "plain-4"))
	appendPlain(ev("fresh", 1, "plain-fresh-1"))

	check := func(key string, want ...string) {
		t.Helper()
		var r *client.StreamRead
		framework.Retry(t, ctx, func() (err error) {
			r, err = cl.ReadStream(ctx, topic, key, 1, 0)
			return err
		})
		var got []string
		for i, e := range r.Events {
			if e.AggregateVersion != uint64(i+1) {
				t.Fatalf("%s: event %d has version %d", key, i, e.AggregateVersion)
			}
			got = append(got, string(e.Payload))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s after the restart: %q, want %q", key, got, want)
		}
	}
	check("acct", "plain-1", "committed-2", "committed-3", "plain-4")
	check("fresh", "plain-fresh-1")
	// The recovered producer id starts a new transaction.
	run("k9-open", []client.Event{ev("acct", 5, "after-5")}, commit)
	check("acct", "plain-1", "committed-2", "committed-3", "plain-4", "after-5")
}
