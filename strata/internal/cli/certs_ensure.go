package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strataio/strata/libs/pki"
)

// certsEnsureUsage documents `strata certs ensure`, the idempotent one-shot
// a container stack runs before its nodes start: a FROM scratch image has no
// shell to chain `certs init` and several `certs issue`, so one command does
// all of it and can be re-run on every `compose up`.
const certsEnsureUsage = `usage:
  strata certs ensure --dir DIR --node ROLE/ID [--node ROLE/ID ...]
                      [--dns a,b] [--ip 127.0.0.1,::1] [--validity 8760h] [--renew-before 720h]

ensure makes DIR hold a cluster CA (created when DIR has none) and one
certificate per --node, named <role>-<id>.crt/.key like 'certs issue'. A node
certificate is kept when it is signed by the CA, carries the identity
spiffe://strata/<role>/<id>, matches its key, has the DNS and IP SANs asked
for and stays valid for longer than --renew-before; otherwise it is reissued.
DNS SANs: the node id (the compose service or host name), localhost and --dns.
`

// ensureNode is one --node ROLE/ID argument.
type ensureNode struct {
	id  pki.Identity
	dns []string
}

// nodeList collects repeated --node flags.
type nodeList []string

func (n *nodeList) String() string     { return strings.Join(*n, ",") }
func (n *nodeList) Set(v string) error { *n = append(*n, v); return nil }

func certsEnsure(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata certs ensure", certsEnsureUsage, stderr)
	dir := fs.String("dir", "", "CA and certificate directory (required)")
	var nodes nodeList
	fs.Var(&nodes, "node", "ROLE/ID of a node certificate to ensure (repeatable, required)")
	dns := fs.String("dns", "", "extra DNS SANs for every node, comma separated")
	ips := fs.String("ip", "127.0.0.1,::1", "IP SANs for every node, comma separated")
	validity := fs.Duration("validity", 365*24*time.Hour, "validity of newly issued node certificates")
	renew := fs.Duration("renew-before", 30*24*time.Hour, "reissue certificates expiring within this margin")
	if err := parseFlagsOnly(fs, args); err != nil {
		return parseExit(err)
	}
	if *dir == "" || len(nodes) == 0 {
		return usageError(stderr, fs, "--dir and at least one --node are required")
	}
	var ipList []net.IP
	for _, s := range splitList(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			return usageError(stderr, fs, "bad IP %q", s)
		}
		ipList = append(ipList, ip)
	}
	var todo []ensureNode
	for _, n := range nodes {
		node, err := parseEnsureNode(n, splitList(*dns))
		if err != nil {
			return usageError(stderr, fs, "%v", err)
		}
		todo = append(todo, node)
	}

	ca, created, err := loadOrCreateCA(*dir)
	if err != nil {
		return fail(stderr, "certs ensure", err)
	}
	// Table output reports as it goes; json and yaml print one document of
	// every action at the end.
	type action struct {
		Identity string `json:"identity"`
		Action   string `json:"action"` // kept, reissued, issued
		Cert     string `json:"cert"`
		Reason   string `json:"reason,omitempty"`
	}
	var actions []action
	table := outputFormat(stdout) == fmtTable
	if created && table {
		fmt.Fprintf(stdout, "CA created in %s\n", *dir)
	}
	for _, n := range todo {
		name := string(n.id.Role) + "-" + n.id.NodeID
		files := pki.Files{CA: filepath.Join(*dir, pki.CACertFile), Cert: filepath.Join(*dir, pki.CertFile(name)), Key: filepath.Join(*dir, pki.KeyFile(name))}
		why := certProblem(files, ca, n, ipList, *renew)
		switch {
		case why == "":
			actions = append(actions, action{n.id.URI().String(), "kept", files.Cert, ""})
			if table {
				fmt.Fprintf(stdout, "kept %s (%s)\n", n.id.URI(), files.Cert)
			}
			continue
		case why != "missing" && table:
			fmt.Fprintf(stdout, "reissuing %s: %s\n", n.id.URI(), why)
		}
		spec := pki.NodeSpec{Identity: n.id, DNSNames: n.dns, IPs: ipList, Validity: *validity}
		if _, err := ca.IssueToDir(*dir, name, spec); err != nil {
			return fail(stderr, "certs ensure", err)
		}
		what := "issued"
		if why != "missing" {
			what = "reissued"
		}
		actions = append(actions, action{n.id.URI().String(), what, files.Cert, why})
		if table {
			fmt.Fprintf(stdout, "issued %s (%s)\n", n.id.URI(), files.Cert)
		}
	}
	if !table {
		emit(stdout, map[string]any{"ca_created": created, "dir": *dir, "nodes": nonNil(actions)}, nil)
	}
	return exitOK
}

// parseEnsureNode parses ROLE/ID; its DNS SANs are the id, localhost and extra.
func parseEnsureNode(s string, extra []string) (ensureNode, error) {
	role, id, ok := strings.Cut(s, "/")
	if !ok {
		return ensureNode{}, fmt.Errorf("--node %q: want ROLE/ID", s)
	}
	if !slices.Contains(pki.KnownRoles, pki.Role(role)) {
		return ensureNode{}, fmt.Errorf("--node %q: unknown role %q", s, role)
	}
	if err := pki.ValidNodeID(id); err != nil {
		return ensureNode{}, fmt.Errorf("--node %q: %v", s, err)
	}
	dns := []string{id, "localhost"}
	for _, d := range extra {
		if !slices.Contains(dns, d) {
			dns = append(dns, d)
		}
	}
	return ensureNode{id: pki.Identity{Role: pki.Role(role), NodeID: id}, dns: dns}, nil
}

// loadOrCreateCA loads the CA of dir, creating one only when dir holds
// neither file: a lone ca.crt or ca.key means a damaged or half-copied PKI,
// and replacing it silently would orphan every issued certificate.
func loadOrCreateCA(dir string) (*pki.CA, bool, error) {
	_, certErr := os.Stat(filepath.Join(dir, pki.CACertFile))
	_, keyErr := os.Stat(filepath.Join(dir, pki.CAKeyFile))
	if errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist) {
		ca, err := pki.NewCA("strata-cluster-ca", 10*365*24*time.Hour)
		if err != nil {
			return nil, false, err
		}
		if err := ca.Save(dir); err != nil {
			return nil, false, err
		}
		return ca, true, nil
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		return nil, false, fmt.Errorf("existing CA in %s unusable (fix it or remove both %s and %s): %w",
			dir, pki.CACertFile, pki.CAKeyFile, err)
	}
	return ca, false, nil
}

// certProblem returns "" when files hold a usable certificate for n, else
// why it must be (re)issued ("missing" when there is none).
func certProblem(files pki.Files, ca *pki.CA, n ensureNode, ips []net.IP, renew time.Duration) string {
	if _, err := os.Stat(files.Cert); errors.Is(err, os.ErrNotExist) {
		return "missing"
	}
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		return "unreadable or key mismatch: " + err.Error()
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "unparsable: " + err.Error()
	}
	if leaf.CheckSignatureFrom(ca.Cert) != nil {
		return "not signed by the current CA"
	}
	if time.Until(leaf.NotAfter) < renew {
		return "expires " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	if got, err := pki.IdentityFromCert(leaf); err != nil || got != n.id {
		return "identity differs"
	}
	for _, d := range n.dns {
		if !slices.Contains(leaf.DNSNames, d) {
			return "missing DNS SAN " + d
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return "missing IP SAN " + ip.String()
		}
	}
	return ""
}
