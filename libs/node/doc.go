// Package node is the process runtime every Strata binary shares: the
// all-in-one hosts four roles, a role binary hosts one, through the same
// code (Main). A process owns the logger, tracing, the metrics registry and
// the operations HTTP listeners; each hosted role gets a RoleEnv with its
// own certificate identity and its own mTLS gRPC server and listener, so
// the all-in-one exercises exactly the internal hops of a split deployment.
//
// Modules and services (in the manner of grafana/dskit): a Module is a
// role as data — a name, the modules it needs running first, and an Init
// that builds its Service. InitModules builds them in dependency order;
// `strata run` lists the four roles (metad, then partitiond, coordinatord,
// gateway), a role binary lists one. A role implements Service by
// embedding BasicService, which owns its goroutines: Starting registers
// background loops with Go, Stop cancels the service context, waits for
// every loop, then runs Stopping. No role keeps a cancel function or wait
// group of its own.
//
// Lifecycle (Run): bind every gRPC listener (when the modules are built),
// bind the health and metrics listeners (a bind failure fails startup),
// check each server's role policy covers every method, serve gRPC, start
// services in order, publish readiness; on shutdown withdraw readiness,
// stop services in reverse order within the shutdown bound, then stop
// servers and listeners.
package node
