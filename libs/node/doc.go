// Package node is the process runtime every Strata binary shares: the
// all-in-one hosts four roles, a role binary hosts one, through the same
// code. A process owns the logger, tracing, the metrics registry and the
// operations HTTP listeners; each hosted role gets a RoleEnv with its own
// certificate identity and its own mTLS gRPC server and listener, so the
// all-in-one exercises exactly the internal hops of a split deployment.
//
// Lifecycle (Run): bind every gRPC listener (at construction), bind the
// health and metrics listeners (a bind failure fails startup), check each
// server's role policy covers every method, serve gRPC, start roles in
// order, publish readiness; on shutdown withdraw readiness, stop roles in
// reverse order, then stop servers and listeners.
package node
