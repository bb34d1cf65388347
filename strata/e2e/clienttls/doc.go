// Package clienttls tests TLS on the client listener end to end: the
// all-in-one's gateway with certificates made by `strata certs`, driven by
// the `strata` CLI (flags and environment) and `strata bench`.
package clienttls
