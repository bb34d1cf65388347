// Package framework runs Strata end-to-end scenarios against a deployment
// seen only from outside: its gateways' Wire v2 client listeners and their
// health and metrics HTTP listeners.
//
// A scenario is written once against the Cluster interface and run by one
// runner per deployment:
//
//   - StartAllInOne: the all-in-one server (the `strata run` code) in the test
//     process, fast and under -race;
//   - StartAllInOneBinary: the `strata run` binary as a process (Killable);
//   - StartProcessCluster: the role binaries as processes on loopback
//     (strata/clustertest; Killable);
//   - External: an already running deployment, e.g. the docker-compose stack,
//     whose gateways STRATA_E2E_GATEWAYS lists.
//
// The rest of the package is what scenarios share to talk to a deployment:
// a session to open (Connect), command tables with typed-error expectations
// (Case, RunCases, CreateTopics), raw Wire v2 frames (RawConn), the ops
// listeners (HTTP, Metrics, WaitReady), and record helpers (PublishAcked,
// CheckAcked, ReadAll, ConsumeAll, ConsumeGroup, Committed).
package framework
