package load

import (
	"crypto/tls"

	"github.com/strataio/strata/libs/clienttls"
)

// ClientTLS builds the client TLS configuration of the CLI and the load
// tool: nil when no TLS flag is set; otherwise TLS 1.2+ verifying the server
// against caFile (the system roots when empty, nothing with insecure), with
// an optional client certificate (libs/clienttls, shared with libs/client).
func ClientTLS(caFile, certFile, keyFile, serverName string, insecure bool) (*tls.Config, error) {
	return clienttls.ClientConfig(clienttls.ClientFiles{CA: caFile, Cert: certFile, Key: keyFile, ServerName: serverName, Insecure: insecure})
}
