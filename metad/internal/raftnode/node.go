package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/metad/internal/fsm"
	"github.com/strataio/strata/metad/internal/raftstore"
)

// Defaults for Config.
const (
	DefaultApplyTimeout   = 10 * time.Second
	DefaultSnapshotRetain = 2
	DefaultLogCacheSize   = 512
)

// Config describes one metad Raft node.
type Config struct {
	// ID is this node's Raft server id; Address its Raft address as peers
	// dial it through the transport.
	ID      raft.ServerID
	Address raft.ServerAddress
	// Dir is the data directory (format marker, store, snapshots).
	Dir string
	// Transport carries Raft RPCs. Once New succeeds the node owns it (raft
	// closes it on Shutdown); when New fails the caller still does.
	Transport raft.Transport
	// FSM is the state machine; New creates one when nil.
	FSM *fsm.FSM
	// Voters is the static cluster: on the first start of an empty
	// directory the node bootstraps with exactly these voters (every node of
	// the cluster must be given the same list). Later starts ignore it. One
	// voter (this node) is the all-in-one's single-voter mode. Empty: never
	// bootstrap (a node that will be added to a running cluster).
	Voters []raft.Server
	// LeaderRPCAddress maps the Raft leader to the address clients should be
	// redirected to (NOT_LEADER field "leader"); default: its Raft address.
	LeaderRPCAddress func(id raft.ServerID, raftAddr raft.ServerAddress) string
	// Logger receives raft's and pebble's logs.
	Logger *slog.Logger
	// Raft tunes raft.Config after defaults (timeouts, snapshot thresholds).
	Raft func(*raft.Config)
	// StoreFS overrides the filesystem of the pebble store (tests).
	StoreFS vfs.FS
	// SnapshotRetain is how many snapshots the file store keeps.
	SnapshotRetain int
}

// Node is a running Raft node with its stores and FSM.
type Node struct {
	cfg    Config
	raft   *raft.Raft
	fsm    *fsm.FSM
	store  *raftstore.Store
	snaps  *raft.FileSnapshotStore
	log    *slog.Logger
	leader func(raft.ServerID, raft.ServerAddress) string
}

// New opens (or creates) the node's directory and starts Raft. It fails with
// unsupported_recovery_protocol when the directory or a snapshot in it has
// another format (spec 7).
func New(cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.Address == "" || cfg.Dir == "" || cfg.Transport == nil {
		return nil, errcode.MissingParameter.New("raft node needs an id, an address, a data directory and a transport", "param", "raft")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FSM == nil {
		cfg.FSM = fsm.New(fsm.Options{Logger: cfg.Logger})
	}
	if cfg.SnapshotRetain <= 0 {
		cfg.SnapshotRetain = DefaultSnapshotRetain
	}
	leaderAddr := cfg.LeaderRPCAddress
	if leaderAddr == nil {
		leaderAddr = func(_ raft.ServerID, a raft.ServerAddress) string { return string(a) }
	}
	if len(cfg.Voters) > 0 && !hasServer(cfg.Voters, cfg.ID) {
		return nil, errcode.InvalidParameter.New("the voter list must include this node", "param", "voters", "id", string(cfg.ID))
	}
	if err := EnsureFormatMarker(cfg.Dir); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("raft_id", string(cfg.ID))

	storeOpts := []raftstore.Option{raftstore.WithLogger(log)}
	if cfg.StoreFS != nil {
		storeOpts = append(storeOpts, raftstore.WithFS(cfg.StoreFS))
	}
	store, err := raftstore.Open(filepath.Join(cfg.Dir, "store"), storeOpts...)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, fsm: cfg.FSM, store: store, log: log, leader: leaderAddr}
	if err := n.start(); err != nil {
		_ = store.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start() error {
	cfg := n.cfg
	hl := NewHCLogger(n.log, "raft", hclog.Info)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain, hl.Named("snapshots"))
	if err != nil {
		return fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	if err := checkSnapshots(snaps); err != nil {
		return err
	}
	n.snaps = snaps
	logs, err := raft.NewLogCache(DefaultLogCacheSize, n.store)
	if err != nil {
		return fmt.Errorf("raftnode: log cache: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = cfg.ID
	rc.Logger = hl
	if cfg.Raft != nil {
		cfg.Raft(rc)
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return errcode.InvalidParameter.New("invalid raft configuration: "+err.Error(), "param", "raft")
	}
	existing, err := raft.HasExistingState(logs, n.store, snaps)
	if err != nil {
		return fmt.Errorf("raftnode: inspect state: %w", err)
	}
	if !existing && len(cfg.Voters) > 0 {
		conf := raft.Configuration{Servers: cfg.Voters}
		if err := raft.BootstrapCluster(rc, logs, n.store, snaps, cfg.Transport, conf); err != nil {
			return fmt.Errorf("raftnode: bootstrap: %w", err)
		}
		n.log.Info("bootstrapped raft cluster", "voters", len(cfg.Voters))
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, n.store, snaps, cfg.Transport)
	if err != nil {
		return fmt.Errorf("raftnode: start raft: %w", err)
	}
	n.raft = r
	return nil
}

// checkSnapshots refuses a directory holding a snapshot of another format
// before raft tries (and, on failure, falls back to older snapshots with an
// untyped error): the spec wants a clear unsupported_recovery_protocol.
func checkSnapshots(snaps *raft.FileSnapshotStore) error {
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("raftnode: list snapshots: %w", err)
	}
	for _, m := range metas {
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			return fmt.Errorf("raftnode: open snapshot %s: %w", m.ID, err)
		}
		err = fsm.CheckSnapshotHeader(rc)
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("raftnode: snapshot %s: %w", m.ID, err)
		}
	}
	return nil
}

func hasServer(servers []raft.Server, id raft.ServerID) bool {
	for _, s := range servers {
		if s.ID == id {
			return true
		}
	}
	return false
}

// FSM returns the node's state machine (reads, watches).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Raft exposes the raft instance for membership changes and stats.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID returns the node's Raft server id.
func (n *Node) ID() raft.ServerID { return n.cfg.ID }

// IsLeader reports whether this node is the Raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's id and redirect address ("" when none
// is known).
func (n *Node) Leader() (raft.ServerID, string) {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return "", ""
	}
	return id, n.leader(id, addr)
}

// notLeader is the typed answer of a follower: NOT_LEADER with the leader's
// address (field "leader"), or no_raft_leader while none is known.
func (n *Node) notLeader() error {
	id, addr := n.Leader()
	if addr == "" {
		return errcode.NoRaftLeader.New("no raft leader is known yet")
	}
	return errcode.NotLeader.New("", "leader", addr, "leader_id", string(id))
}

// Propose encodes payload as a command, replicates it and returns the FSM's
// result once applied on this (leader) node. A handler rejection comes back
// as the handler's typed error, with the Result. On a follower it returns
// NOT_LEADER. When leadership is lost while waiting the outcome is unknown
// and it returns no_raft_leader (retryable: every command is idempotent or
// fenced by an expected revision or epoch).
func (n *Node) Propose(ctx context.Context, payload proto.Message) (*fsm.Result, error) {
	b, err := fsm.Encode(payload)
	if err != nil {
		return nil, err
	}
	return n.ProposeRaw(ctx, b)
}

// ProposeRaw is Propose for an already encoded command.
func (n *Node) ProposeRaw(ctx context.Context, cmd []byte) (*fsm.Result, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	timeout := DefaultApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, errcode.RequestTimeout.New("deadline passed before the command was proposed")
		}
	}
	f := n.raft.Apply(cmd, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		// The command may still commit; the caller learns the outcome by
		// reading (or retrying an idempotent command).
		return nil, errcode.RequestTimeout.New("gave up waiting for the command to commit: " + ctx.Err().Error())
	case err := <-done:
		if err != nil {
			return nil, n.raftError(err)
		}
	}
	res, ok := f.Response().(*fsm.Result)
	if !ok {
		return nil, errcode.Internal.New(fmt.Sprintf("unexpected FSM response %T", f.Response()))
	}
	return res, res.Err
}

func (n *Node) raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return errcode.NoRaftLeader.New("leadership lost while the command was in flight; its outcome is unknown")
	case errors.Is(err, raft.ErrRaftShutdown):
		return errcode.NoRaftLeader.New("raft is shutting down")
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return errcode.RequestTimeout.New("the command could not be enqueued in time")
	}
	return errcode.RaftApplyFailed.New(err.Error())
}

// VerifyLeader confirms, with a round of heartbeats to a quorum, that this
// node is still the leader: a read served after it returns nil is
// linearizable.
func (n *Node) VerifyLeader(ctx context.Context) error {
	return n.wait(ctx, n.raft.VerifyLeader())
}

// Barrier waits until every command committed before it has been applied to
// the local FSM (a new leader calls it before reading its state).
func (n *Node) Barrier(ctx context.Context) error {
	timeout := DefaultApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return n.wait(ctx, n.raft.Barrier(timeout))
}

func (n *Node) wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return errcode.RequestTimeout.New(ctx.Err().Error())
	case err := <-done:
		if err != nil {
			return n.raftError(err)
		}
		return nil
	}
}

// Snapshot asks raft for a snapshot now (tests, operators).
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("raftnode: snapshot: %w", err)
	}
	return nil
}

// Shutdown stops raft (which closes the transport) and the store. The FSM's
// watchers are ended.
func (n *Node) Shutdown() error {
	err := n.raft.Shutdown().Error()
	n.fsm.Close()
	return errors.Join(err, n.store.Close())
}

// CheckStorage is the storage readiness probe: raft runs, the format marker
// is still in place, and the log store answers reads of its stable state and
// its newest entry (a closed or failing pebble, or a damaged tail entry,
// shows here before the next write trips over it). It reads a few keys, so it
// is cheap enough for every /ready poll.
func (n *Node) CheckStorage() error {
	if n.raft.State() == raft.Shutdown {
		return errors.New("raft is shut down")
	}
	b, err := os.ReadFile(filepath.Join(n.cfg.Dir, MarkerFile))
	if err != nil {
		return fmt.Errorf("format marker: %w", err)
	}
	if v := string(bytes.TrimSpace(b)); v != strconv.Itoa(MarkerVersion) {
		return fmt.Errorf("format marker changed to %q", v)
	}
	if _, err := n.store.GetUint64([]byte("CurrentTerm")); err != nil && !errors.Is(err, raftstore.ErrKeyNotFound) {
		return fmt.Errorf("stable store: %w", err)
	}
	last, err := n.store.LastIndex()
	if err != nil {
		return fmt.Errorf("log store: %w", err)
	}
	if last > 0 {
		var l raft.Log
		// A conflicting-suffix delete may remove the entry between the two
		// calls; only a failing read counts.
		if err := n.store.GetLog(last, &l); err != nil && !errors.Is(err, raft.ErrLogNotFound) {
			return fmt.Errorf("log store: %w", err)
		}
	}
	return nil
}

// Stats returns raft's counters for /metrics and debugging.
func (n *Node) Stats() map[string]string { return n.raft.Stats() }
