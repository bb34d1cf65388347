// Package raftnode is metad's Raft node layer: the data directory and its
// format marker, the pebble log/stable store (raftstore) behind raft's log
// cache, the file snapshot store, the FSM, static bootstrap from a voter list
// on first start, and a typed Apply/VerifyLeader API for the service.
//
// The transport is injected (raft.Transport): tests use raft's in-memory
// transport, the service plugs in the mTLS one. Nothing here opens a socket.
//
// Data directory layout:
//
//	<dir>/.strata-raft-format   the marker, "9" (spec 7, 9)
//	<dir>/store/                pebble: Raft log and stable store
//	<dir>/snapshots/            raft.FileSnapshotStore
package raftnode
