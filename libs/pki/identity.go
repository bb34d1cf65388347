package pki

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// Role names a Strata process role as it appears in certificate identities.
type Role string

// Roles that hold certificates. RoleAdmin is for operator tools (the CLI's
// cluster-internal commands); RoleClient is reserved for future client mTLS.
const (
	RoleMetad        Role = "metad"
	RolePartitiond   Role = "partitiond"
	RoleCoordinatord Role = "coordinatord"
	RoleGateway      Role = "gateway"
	RoleAdmin        Role = "admin"
)

// KnownRoles lists every role a certificate may carry.
var KnownRoles = []Role{RoleMetad, RolePartitiond, RoleCoordinatord, RoleGateway, RoleAdmin}

func (r Role) valid() bool {
	for _, k := range KnownRoles {
		if r == k {
			return true
		}
	}
	return false
}

// TrustDomain is the SPIFFE-style trust domain of Strata identities.
const TrustDomain = "strata"

// Identity is the verified role and node id of a peer.
type Identity struct {
	Role   Role
	NodeID string
}

// URI returns the identity as a URI SAN: spiffe://strata/<role>/<node-id>.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: "/" + string(id.Role) + "/" + id.NodeID}
}

func (id Identity) String() string { return id.URI().String() }

// ParseIdentity parses a URI SAN into an Identity, exactly: scheme spiffe,
// host strata, path /<known role>/<node id> with a non-empty id of
// [A-Za-z0-9._-] characters.
func ParseIdentity(u *url.URL) (Identity, error) {
	if u == nil || u.Scheme != "spiffe" || u.Host != TrustDomain || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Identity{}, fmt.Errorf("pki: not a strata identity URI: %v", u)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) != 2 {
		return Identity{}, fmt.Errorf("pki: identity path must be /<role>/<node-id>: %q", u.Path)
	}
	id := Identity{Role: Role(parts[0]), NodeID: parts[1]}
	if !id.Role.valid() {
		return Identity{}, fmt.Errorf("pki: unknown role %q", parts[0])
	}
	if err := ValidNodeID(id.NodeID); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// ValidNodeID checks a node id: 1-64 characters of [A-Za-z0-9._-].
func ValidNodeID(s string) error {
	if len(s) == 0 || len(s) > 64 {
		return fmt.Errorf("pki: node id must be 1-64 characters: %q", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("pki: node id has invalid character %q: %q", r, s)
		}
	}
	return nil
}

// IdentityFromCert returns the single Strata identity of a verified leaf
// certificate. A certificate with zero or several strata URI SANs is rejected.
func IdentityFromCert(c *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range c.URIs {
		if u.Scheme != "spiffe" || u.Host != TrustDomain {
			continue
		}
		id, err := ParseIdentity(u)
		if err != nil {
			return Identity{}, err
		}
		found = append(found, id)
	}
	if len(found) != 1 {
		return Identity{}, fmt.Errorf("pki: certificate %q carries %d strata identities, want 1", c.Subject.CommonName, len(found))
	}
	return found[0], nil
}
