// Package pki issues and loads the certificates of Strata's internal mTLS:
// one cluster CA and one certificate per node whose identity names its role
// and node id in a URI SAN (spiffe://strata/<role>/<node-id>). It builds
// TLS 1.3 server and client configurations that require and verify peer
// certificates and re-read certificate files on handshake, so rotation needs
// no restart.
//
// Identity is taken only from the verified URI SAN, matched exactly after
// parsing (never from DNs or request fields).
package pki
