// Package auth is the gateway's client authentication and authorization
// (spec 5): the configured principals and their token hashes, the AUTH
// command and inline principal=/auth_token= fields, the rule table of what
// every client command needs (rules.go), topic ACLs, the per-address
// limiting of failed attempts, and the audit log.
//
// It is hooked into the command table in one place (Guard, installed by
// gateway/commands.go): no handler checks permissions itself. A connection
// holds a Session; a TLS layer that verified a client certificate attaches
// the mapped principal with Authenticator.Certificate and Session.Attach.
//
// Everything is decided in the gateway. The principal travels on the
// internal gRPC hop as metadata (MetadataKey) for traces and audit only:
// the roles behind the gateway trust nothing a client says about itself.
package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/strataio/strata/libs/authtoken"
	"github.com/strataio/strata/libs/errcode"
)

// MetadataKey is the gRPC metadata key carrying the authenticated principal
// on the gateway's internal calls (trace and audit context only).
const MetadataKey = "strata-principal"

// Config is the authentication part of the gateway configuration.
type Config struct {
	// Enabled is enable_sasl: protected commands need an authenticated
	// connection.
	Enabled bool
	// Principals are `<name>:<permission>[+<permission>...]:<token hash>`
	// entries (ParsePrincipal).
	Principals []string
	// FailureDelay is added before answering a failed authentication.
	FailureDelay time.Duration
	// FailureLimit failed authentications per FailureWindow are verified
	// per client address; beyond that attempts are refused unverified
	// until the window ends.
	FailureLimit  int
	FailureWindow time.Duration
}

// Principal is an authenticated identity and its permissions.
type Principal struct {
	Name  string
	perms perms
	hash  authtoken.Hash
}

// Has reports whether p holds permission q (`*` holds every one).
func (p Principal) Has(q Permission) bool { return p.perms.has(q) }

// Permissions is the configured permission list, `*` or names joined by +.
func (p Principal) Permissions() string { return p.perms.String() }

// principalName is what a principal may be called: it must survive the
// comma separated read_acl/write_acl lists and the key=value request text.
var principalName = regexp.MustCompile(`^[A-Za-z0-9._@=-]{1,128}$`)

// ParsePrincipal reads one configured principal:
//
//	<name>:<permission>[+<permission>...]:<token hash>
//
// permissions from admin, topic.read, topic.write, group, transaction, `*`;
// the hash as printed by `strata auth hash-token`.
func ParsePrincipal(entry string) (Principal, error) {
	name, rest, ok := strings.Cut(entry, ":")
	permList, hash, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return Principal{}, fmt.Errorf("principal entry must be <name>:<permission>[+<permission>...]:<token hash>")
	}
	if !principalName.MatchString(name) {
		return Principal{}, fmt.Errorf("principal name %q: 1-128 letters, digits, '.', '_', '@', '=', '-'", name)
	}
	p := Principal{Name: name}
	if permList == "" {
		return Principal{}, fmt.Errorf("principal %s: the permission list is empty (every principal needs an explicit list)", name)
	}
	for _, s := range strings.Split(permList, "+") {
		q, ok := parsePermission(s)
		if !ok {
			return Principal{}, fmt.Errorf("principal %s: unknown permission %q (admin, topic.read, topic.write, group, transaction, *)", name, s)
		}
		p.perms |= q
	}
	h, err := authtoken.Parse(hash)
	if err != nil {
		return Principal{}, fmt.Errorf("principal %s: %w", name, err)
	}
	p.hash = h
	return p, nil
}

// Authenticator holds the configured principals and verifies tokens.
type Authenticator struct {
	cfg        Config
	principals map[string]Principal
	log        *slog.Logger // audit lines
	limiter    *limiter
	// verifying bounds concurrent PBKDF2 verifications: each costs tens of
	// milliseconds of CPU, so unauthenticated clients must not be able to
	// occupy every core with them.
	verifying chan struct{}
	// dummy is verified against for an unknown principal, so the answer
	// takes as long as for a known one with a wrong token.
	dummy authtoken.Hash

	// verified caches successful verifications (SHA-256 of principal and
	// token): inline auth_token= on every command must not cost a PBKDF2
	// run each. Bounded; cleared when full.
	mu       sync.Mutex
	verified map[[32]byte]struct{}
}

const maxVerified = 4096

// New checks cfg and builds the authenticator. Any invalid authentication
// configuration is an error naming the problem: the gateway does not start.
func New(cfg Config, log *slog.Logger) (*Authenticator, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.FailureDelay < 0 || cfg.FailureLimit < 1 || cfg.FailureWindow <= 0 {
		return nil, fmt.Errorf("auth: auth_failure_delay must be >= 0, auth_failure_limit >= 1 and auth_failure_window > 0")
	}
	a := &Authenticator{cfg: cfg, principals: map[string]Principal{}, log: log.With("log", "audit"),
		limiter: newLimiter(cfg.FailureLimit, cfg.FailureWindow), verifying: make(chan struct{}, 2), verified: map[[32]byte]struct{}{}}
	for i, e := range cfg.Principals {
		p, err := ParsePrincipal(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("auth: sasl_principals entry %d: %w", i+1, err)
		}
		if _, dup := a.principals[p.Name]; dup {
			return nil, fmt.Errorf("auth: sasl_principals: principal %s is configured twice", p.Name)
		}
		a.principals[p.Name] = p
		if a.dummy.Key == nil || p.hash.Iterations > a.dummy.Iterations {
			a.dummy = p.hash
		}
	}
	if cfg.Enabled && len(a.principals) == 0 {
		return nil, fmt.Errorf("auth: enable_sasl is true but sasl_principals is empty: no client could authenticate")
	}
	return a, nil
}

// Enabled reports enable_sasl.
func (a *Authenticator) Enabled() bool { return a.cfg.Enabled }

// Certificate returns the configured principal for a name that a TLS layer
// already verified (a client certificate's mapped subject): no token is
// checked. An unknown name is authentication_failed.
func (a *Authenticator) Certificate(name string) (Principal, error) {
	if !a.cfg.Enabled {
		return Principal{}, errAuthDisabled()
	}
	p, ok := a.principals[name]
	if !ok {
		return Principal{}, errcode.AuthenticationFailed.New("the certificate's principal is not configured", "reason", "unknown_principal")
	}
	return p, nil
}

// Verify checks principal and token for a client at addr (its IP counts
// failures). A failure is answered after FailureDelay; past FailureLimit
// failures in FailureWindow an address is refused without verification.
func (a *Authenticator) Verify(ctx context.Context, addr, principal, token string) (Principal, error) {
	if !a.cfg.Enabled {
		return Principal{}, errAuthDisabled()
	}
	if principal == "" || token == "" {
		return Principal{}, a.fail(ctx, "principal_and_token_required")
	}
	if !a.limiter.allow(addr) {
		return Principal{}, a.fail(ctx, "rate_limited")
	}
	p, known := a.principals[principal]
	sum := sha256.Sum256([]byte(principal + "\x00" + token))
	if known && a.cached(sum) {
		return p, nil
	}
	hash := p.hash
	if !known {
		hash = a.dummy
	}
	select {
	case a.verifying <- struct{}{}:
	case <-ctx.Done():
		return Principal{}, errcode.RequestCancelled.New("authentication cancelled", "command", "AUTH")
	}
	ok := hash.Verify(token)
	<-a.verifying
	if !known || !ok {
		a.limiter.failed(addr)
		return Principal{}, a.fail(ctx, "invalid_credentials")
	}
	a.remember(sum)
	return p, nil
}

func (a *Authenticator) cached(sum [32]byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.verified[sum]
	return ok
}

func (a *Authenticator) remember(sum [32]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.verified) >= maxVerified {
		clear(a.verified)
	}
	a.verified[sum] = struct{}{}
}

// fail waits FailureDelay (or until ctx ends) and returns the
// authentication_failed answer; which check failed is a reason field the
// client may see (it names no principal, so an unknown principal and a
// wrong token look the same).
func (a *Authenticator) fail(ctx context.Context, reason string) error {
	if a.cfg.FailureDelay > 0 {
		t := time.NewTimer(a.cfg.FailureDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return errcode.AuthenticationFailed.New("authentication failed", "reason", reason)
}

func errAuthDisabled() error {
	return errcode.AuthenticationFailed.New("client authentication is not enabled on this broker (enable_sasl=false)", "reason", "authentication_disabled")
}
