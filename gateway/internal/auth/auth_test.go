package auth

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

func TestInvalidConfigFailsWithAClearMessage(t *testing.T) {
	good := principalEntry(t, "ops", "admin")
	hash := good[strings.LastIndex(good, ":")+1:]
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Enabled: true}, "sasl_principals is empty"},
		{Config{Enabled: true, Principals: []string{"ops::" + hash}}, "permission list is empty"},
		{Config{Enabled: true, Principals: []string{"ops:admin+root:" + hash}}, `unknown permission "root"`},
		{Config{Enabled: true, Principals: []string{"ops:admin:plaintext-token"}}, "token hash has the form"},
		{Config{Enabled: true, Principals: []string{"ops:admin"}}, "<name>:<permission>"},
		{Config{Enabled: true, Principals: []string{"o,ps:admin:" + hash}}, "principal name"},
		{Config{Enabled: true, Principals: []string{good, good}}, "configured twice"},
		{Config{Enabled: true, Principals: []string{good}, FailureLimit: 0, FailureWindow: time.Minute}, "auth_failure_limit"},
	} {
		if tc.cfg.FailureWindow == 0 {
			tc.cfg.FailureLimit, tc.cfg.FailureWindow = 1, time.Minute
		}
		_, err := New(tc.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.cfg.Principals, err, tc.want)
		}
	}
	// Invalid entries fail even with enable_sasl off: a configuration that
	// would not start when turned on is wrong now.
	if _, err := New(Config{Principals: []string{"ops:admin:x"}, FailureLimit: 1, FailureWindow: time.Minute}, nil); err == nil {
		t.Error("a malformed principal accepted with enable_sasl off")
	}
	if _, err := New(Config{Enabled: true, Principals: []string{good}, FailureLimit: 1, FailureWindow: time.Minute}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestFailedAttemptsAreDelayedAndLimited: a failure is answered after the
// delay, and past the limit an address is refused unverified (the right
// token included) while another address is not.
func TestFailedAttemptsAreDelayedAndLimited(t *testing.T) {
	entry := principalEntry(t, "ops", "admin")
	a, err := New(Config{Enabled: true, Principals: []string{entry}, FailureDelay: 30 * time.Millisecond, FailureLimit: 3,
		FailureWindow: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	for i := range 3 {
		_, err := a.Verify(ctx, "10.0.0.1:1000", "ops", "wrong")
		if e := errcode.From(err); e.Code != "authentication_failed" || e.Field("reason") != "invalid_credentials" {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("3 failures answered in %v, want each delayed by 30ms", d)
	}
	_, err = a.Verify(ctx, "10.0.0.1:2000", "ops", testToken+"ops")
	if e := errcode.From(err); e.Field("reason") != "rate_limited" {
		t.Fatalf("4th attempt from the same IP (another port): %v, want rate_limited", err)
	}
	if _, err := a.Verify(ctx, "10.0.0.2:1000", "ops", testToken+"ops"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// The window ends: the address may try again.
	a.limiter.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := a.Verify(ctx, "10.0.0.1:3000", "ops", testToken+"ops"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestUnknownPrincipalLooksLikeAWrongToken(t *testing.T) {
	a := newTestAuth(t, true, nil)
	_, e1 := a.Verify(context.Background(), "127.0.0.1:1", "nobody", "x")
	_, e2 := a.Verify(context.Background(), "127.0.0.1:1", "all", "x")
	if errcode.From(e1).Error() != errcode.From(e2).Error() {
		t.Fatalf("unknown principal %v differs from wrong token %v", e1, e2)
	}
}

// TestSessionAndAudit: inline credentials authenticate the connection for
// later commands, a failed AUTH drops it, and denials and admin commands
// are audit lines with principal, command, topic and outcome.
func TestSessionAndAudit(t *testing.T) {
	var buf bytes.Buffer
	a := newTestAuth(t, true, slog.New(slog.NewTextHandler(&buf, nil)))
	g := NewGuard(a, fakeTopics{"t": {AuthPolicy: "acl", ReadACL: "someone"}})
	ctx := context.Background()
	s := NewSession("127.0.0.1:9")
	run := func(context.Context) ([]byte, error) { return nil, nil }

	r := &wire.Request{}
	r.Add("topic", "t")
	r.Add("principal", "all")
	r.Add("auth_token", testToken+"all")
	if _, err := g.Check(ctx, s, wire.CmdCreate, r, nil, run); err != nil {
		t.Fatal(err)
	}
	if !s.Authenticated() {
		t.Fatal("inline credentials did not authenticate the connection")
	}
	r = &wire.Request{}
	r.Add("topic", "t")
	if _, err := g.Check(ctx, s, wire.CmdDelete, r, nil, run); err != nil {
		t.Fatalf("later command on the authenticated connection: %v", err)
	}
	_, err := g.Check(ctx, s, wire.CmdDescribe, r, nil, run)
	if e := errcode.From(err); e.Code != "NOT_AUTHORIZED_FOR_TOPIC" || e.Field("topic") != "t" || e.Field("operation") != "read" {
		t.Fatalf("acl read: %v", err)
	}
	if _, err := g.Auth(ctx, s, authReq("all", "wrong"), nil); err == nil {
		t.Fatal("wrong AUTH accepted")
	}
	if s.Authenticated() {
		t.Fatal("a failed AUTH left the connection authenticated")
	}
	// FIND_COORDINATOR for a transactional id needs transaction.
	g2 := NewGuard(a, fakeTopics{})
	s2 := NewSession("127.0.0.1:9")
	if _, err := g2.Auth(ctx, s2, authReq("p-group", testToken+"p-group"), nil); err != nil {
		t.Fatal(err)
	}
	fr := &wire.Request{}
	fr.Add("transactional_id", "tx")
	_, err = g2.Check(ctx, s2, wire.CmdFindCoordinator, fr, nil, run)
	if e := errcode.From(err); e.Code != "NOT_AUTHORIZED_FOR_OPERATION" || e.Field("permission") != "transaction" {
		t.Fatalf("FIND_COORDINATOR transactional_id as group: %v", err)
	}

	log := buf.String()
	for _, want := range []string{
		`principal=all command=CREATE topic=t outcome=ok`,
		`principal=all command=DELETE topic=t outcome=ok`,
		`level=WARN msg=audit log=audit principal=all command=DESCRIBE topic=t outcome=denied code=NOT_AUTHORIZED_FOR_TOPIC`,
		`principal="" command=AUTH topic="" outcome=denied code=authentication_failed`,
		`command=FIND_COORDINATOR topic="" outcome=denied code=NOT_AUTHORIZED_FOR_OPERATION`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, testToken) {
		t.Error("the audit log holds a token")
	}
}

func TestCertificatePrincipal(t *testing.T) {
	a := newTestAuth(t, true, nil)
	p, err := a.Certificate("p-group")
	if err != nil || !p.Has(Group) || p.Has(Admin) {
		t.Fatalf("Certificate(p-group) = %+v, %v", p, err)
	}
	if _, err := a.Certificate("stranger"); errcode.CodeOf(err) != "authentication_failed" {
		t.Fatalf("unknown certificate principal: %v", err)
	}
	s := NewSession("127.0.0.1:1")
	s.Attach(p)
	g := NewGuard(a, fakeTopics{})
	if _, err := g.Check(context.Background(), s, wire.CmdJoinGroup, &wire.Request{}, nil,
		func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatalf("attached certificate principal: %v", err)
	}
}
