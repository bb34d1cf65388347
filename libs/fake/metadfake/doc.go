// Package metadfake is an in-memory fake of metad's MetadataService for the
// tests of every role that talks to metad (partitiond, coordinatord, the
// gateway, libs/metaclient), served over real mTLS gRPC on loopback.
//
// It holds topics and nodes the test edits (PutTopic, PutNode, SetLive,
// ...) and the calls change them as metad does for the rules its callers
// depend on (docs/metad.md): CreateTopic places every partition on one
// partitiond node, RegisterNode / NodeHeartbeat keep leases, ReportCleanup
// clears cleanup_pending_nodes and removes a DELETING topic, and every change
// is a Watch event at the next revision (a stream starts with a snapshot).
// It is not a second metad: no Raft, no lease expiry, no placement policy.
//
// Faults go through the embedded fakerpc.Controls (On, Calls, Requests);
// SetLeader turns the fake into a follower that redirects every call;
// Emit and BreakWatches script Watch streams for tests of a watcher's own
// rules.
package metadfake
