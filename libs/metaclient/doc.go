// Package metaclient is how every non-metad role talks to metad: unary calls
// that follow the Raft leader (a follower's NOT_LEADER answer carries the
// leader's RPC address in field "leader"; unreachable nodes are skipped with
// backoff), a Watch-fed cache of topics and nodes that readers use without
// locks (an immutable View replaced on every change), and a Registrar that
// registers a node and renews its lease.
//
// The cache never goes back in time: events at or below the current
// revision (e.g. from a lagging follower after a reconnect) are ignored.
package metaclient
