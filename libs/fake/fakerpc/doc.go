// Package fakerpc serves the fakes of Strata's internal gRPC services
// (metadfake, partitionfake, coordfake) and holds the fault controls they
// share.
//
// Serve runs one fake over real mutual TLS on a loopback port through
// libs/rpc, with a server certificate from a pkitest CA, so the code under
// test dials it exactly as it dials a real node. Every call and every
// received stream message passes through the fake's Controls first: a test
// installs a Hook per method (On) that sees the request and may answer
// itself (an error, a different response), wait, or let the call through to
// the fake and change its answer afterwards. This is the idea of franz-go's
// kfake Control, applied to gRPC methods: faults are injected at the
// service boundary, so a fake's own code stays a plain model of the real
// service. Controls also count calls per method and, for the methods a fake
// asks for, keep a copy of every request (failed ones included).
package fakerpc
