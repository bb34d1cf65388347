package auth

// Session is a connection's authentication state. It is used by the
// connection's serving goroutine only (commands run one at a time).
type Session struct {
	addr string
	p    Principal
	ok   bool
}

// NewSession returns the unauthenticated state of a connection from addr
// (the client's host:port; its IP is what failed attempts are counted on).
func NewSession(addr string) *Session { return &Session{addr: addr} }

// Attach authenticates the connection as p: AUTH, inline credentials, or a
// TLS layer with a principal from Authenticator.Certificate.
func (s *Session) Attach(p Principal) { s.p, s.ok = p, true }

// Authenticated reports whether the connection authenticated.
func (s *Session) Authenticated() bool { return s != nil && s.ok }

// Principal returns the authenticated principal (zero when none).
func (s *Session) Principal() (Principal, bool) {
	if s == nil {
		return Principal{}, false
	}
	return s.p, s.ok
}

func (s *Session) drop() { s.p, s.ok = Principal{}, false }

// name is the principal name for logs ("" when unauthenticated).
func (s *Session) name() string {
	if s == nil || !s.ok {
		return ""
	}
	return s.p.Name
}

func (s *Session) client() string {
	if s == nil {
		return ""
	}
	return s.addr
}
