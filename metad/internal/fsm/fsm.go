package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/metad/internal/changefeed"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Result is what Apply returns for every command (raft's ApplyFuture
// Response): the handler's response or its typed error, and the raft index
// and watch revision after the command.
type Result struct {
	Type     Type
	Response any
	Err      error
	Index    uint64
	Revision uint64
}

// Options configure an FSM.
type Options struct {
	// Logger receives apply failures of unknown or undecodable commands.
	Logger *slog.Logger
	// History is the number of watch events kept for resumes
	// (changefeed.DefaultHistory when 0).
	History int
	// SubscriberBuffer is each watcher's event buffer
	// (changefeed.DefaultSubscriberBuffer when 0).
	SubscriberBuffer int
}

// FSM is the raft.FSM of metad. Apply, Snapshot and Restore are called by
// raft; reads and watches by the service.
type FSM struct {
	log *slog.Logger

	mu    sync.RWMutex // guards st and index; held for writing across Apply and Restore
	st    *State
	index uint64 // raft index of the last applied entry

	feed *changefeed.Feed
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM.
func New(o Options) *FSM {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &FSM{log: o.Logger, st: newState(), feed: changefeed.New(o.History, o.SubscriberBuffer)}
}

// Apply applies one committed Raft log entry and returns a *Result. Entries
// that are not commands (raft passes only LogCommand) and commands that do
// not decode produce a Result with an error; they change nothing on any
// replica, so replicas stay identical.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyCommand(l.Index, l.Data)
}

// ApplyCommand applies an encoded command as Raft entry index. It is Apply
// without raft, for tests and tools.
func (f *FSM) ApplyCommand(index uint64, data []byte) *Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	if index > f.index {
		f.index = index
	}
	typ, payload, err := Decode(data)
	if err != nil {
		// Loud: every replica refuses the same entry the same way, but an
		// entry nobody can apply means a bug or a mixed-version cluster.
		f.log.Error("metadata command rejected: cannot decode", "index", index, "type", typ, "err", err)
		return &Result{Type: typ, Err: err, Index: index, Revision: f.st.revision}
	}
	tx := newTxn(f.st)
	resp, err := registry[typ].apply(tx, payload)
	if err != nil {
		if _, typed := errcode.As(err); !typed {
			f.log.Error("metadata command failed with an untyped error", "index", index, "type", typ, "err", err)
			err = errcode.Internal.New(err.Error(), "command", typ.String())
		}
		return &Result{Type: typ, Err: err, Index: index, Revision: f.st.revision}
	}
	events := tx.commit()
	f.feed.Publish(events)
	return &Result{Type: typ, Response: resp, Index: index, Revision: f.st.revision}
}

// Read calls fn with the current state under the read lock. fn must not keep
// the *State; objects it returns are immutable and may be kept.
func (f *FSM) Read(fn func(*State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.st)
}

// AppliedIndex returns the raft index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

// Revision returns the current watch revision.
func (f *FSM) Revision() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.revision
}

// Watch subscribes to changes after revision from. It returns the backlog to
// send first (events after from, or a full snapshot when from is 0 or no
// longer retained) and the subscription with every later event; see
// changefeed. The caller must Close the subscription.
func (f *FSM) Watch(from uint64) ([]*metav1.WatchResponse, *changefeed.Subscription) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.feed.Subscribe(from, func() *metav1.WatchResponse {
		return &metav1.WatchResponse{Revision: f.st.revision, Event: &metav1.WatchResponse_Snapshot{Snapshot: f.st.Snapshot()}}
	})
}

// Close ends every watch subscription.
func (f *FSM) Close() { f.feed.Close() }

// Snapshot captures the state for raft. Objects are immutable, so the capture
// copies only the maps; encoding happens in Persist, off the apply path.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := &State{
		revision: f.st.revision, initialized: f.st.initialized, txnShards: f.st.txnShards, createdUnixMs: f.st.createdUnixMs,
		topics: make(map[string]*metav1.Topic, len(f.st.topics)), nodes: make(map[string]*metav1.Node, len(f.st.nodes)),
	}
	for k, v := range f.st.topics {
		st.topics[k] = v
	}
	for k, v := range f.st.nodes {
		st.nodes[k] = v
	}
	return &snapshot{st: st, index: f.index}, nil
}

// Restore replaces the state with a snapshot. A snapshot of another format
// fails with unsupported_recovery_protocol and leaves the state unchanged.
// Watchers are reset: they resume and get a full snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, index, err := decodeSnapshot(rc)
	if err != nil {
		f.log.Error("metadata snapshot refused", "err", err)
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st, f.index = st, index
	f.feed.Reset(st.revision)
	return nil
}

// EncodeState returns the snapshot encoding of the current state without the
// applied index; equal states encode to equal bytes (tests compare replicas
// with it).
func (f *FSM) EncodeState() []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var buf bytes.Buffer
	if err := EncodeSnapshot(&buf, f.st); err != nil {
		panic(err) // a bytes.Buffer does not fail; marshal of valid messages does not either
	}
	return buf.Bytes()
}

type snapshot struct {
	st    *State
	index uint64
}

// Persist encodes the captured state into raft's snapshot sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := encodeSnapshot(sink, s.st, s.index); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm: close snapshot: %w", err)
	}
	return nil
}

// Release has nothing to free: the capture shares immutable objects.
func (s *snapshot) Release() {}
