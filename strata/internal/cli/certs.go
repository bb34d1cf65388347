package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/strataio/strata/libs/pki"
)

const certsUsage = `usage:
  strata certs init  --dir DIR [--cn NAME] [--validity 87600h] [--force]
  strata certs issue --dir DIR --role ROLE --node-id ID [--dns a,b] [--ip 10.0.0.1,::1]
                     [--out DIR] [--name NAME] [--validity 8760h]
  strata certs ensure --dir DIR --node ROLE/ID [--node ROLE/ID ...]   (see strata certs ensure --help)

init creates the cluster CA (ECDSA P-256) as DIR/ca.crt and DIR/ca.key.
issue signs a node certificate with the CA in DIR: ECDSA P-256, usable as TLS
server and client certificate, carrying the identity URI SAN
spiffe://strata/<role>/<node-id> plus the DNS and IP SANs given. Roles: metad,
partitiond, coordinatord, gateway, admin. Files: OUT/NAME.crt and OUT/NAME.key
(NAME defaults to <role>-<node-id>, OUT to DIR); keys are written 0600.
`

func runCerts(_ context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand(args, certsUsage, stdout, stderr)
	if !ok {
		return code
	}
	switch sub {
	case "init":
		return certsInit(args[1:], stdout, stderr)
	case "issue":
		return certsIssue(args[1:], stdout, stderr)
	case "ensure":
		return certsEnsure(args[1:], stdout, stderr)
	}
	return unknownSubcommand(stderr, "certs", sub, certsUsage)
}

func certsInit(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata certs init", certsUsage, stderr)
	dir := fs.String("dir", "", "directory for ca.crt and ca.key (required)")
	cn := fs.String("cn", "strata-cluster-ca", "CA common name")
	validity := fs.Duration("validity", 10*365*24*time.Hour, "CA validity")
	force := fs.Bool("force", false, "replace an existing CA (every node certificate must be reissued)")
	if err := parseFlagsOnly(fs, args); err != nil {
		return parseExit(err)
	}
	if *dir == "" {
		return usageError(stderr, fs, "--dir is required")
	}
	if _, err := os.Stat(filepath.Join(*dir, pki.CAKeyFile)); err == nil && !*force {
		fmt.Fprintf(stderr, "strata certs init: %s already holds a CA; use --force to replace it\n", *dir)
		return exitError
	}
	ca, err := pki.NewCA(*cn, *validity)
	if err != nil {
		return fail(stderr, "certs init", err)
	}
	if err := ca.Save(*dir); err != nil {
		return fail(stderr, "certs init", err)
	}
	until := ca.Cert.NotAfter.UTC().Format(time.RFC3339)
	emit(stdout, map[string]any{"cn": *cn, "cert": filepath.Join(*dir, pki.CACertFile), "key": filepath.Join(*dir, pki.CAKeyFile), "not_after": until}, func() {
		fmt.Fprintf(stdout, "CA %q written to %s (%s, %s), valid until %s\n", *cn, *dir, pki.CACertFile, pki.CAKeyFile, until)
	})
	return exitOK
}

func certsIssue(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata certs issue", certsUsage, stderr)
	dir := fs.String("dir", "", "CA directory (required)")
	role := fs.String("role", "", "role: metad, partitiond, coordinatord, gateway, admin (required)")
	nodeID := fs.String("node-id", "", "node id, 1-64 of [A-Za-z0-9._-] (required)")
	dns := fs.String("dns", "localhost", "DNS SANs, comma separated")
	ips := fs.String("ip", "127.0.0.1,::1", "IP SANs, comma separated")
	out := fs.String("out", "", "output directory (default --dir)")
	name := fs.String("name", "", "file name stem (default <role>-<node-id>)")
	validity := fs.Duration("validity", 365*24*time.Hour, "certificate validity")
	if err := parseFlagsOnly(fs, args); err != nil {
		return parseExit(err)
	}
	if *dir == "" || *role == "" || *nodeID == "" {
		return usageError(stderr, fs, "--dir, --role and --node-id are required")
	}
	known := false
	for _, r := range pki.KnownRoles {
		known = known || string(r) == *role
	}
	if !known {
		return usageError(stderr, fs, "unknown role %q", *role)
	}
	if err := pki.ValidNodeID(*nodeID); err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	spec := pki.NodeSpec{Identity: pki.Identity{Role: pki.Role(*role), NodeID: *nodeID}, DNSNames: splitList(*dns), Validity: *validity}
	for _, s := range splitList(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			return usageError(stderr, fs, "bad IP %q", s)
		}
		spec.IPs = append(spec.IPs, ip)
	}
	ca, err := pki.LoadCA(*dir)
	if err != nil {
		return fail(stderr, "certs issue", err)
	}
	if *out == "" {
		*out = *dir
	}
	if *name == "" {
		*name = *role + "-" + *nodeID
	}
	if *name == "ca" || filepath.Base(*name) != *name {
		return usageError(stderr, fs, "bad --name %q", *name)
	}
	if err := os.MkdirAll(*out, 0o700); err != nil {
		return fail(stderr, "certs issue", err)
	}
	files, err := ca.IssueToDir(*out, *name, spec)
	if err != nil {
		return fail(stderr, "certs issue", err)
	}
	emit(stdout, map[string]any{"identity": spec.Identity.URI().String(), "cert": files.Cert, "key": files.Key, "ca": files.CA}, func() {
		fmt.Fprintf(stdout, "issued %s: cert %s, key %s, CA %s\n", spec.Identity.URI(), files.Cert, files.Key, files.CA)
	})
	return exitOK
}
