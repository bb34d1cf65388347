// Package certprincipal maps a verified client certificate to a principal
// name by a configured rule (gateway.tls_principal_rule). Rules:
//
//	cn                     the subject common name (the default)
//	dn                     the whole subject, RFC 2253 form (CN=alice,O=Acme)
//	san-email | san-dns | san-uri
//	                       the certificate's first SAN of that kind
//	regex:<re>/<replacement>
//	                       <re> (RE2) must match the RFC 2253 subject; the
//	                       principal is <replacement> with $1, ${name}
//	                       expanded (split at the last '/')
//
// The result must be a valid principal name (ValidName): a rule that yields
// nothing or something else maps to no principal, never to a guess.
package certprincipal

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen bounds a principal name in bytes.
const MaxNameLen = 256

// MaxRuleLen bounds a rule's text (a regular expression is compiled from it).
const MaxRuleLen = 1024

type kind int

const (
	kindCN kind = iota
	kindDN
	kindEmail
	kindDNS
	kindURI
	kindRegex
)

// Rule is a parsed mapping rule. The zero value is the cn rule.
type Rule struct {
	kind kind
	re   *regexp.Regexp
	repl string
	text string
}

// Parse reads a rule; "" is the default, cn.
func Parse(s string) (Rule, error) {
	if len(s) > MaxRuleLen {
		return Rule{}, fmt.Errorf("tls_principal_rule longer than %d bytes", MaxRuleLen)
	}
	switch s {
	case "", "cn":
		return Rule{kind: kindCN, text: "cn"}, nil
	case "dn":
		return Rule{kind: kindDN, text: s}, nil
	case "san-email":
		return Rule{kind: kindEmail, text: s}, nil
	case "san-dns":
		return Rule{kind: kindDNS, text: s}, nil
	case "san-uri":
		return Rule{kind: kindURI, text: s}, nil
	}
	body, ok := strings.CutPrefix(s, "regex:")
	if !ok {
		return Rule{}, fmt.Errorf("tls_principal_rule %q: want cn, dn, san-email, san-dns, san-uri or regex:<re>/<replacement>", s)
	}
	i := strings.LastIndexByte(body, '/')
	if i <= 0 || i == len(body)-1 {
		return Rule{}, fmt.Errorf("tls_principal_rule %q: want regex:<re>/<replacement> with both parts non-empty", s)
	}
	re, err := regexp.Compile(body[:i])
	if err != nil {
		return Rule{}, fmt.Errorf("tls_principal_rule %q: %w", s, err)
	}
	return Rule{kind: kindRegex, re: re, repl: body[i+1:], text: s}, nil
}

// String is the rule's text.
func (r Rule) String() string {
	if r.text == "" {
		return "cn"
	}
	return r.text
}

// Subject is what a rule reads from a certificate; Of extracts it.
type Subject struct {
	DN     string // RFC 2253 form, as crypto/x509 prints it
	CN     string
	Emails []string
	DNS    []string
	URIs   []string
}

// Of extracts the fields rules read from a verified certificate.
func Of(c *x509.Certificate) Subject {
	s := Subject{DN: c.Subject.String(), CN: c.Subject.CommonName, Emails: c.EmailAddresses, DNS: c.DNSNames}
	for _, u := range c.URIs {
		s.URIs = append(s.URIs, u.String())
	}
	return s
}

// ErrNoPrincipal is returned when the rule yields nothing.
var ErrNoPrincipal = errors.New("the certificate maps to no principal")

// Map applies the rule to a certificate subject.
func (r Rule) Map(s Subject) (string, error) {
	var name string
	first := func(v []string) string {
		if len(v) > 0 {
			return v[0]
		}
		return ""
	}
	switch r.kind {
	case kindCN:
		name = s.CN
	case kindDN:
		name = s.DN
	case kindEmail:
		name = first(s.Emails)
	case kindDNS:
		name = first(s.DNS)
	case kindURI:
		name = first(s.URIs)
	case kindRegex:
		m := r.re.FindStringSubmatchIndex(s.DN)
		if m == nil {
			return "", fmt.Errorf("%w: subject %q does not match %s", ErrNoPrincipal, s.DN, r.text)
		}
		name = string(r.re.ExpandString(nil, r.repl, s.DN, m))
	}
	if name == "" {
		return "", fmt.Errorf("%w: rule %s found nothing in subject %q", ErrNoPrincipal, r.String(), s.DN)
	}
	if err := ValidName(name); err != nil {
		return "", fmt.Errorf("%w: rule %s: %v", ErrNoPrincipal, r.String(), err)
	}
	return name, nil
}

// ValidName checks a principal name: 1 to MaxNameLen bytes of UTF-8 with no
// whitespace and no control characters (it travels as a principal=<p>
// field of the text form, where whitespace separates fields).
func ValidName(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("principal must be 1-%d bytes, got %d", MaxNameLen, len(s))
	}
	if !utf8.ValidString(s) {
		return errors.New("principal is not UTF-8")
	}
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == utf8.RuneError {
			return fmt.Errorf("principal %q contains whitespace or a control character", s)
		}
	}
	return nil
}
