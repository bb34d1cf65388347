package certprincipal

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	u, _ := url.Parse("spiffe://acme/svc/billing")
	cert := &x509.Certificate{
		Subject:        pkix.Name{CommonName: "alice", Organization: []string{"Acme"}, OrganizationalUnit: []string{"payments"}},
		EmailAddresses: []string{"alice@acme.example"},
		DNSNames:       []string{"alice.acme.example"},
		URIs:           []*url.URL{u},
	}
	s := Of(cert)
	for _, tc := range []struct{ rule, want, err string }{
		{"", "alice", ""},
		{"cn", "alice", ""},
		{"dn", "CN=alice,OU=payments,O=Acme", ""},
		{"san-email", "alice@acme.example", ""},
		{"san-dns", "alice.acme.example", ""},
		{"san-uri", "spiffe://acme/svc/billing", ""},
		{`regex:^CN=([^,]+),OU=payments,O=Acme$/$1`, "alice", ""},
		{`regex:^CN=(?P<user>[^,]+),OU=(?P<team>[^,]+),.*$/${team}:${user}`, "payments:alice", ""},
		{`regex:^CN=[^,]+,OU=sales,.*$/$1`, "", "does not match"},
		{`regex:^CN=([^,]+).*$/$2`, "", "found nothing"},       // an unknown group expands to ""
		{`regex:^(CN=[^,]+,OU=\w+).*$/$1 x`, "", "whitespace"}, // never a name with a space
	} {
		r, err := Parse(tc.rule)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.rule, err)
		}
		got, err := r.Map(s)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %q, %v; want %q", tc.rule, got, err, tc.want)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrNoPrincipal) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %q, %v; want an ErrNoPrincipal containing %q", tc.rule, got, err, tc.err)
		}
	}
	// A certificate without the field maps to no principal.
	for _, rule := range []string{"cn", "san-email", "san-dns", "san-uri"} {
		r, _ := Parse(rule)
		if got, err := r.Map(Subject{DN: "O=Acme"}); !errors.Is(err, ErrNoPrincipal) {
			t.Errorf("%s on an empty subject: %q, %v", rule, got, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, rule := range []string{"CN", "subject", "regex:", "regex:/x", "regex:abc/", "regex:abc", "regex:(/x", strings.Repeat("a", MaxRuleLen+1)} {
		if _, err := Parse(rule); err == nil {
			t.Errorf("Parse(%q) accepted", rule)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"alice", "svc:billing", "CN=alice,O=Acme", "ünïcode", strings.Repeat("a", MaxNameLen)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a\tb", "a\nb", "a\x00b", "\xff", strings.Repeat("a", MaxNameLen+1), "a\u00a0b"} {
		if err := ValidName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzMap feeds arbitrary rules and subjects: Parse and Map never panic,
// and whatever Map returns without error is a valid principal name.
func FuzzMap(f *testing.F) {
	f.Add("cn", "CN=alice,O=Acme", "alice", "alice@acme.example", "alice.acme.example")
	f.Add("dn", "CN=a b,O=Acme", "a b", "", "")
	f.Add(`regex:^CN=([^,]+),O=Acme$/$1`, "CN=alice,O=Acme", "alice", "", "")
	f.Add(`regex:^(.*)$/${1}${1}`, "CN=x", "x", "", "")
	f.Add("san-email", "", "", "bob@example.com", "")
	f.Fuzz(func(t *testing.T, rule, dn, cn, email, dns string) {
		r, err := Parse(rule)
		if err != nil {
			return
		}
		s := Subject{DN: dn, CN: cn}
		if email != "" {
			s.Emails = []string{email}
		}
		if dns != "" {
			s.DNS = []string{dns}
		}
		name, err := r.Map(s)
		if err != nil {
			if !errors.Is(err, ErrNoPrincipal) || name != "" {
				t.Fatalf("Map = %q, %v", name, err)
			}
			return
		}
		if verr := ValidName(name); verr != nil {
			t.Fatalf("Map returned invalid name %q: %v", name, verr)
		}
	})
}
