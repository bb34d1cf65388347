// Package controller holds the decisions metad's Raft leader takes on its
// own: fixing the cluster settings once (INIT_CLUSTER) and, periodically,
// RECONCILE — node expiry by lease, dead replicas out of ISRs, new leaders
// from the ISR. Plan is a pure function of the state and the clock; Run is
// the loop that calls it on the leader and proposes what it returns. The
// FSM re-evaluates every decision at apply time, so a plan made on a
// slightly stale view is still applied correctly.
package controller
