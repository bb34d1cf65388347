// Package fsm is metad's replicated state machine: the cluster metadata
// (topics, nodes, partition placement, leaders, ISR, committed HWM
// checkpoints, cluster settings) and the typed command handlers that change
// it.
//
// Commands are encoded with a version byte and a type id (command.go) and
// dispatched through one table of typed handlers (registry.go). Handlers are
// deterministic — time comes from the command, set by the proposer — and
// idempotent where the spec allows; a handler stages its changes in a txn and
// either all of them are committed or, when it returns an error, none are.
// Every rejection is a typed errcode error, returned to the proposer in the
// Result of Apply; an unknown command type is an error too, never skipped.
//
// Stored objects (*metav1.Topic, *metav1.Node) are immutable once committed:
// handlers clone before changing, so readers, snapshots and watch events
// share them without copies.
//
// Every committed change emits watch events (the full new object, or a
// removal) with consecutive revisions into a changefeed.Feed; the FSM
// snapshot carries the revision so resumes work across restores.
package fsm
