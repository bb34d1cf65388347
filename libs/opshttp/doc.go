// Package opshttp serves the operations HTTP listeners of every Strata
// process exactly as SERVICE-SPEC 4.1/4.2 describe: a health listener with
// only /live and /ready (GET and HEAD; 405 for other methods, 404 for other
// paths, JSON bodies, 503 from /ready until startup finished and every
// check passes) and a metrics listener with only /metrics (Prometheus text
// or OpenMetrics by content negotiation).
//
// Listen binds synchronously so a bind failure fails process startup before
// readiness is published.
package opshttp
