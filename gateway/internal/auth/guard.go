package auth

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Policy is a topic's access policy (spec 2.1): auth_policy open,
// deny_write, deny_read or acl, and the comma separated read_acl and
// write_acl consulted under acl (`*` is any authenticated principal).
type Policy struct {
	Topic             string
	AuthPolicy        string
	ReadACL, WriteACL string
}

// Allows reports whether principal may access the topic in direction acc.
// An unknown auth_policy value denies (fail closed).
func (p Policy) Allows(acc Access, principal string) bool {
	switch p.AuthPolicy {
	case "", "open":
		return true
	case "deny_read":
		return acc != Read
	case "deny_write":
		return acc != Write
	case "acl":
		list := p.ReadACL
		if acc == Write {
			list = p.WriteACL
		}
		for _, e := range strings.Split(list, ",") {
			e = strings.TrimSpace(e)
			if e == "*" || (e != "" && e == principal) {
				return true
			}
		}
		return false
	}
	return false
}

// allowsRule checks a rule's topic access for p; on denial it returns the
// direction to name. ReadOrWrite passes when a direction p holds is
// allowed, and names read when p holds topic.read, else write.
func (pol Policy) allowsRule(acc Access, p Principal) (Access, bool) {
	if acc != ReadOrWrite {
		return acc, pol.Allows(acc, p.Name)
	}
	if p.Has(TopicRead) && pol.Allows(Read, p.Name) || p.Has(TopicWrite) && pol.Allows(Write, p.Name) {
		return acc, true
	}
	if p.Has(TopicRead) {
		return Read, false
	}
	return Write, false
}

// Topics finds the policies a command's topic parameter names.
type Topics interface {
	// Policies returns the policy of the named topic, or of every visible
	// client topic a '*'/'?' pattern matches. A topic that does not exist
	// yields none (the command then fails on its own); an error (metadata
	// unavailable) fails the command closed.
	Policies(ctx context.Context, topic string) ([]Policy, error)
}

// Guard checks every client command before its handler runs: the one
// place authorization happens (installed on the command table by
// gateway/commands.go).
type Guard struct {
	a      *Authenticator
	topics Topics
}

// NewGuard returns the guard of a, looking topic policies up in topics.
func NewGuard(a *Authenticator, topics Topics) *Guard { return &Guard{a: a, topics: topics} }

// Inline credential fields (spec 5.1): any command may carry them.
const (
	fieldPrincipal = "principal"
	fieldToken     = "auth_token"
)

// Check authorizes cmd on session s and runs it. With enable_sasl off every
// command runs (admin commands are still audited). Otherwise, in order:
// open commands run; inline principal=/auth_token= authenticate the
// connection (and are removed from the request, so no handler or log sees
// the token); an unauthenticated connection gets authentication_required;
// each permission of the command's rule must be held
// (NOT_AUTHORIZED_FOR_OPERATION names the first missing one); then the
// topic's auth_policy (NOT_AUTHORIZED_FOR_TOPIC). Every denial and every
// admin command is one audit log line.
func (g *Guard) Check(ctx context.Context, s *Session, cmd wire.Command, req *wire.Request, batch []byte,
	run func(context.Context) ([]byte, error)) ([]byte, error) {
	principal, token, inline := takeInline(req, cmd)
	ru, known := RuleFor(cmd, req)
	if !g.a.cfg.Enabled {
		if !ru.Admin() {
			return run(ctx) // the data path: not even the batch header is looked at
		}
		return g.audited(ctx, ru, s, cmd, topicOf(req, batch), run)
	}
	topic := topicOf(req, batch)
	if !known {
		return nil, g.deny(s, cmd, topic, errcode.NotAuthorizedForOperation.New("no authorization rule for this command",
			"command", cmd.String(), "permission", "none"))
	}
	if ru.Open {
		return run(ctx)
	}
	if inline {
		p, err := g.a.Verify(ctx, s.client(), principal, token)
		if err != nil {
			s.drop()
			return nil, g.deny(s, cmd, topic, err)
		}
		s.Attach(p)
	}
	p, ok := s.Principal()
	if !ok {
		return nil, g.deny(s, cmd, topic, errcode.AuthenticationRequired.New("authenticate with AUTH or principal= and auth_token= first",
			"command", cmd.String()))
	}
	if err := ru.permitted(p, cmd); err != nil {
		return nil, g.deny(s, cmd, topic, err)
	}
	if ru.Topic != NoTopic && topic != "" {
		pols, err := g.topics.Policies(ctx, topic)
		if err != nil {
			return nil, err
		}
		for _, pol := range pols {
			if acc, ok := pol.allowsRule(ru.Topic, p); !ok {
				return nil, g.deny(s, cmd, topic, errcode.NotAuthorizedForTopic.New("the topic's auth_policy denies this principal",
					"topic", pol.Topic, "operation", acc.String()))
			}
		}
	}
	ctx = metadata.AppendToOutgoingContext(ctx, MetadataKey, p.Name)
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("strata.principal", p.Name))
	return g.audited(ctx, ru, s, cmd, topic, run)
}

// Auth is the AUTH command: `AUTH principal=<p> token=<t>` answers
// `OK principal=<p> authenticated=true` and authenticates the connection.
// A failed AUTH leaves the connection unauthenticated, whatever it was.
func (g *Guard) Auth(ctx context.Context, s *Session, req *wire.Request, out []byte) ([]byte, error) {
	p, err := g.a.Verify(ctx, s.client(), req.Value("principal"), req.Value("token"))
	if err != nil {
		s.drop()
		return nil, g.deny(s, wire.CmdAuth, "", err)
	}
	s.Attach(p)
	g.a.log.Info("audit", "principal", p.Name, "command", "AUTH", "topic", "", "outcome", "authenticated", "client", s.client())
	out = wire.AppendOK(out)
	out = wire.AppendOKField(out, "principal", p.Name)
	return wire.AppendOKField(out, "authenticated", "true"), nil
}

// audited runs the command; an admin command's outcome is one audit line.
func (g *Guard) audited(ctx context.Context, ru Rule, s *Session, cmd wire.Command, topic string,
	run func(context.Context) ([]byte, error)) ([]byte, error) {
	reply, err := run(ctx)
	if ru.Admin() {
		outcome, code := "ok", ""
		if err != nil {
			outcome, code = "error", errcode.CodeOf(err)
		}
		g.a.log.Info("audit", "principal", s.name(), "command", cmd.String(), "topic", topic, "outcome", outcome, "code", code,
			"client", s.client())
	}
	return reply, err
}

// deny writes the audit line of a denial and returns err.
func (g *Guard) deny(s *Session, cmd wire.Command, topic string, err error) error {
	g.a.log.Warn("audit", "principal", s.name(), "command", cmd.String(), "topic", topic, "outcome", "denied",
		"code", errcode.CodeOf(err), "client", s.client())
	return err
}

// takeInline removes the inline credential fields from req and returns
// them; inline is true when either was present. AUTH's own fields are
// principal= and token=, left in place.
func takeInline(req *wire.Request, cmd wire.Command) (principal, token string, inline bool) {
	if req == nil || cmd == wire.CmdAuth {
		return "", "", false
	}
	kept := req.Fields[:0]
	for _, f := range req.Fields {
		switch f.Key {
		case fieldPrincipal:
			principal, inline = f.Value, true
		case fieldToken:
			token, inline = f.Value, true
		default:
			kept = append(kept, f)
		}
	}
	clear(req.Fields[len(kept):])
	req.Fields = kept
	return principal, token, inline
}

// topicOf is the topic a command names: its topic parameter, or the topic
// of a batch PUBLISH's header.
func topicOf(req *wire.Request, batch []byte) string {
	if batch != nil {
		v, err := wire.ParseBatchHeader(batch)
		if err != nil {
			return "" // the handler refuses the batch
		}
		return string(v.Topic())
	}
	if req == nil {
		return ""
	}
	return req.Value("topic")
}
