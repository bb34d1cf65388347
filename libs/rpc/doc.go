// Package rpc assembles Strata's internal gRPC servers and clients in one
// place: mutual TLS from a pki.Source, a per-method role policy checked
// before any handler runs, panic recovery, typed errors carried as status
// details (errcode.ToStatus / FromStatus), OpenTelemetry stats handlers that
// propagate a client command's trace across every hop, and message size
// limits fit for record batches. In the all-in-one (Links), calls between
// roles of the process skip gRPC's transport and reach the registered
// handlers directly, behind the same checks (links.go, direct.go).
package rpc
