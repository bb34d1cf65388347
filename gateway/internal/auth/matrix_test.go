package auth

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/authtoken"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

var update = flag.Bool("update", false, "rewrite the authorization section of docs/security.md")

type fakeTopics map[string]Policy

func (f fakeTopics) Policies(_ context.Context, topic string) ([]Policy, error) {
	if p, ok := f[topic]; ok {
		p.Topic = topic
		return []Policy{p}, nil
	}
	return nil, nil
}

const testToken = "correct-horse"

// Client addresses of the matrix: failed attempts come from badAddr only.
const (
	goodAddr = "127.0.0.1:5555"
	badAddr  = "10.0.0.99:5555"
)

// hashes are computed once per test binary (PBKDF2 at the minimum work).
var hashes = map[string]string{}

func principalEntry(t testing.TB, name, permList string) string {
	t.Helper()
	h, ok := hashes[name]
	if !ok {
		hh, err := authtoken.New(testToken+name, authtoken.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		h = hh.String()
		hashes[name] = h
	}
	return name + ":" + permList + ":" + h
}

// principalName is the configured name of the principal holding perm.
func principalFor(perm string) string {
	if perm == "*" {
		return "all"
	}
	return "p-" + perm
}

func newTestAuth(t testing.TB, enabled bool, log *slog.Logger) *Authenticator {
	t.Helper()
	var entries []string
	for _, p := range []string{"admin", "topic.read", "topic.write", "group", "transaction", "*"} {
		entries = append(entries, principalEntry(t, principalFor(p), p))
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Two failures per address and hour: the bad-token cells come from
	// badAddr and are refused unverified after that, so the matrix does
	// not pay a PBKDF2 run per cell (slow under -race); the valid
	// principals authenticate from goodAddr.
	a, err := New(Config{Enabled: enabled, Principals: entries, FailureLimit: 2, FailureWindow: time.Hour}, log)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// requestFor is a request of cmd naming topic t (and a transactional id
// for FIND_COORDINATOR is not set: the group form).
func requestFor(cmd wire.Command) *wire.Request {
	r := &wire.Request{}
	r.Add("topic", "t")
	return r
}

// cell runs one command for one principal kind and reports "" when the
// guard let it run, else the denial (`code field=value`).
func cell(t testing.TB, g *Guard, cmd wire.Command, k kind) string {
	t.Helper()
	ctx := context.Background()
	s := NewSession(goodAddr)
	if k.how == "bad" || k.how == "bad-inline" {
		s = NewSession(badAddr)
	}
	req := requestFor(cmd)
	switch k.how {
	case "bad":
		if _, err := g.Auth(ctx, s, authReq(principalFor("admin"), "wrong"), nil); errcode.CodeOf(err) != "authentication_failed" {
			t.Fatalf("AUTH with a wrong token: %v", err)
		}
	case "bad-inline":
		req.Add("principal", principalFor("admin"))
		req.Add("auth_token", "wrong")
	case "auth":
		if _, err := g.Auth(ctx, s, authReq(principalFor(k.perms[0]), testToken+principalFor(k.perms[0])), nil); err != nil {
			t.Fatalf("AUTH %s: %v", k.name, err)
		}
	case "inline":
		req.Add("principal", principalFor(k.perms[0]))
		req.Add("auth_token", testToken+principalFor(k.perms[0]))
	}
	ran := false
	_, err := g.Check(ctx, s, cmd, req, nil, func(context.Context) ([]byte, error) {
		ran = true
		if cmd != wire.CmdAuth && (req.Has("auth_token") || req.Has("principal")) {
			t.Errorf("%s: the handler sees the inline credentials", cmd)
		}
		return nil, nil
	})
	if err == nil {
		if !ran {
			t.Fatalf("%s: allowed but not run", cmd)
		}
		return ""
	}
	if ran {
		t.Fatalf("%s: denied after running", cmd)
	}
	e := errcode.From(err)
	out := e.Code
	if e.Code == "authentication_failed" {
		return out
	}
	for _, f := range e.Fields {
		out += " " + f.Key + "=" + f.Value
	}
	return out
}

func authReq(principal, token string) *wire.Request {
	r := &wire.Request{}
	r.Add("principal", principal)
	r.Add("token", token)
	return r
}

// clientCommands is every client command of both wire numberings.
func clientCommands() []wire.Command {
	seen := map[wire.Command]bool{}
	var out []wire.Command
	for _, wt := range []*wire.CommandTable{wire.TableA, wire.TableB} {
		for _, c := range wt.Commands() {
			if !c.IsInternal() && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b wire.Command) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// TestEveryClientCommandHasARule fails on a client command without a rule
// or without a spec row: a new command cannot ship unguarded.
func TestEveryClientCommandHasARule(t *testing.T) {
	cmds := clientCommands()
	if len(cmds) < 45 {
		t.Fatalf("only %d client commands", len(cmds))
	}
	for _, c := range cmds {
		if _, ok := RuleFor(c, &wire.Request{}); !ok {
			t.Errorf("%s has no rule in rules.go", c)
		}
		if _, ok := spec[c]; !ok {
			t.Errorf("%s has no row in the test's spec table", c)
		}
	}
	for c := range rules {
		if c.IsInternal() {
			t.Errorf("%s is internal and must not have a client rule", c)
		}
	}
}

// TestAuthorizationMatrix runs every client command for every principal kind
// (none, a bad token by AUTH and inline, each single permission and `*` by
// AUTH and inline) under every topic policy through the real Guard, and
// compares each cell with the spec-derived expectation: 0 unexpected allows
// and 0 unexpected denials.
func TestAuthorizationMatrix(t *testing.T) {
	a := newTestAuth(t, true, nil)
	cells, allows, denials := 0, 0, 0
	for _, pol := range policies {
		for _, k := range kinds {
			name := "x"
			if len(k.perms) > 0 {
				name = principalFor(k.perms[0])
			}
			g := NewGuard(a, fakeTopics{"t": pol.pol(name)})
			for _, cmd := range clientCommands() {
				cells++
				got, want := cell(t, g, cmd, k), expect(cmd, k, pol.name)
				switch {
				case got == want:
				case got == "":
					allows++
					t.Errorf("unexpected allow: %s, principal %s, policy %s (want %s)", cmd, k.name, pol.name, want)
				default:
					denials++
					t.Errorf("unexpected denial: %s, principal %s, policy %s: got %q, want %q", cmd, k.name, pol.name, got, want)
				}
			}
		}
	}
	t.Logf("%d cells (%d commands × %d principal kinds × %d topic policies): %d unexpected allows, %d unexpected denials",
		cells, len(clientCommands()), len(kinds), len(policies), allows, denials)
}

// TestAuthDisabledAllowsEverything: with enable_sasl off every command runs
// whatever the credentials and the topic policy, and AUTH fails (a client
// configured with credentials learns the broker does not check them).
func TestAuthDisabledAllowsEverything(t *testing.T) {
	a := newTestAuth(t, false, nil)
	for _, pol := range policies {
		g := NewGuard(a, fakeTopics{"t": pol.pol("x")})
		for _, cmd := range clientCommands() {
			for _, k := range []kind{{name: "none", how: "none"}, {name: "bad inline", how: "bad-inline"}} {
				if got := cell(t, g, cmd, k); got != "" {
					t.Errorf("enable_sasl=false: %s (%s, policy %s) denied: %s", cmd, k.name, pol.name, got)
				}
			}
		}
	}
	if _, err := NewGuard(a, nil).Auth(context.Background(), NewSession("127.0.0.1:1"), authReq("all", testToken+"all"), nil); errcode.CodeOf(err) != "authentication_failed" {
		t.Fatalf("AUTH with enable_sasl=false: %v", err)
	}
}

// TestSecurityDocIsCurrent renders the rule table and the matrix (computed
// by running the Guard, like TestAuthorizationMatrix) and compares them with
// the generated section of docs/security.md; -update rewrites it.
func TestSecurityDocIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "security.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gen := renderDoc(t)
	begin, end := []byte(docBegin), []byte(docEnd)
	i, j := bytes.Index(doc, begin), bytes.Index(doc, end)
	if i < 0 || j < i {
		if !*update {
			t.Fatalf("docs/security.md has no %q ... %q section; run with -update", docBegin, docEnd)
		}
		doc = append(doc, []byte("\n"+docBegin+"\n"+docEnd+"\n")...)
		i, j = bytes.Index(doc, begin), bytes.Index(doc, end)
	}
	cur := doc[i+len(begin) : j]
	if string(cur) == gen {
		return
	}
	if !*update {
		t.Fatalf("docs/security.md's authorization tables are stale; rewrite them with\n\tgo test github.com/strataio/strata/gateway/internal/auth -run TestSecurityDocIsCurrent -update")
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), gen...), doc[j:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	docBegin = "<!-- BEGIN GENERATED: gateway/internal/auth TestSecurityDocIsCurrent -->"
	docEnd   = "<!-- END GENERATED -->"
)

func renderDoc(t *testing.T) string {
	var b strings.Builder
	b.WriteString("\n\n#### What each command needs (gateway/internal/auth/rules.go)\n\n")
	b.WriteString("| command | permissions (all required, checked in order) | topic auth_policy check |\n|---|---|---|\n")
	for _, c := range clientCommands() {
		ru, _ := RuleFor(c, &wire.Request{})
		needs := "none (no authentication)"
		if !ru.Open {
			var ps []string
			for _, p := range ru.Perms {
				ps = append(ps, "`"+p.String()+"`")
			}
			sep := " + "
			if ru.Topic == ReadOrWrite {
				sep = " or "
			}
			needs = strings.Join(ps, sep)
		}
		if c == wire.CmdFindCoordinator {
			needs += "; `transaction` with transactional_id"
		}
		topic := "—"
		if ru.Topic != NoTopic {
			topic = ru.Topic.String()
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c, needs, topic)
	}

	a := newTestAuth(t, true, nil)
	b.WriteString("\n#### Matrix, topic auth_policy open (TestAuthorizationMatrix)\n\n")
	b.WriteString("`ok` runs the command; `auth` is `authentication_required`; `failed` is `authentication_failed`; " +
		"a permission name is `NOT_AUTHORIZED_FOR_OPERATION permission=<it>`. Columns: the principal's one permission, " +
		"authenticated by AUTH (inline `principal=` + `auth_token=` gives the same answers, except that a bad inline token " +
		"is `failed`).\n\n")
	cols := []kind{kinds[0], kinds[1], kinds[2]}
	for _, k := range kinds {
		if k.how == "auth" {
			cols = append(cols, k)
		}
	}
	b.WriteString("| command |")
	for _, k := range cols {
		fmt.Fprintf(&b, " %s |", strings.ReplaceAll(k.name, "*", "`*`"))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	g := NewGuard(a, fakeTopics{"t": {AuthPolicy: "open"}})
	for _, c := range clientCommands() {
		fmt.Fprintf(&b, "| %s |", c)
		for _, k := range cols {
			fmt.Fprintf(&b, " %s |", short(cell(t, g, c, k)))
		}
		b.WriteString("\n")
	}

	b.WriteString("\n#### Topic policies (after the permissions pass)\n\n")
	b.WriteString("For a principal holding the command's permissions; `topic` is `NOT_AUTHORIZED_FOR_TOPIC operation=<read|write>`. " +
		"METADATA passes when the policy allows a direction the principal holds (a denial names read when it holds topic.read).\n\n")
	b.WriteString("| auth_policy | read (topic.read commands) | write (topic.write commands) |\n|---|---|---|\n")
	for _, pol := range policies {
		p := pol.pol("all")
		fmt.Fprintf(&b, "| %s (read_acl=%q, write_acl=%q) | %s | %s |\n", pol.name, p.ReadACL, p.WriteACL,
			okOr(p.Allows(Read, "all")), okOr(p.Allows(Write, "all")))
	}
	b.WriteString("\n")
	return b.String()
}

func okOr(ok bool) string {
	if ok {
		return "ok"
	}
	return "topic"
}

func short(denial string) string {
	switch {
	case denial == "":
		return "ok"
	case strings.HasPrefix(denial, "authentication_required"):
		return "auth"
	case strings.HasPrefix(denial, "authentication_failed"):
		return "failed"
	case strings.HasPrefix(denial, "NOT_AUTHORIZED_FOR_OPERATION"):
		return denial[strings.LastIndex(denial, "=")+1:]
	}
	return denial
}
