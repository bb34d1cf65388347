// Package security runs client authentication and authorization (spec 5)
// against the real all-in-one: real metad storing topic ACLs, the strata
// CLI authenticating with --principal/--token.
package security

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/authtoken"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/allinone"
	"github.com/strataio/strata/strata/internal/cli"
)

func TestMain(m *testing.M) { framework.Main(m) }

// TestCLIWithAuthAllInOne: an operator creates an ACL topic, the app
// principal produces and consumes it, a reader outside the ACL and a
// client without credentials are refused, and the app cannot delete.
func TestCLIWithAuthAllInOne(t *testing.T) {
	var principals []string
	for _, p := range []struct{ name, perms string }{
		{"ops", "admin+topic.read"}, {"app", "topic.read+topic.write+group"}, {"reader", "topic.read+group"},
	} {
		h, err := authtoken.New("tok-"+p.name, authtoken.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		principals = append(principals, p.name+":"+p.perms+":"+h.String())
	}
	aio := framework.StartAllInOne(t, func(c *allinone.Config) {
		c.Gateway.EnableSASL = true
		c.Gateway.SASLPrincipals = principals
		c.Gateway.AuthFailureDelay = 0
	})
	addr := aio.Gateways()[0].ClientAddr
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		if code := cli.MainContext(ctx, append(args, "--addr", addr), &out, &errb); code != want {
			t.Fatalf("strata %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	as := func(p string) []string { return []string{"--principal", p, "--token", "tok-" + p} }

	_, errs := run(1, "topic", "list")
	if !strings.Contains(errs, "authentication_required") || !strings.Contains(errs, "command=LIST") {
		t.Fatalf("topic list without credentials: %s", errs)
	}
	_, errs = run(1, append([]string{"topic", "list"}, "--principal", "ops", "--token", "wrong")...)
	if !strings.Contains(errs, "authentication_failed") {
		t.Fatalf("wrong token: %s", errs)
	}
	out, _ := run(0, append([]string{"topic", "create", "orders", "--partitions", "1", "--auth-policy", "acl",
		"--read-acl", "app", "--write-acl", "app"}, as("ops")...)...)
	if !strings.Contains(out, "read_acl:") || !strings.Contains(out, " acl\n") {
		t.Fatalf("topic create printed %s", out)
	}
	run(0, append([]string{"produce", "orders", "--count", "3", "--size", "8", "--acks", "all"}, as("app")...)...)
	out, _ = run(0, append([]string{"consume", "orders", "--max", "3", "--format", "json"}, as("app")...)...)
	if n := strings.Count(out, "\n"); n != 3 {
		t.Fatalf("app consumed %d records: %s", n, out)
	}
	_, errs = run(1, append([]string{"consume", "orders", "--max", "1"}, as("reader")...)...)
	if !strings.Contains(errs, "NOT_AUTHORIZED_FOR_TOPIC") || !strings.Contains(errs, "topic=orders") {
		t.Fatalf("reader outside the ACL: %s", errs)
	}
	// The producer routes with METADATA: ops holds topic.read, which the
	// ACL does not grant it on orders.
	_, errs = run(1, append([]string{"produce", "orders", "--count", "1"}, as("ops")...)...)
	if !strings.Contains(errs, "NOT_AUTHORIZED_FOR_TOPIC") || !strings.Contains(errs, "operation=read") {
		t.Fatalf("ops producing to orders: %s", errs)
	}
	run(0, append([]string{"topic", "create", "open1", "--partitions", "1"}, as("ops")...)...)
	_, errs = run(1, append([]string{"produce", "open1", "--count", "1"}, as("ops")...)...)
	if !strings.Contains(errs, "NOT_AUTHORIZED_FOR_OPERATION") || !strings.Contains(errs, "permission=topic.write") {
		t.Fatalf("ops producing to open1: %s", errs)
	}
	run(0, append([]string{"produce", "open1", "--count", "2"}, as("app")...)...)
	_, errs = run(1, append([]string{"topic", "delete", "orders"}, as("app")...)...)
	if !strings.Contains(errs, "NOT_AUTHORIZED_FOR_OPERATION") || !strings.Contains(errs, "command=DELETE") || !strings.Contains(errs, "permission=admin") {
		t.Fatalf("app deleting: %s", errs)
	}
	run(0, append([]string{"topic", "delete", "orders"}, as("ops")...)...)
}
