package client

import (
	"os"

	"github.com/strataio/strata/libs/clienttls"
)

// TLSFiles names the PEM files of a TLS connection to the client listener:
// CA verifies the server (system roots when empty), Cert and Key are the
// client certificate for listeners that ask for one.
type TLSFiles = clienttls.ClientFiles

// Environment variables read by TLSFilesFromEnv (and by the strata CLI as
// the defaults of --tls-ca, --tls-cert, --tls-key, --tls-server-name).
const (
	EnvTLSCA         = "STRATA_CLIENT_TLS_CA"
	EnvTLSCert       = "STRATA_CLIENT_TLS_CERT"
	EnvTLSKey        = "STRATA_CLIENT_TLS_KEY"
	EnvTLSServerName = "STRATA_CLIENT_TLS_SERVER_NAME"
)

// TLSFilesFromEnv reads TLSFiles from STRATA_CLIENT_TLS_CA,
// STRATA_CLIENT_TLS_CERT, STRATA_CLIENT_TLS_KEY and
// STRATA_CLIENT_TLS_SERVER_NAME (all optional). They are not STRATA_TLS_*:
// those name a role binary's internal mTLS files, often set in the same
// container where an operator runs the CLI.
func TLSFilesFromEnv() TLSFiles {
	return TLSFiles{CA: os.Getenv(EnvTLSCA), Cert: os.Getenv(EnvTLSCert), Key: os.Getenv(EnvTLSKey), ServerName: os.Getenv(EnvTLSServerName)}
}
