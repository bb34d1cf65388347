package fsm

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// txn stages one command's changes over the committed state. Handlers read
// through it (so they see their own writes) and the FSM commits it only when
// the handler succeeds: a rejected command leaves no trace.
type txn struct {
	st *State

	topics   map[string]*metav1.Topic // nil value: removal
	nodes    map[string]*metav1.Node
	settings *settings
}

type settings struct {
	initialized   bool
	txnShards     uint32
	createdUnixMs int64
}

func newTxn(st *State) *txn {
	return &txn{st: st, topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{}}
}

func (tx *txn) topic(name string) *metav1.Topic {
	if t, ok := tx.topics[name]; ok {
		return t
	}
	return tx.st.topics[name]
}

func (tx *txn) putTopic(t *metav1.Topic) { tx.topics[t.GetConfig().GetName()] = t }

func (tx *txn) removeTopic(name string) { tx.topics[name] = nil }

// topicNames returns every topic name in the staged view, sorted.
func (tx *txn) topicNames() []string {
	names := stagedKeys(tx.st.topics, tx.topics)
	return slices.DeleteFunc(names, func(n string) bool { return tx.topic(n) == nil })
}

// mapLivePartitions replaces, in every live topic of the staged view, each
// partition state next returns anew for (next returns p itself to keep p);
// a topic is written only when one of its partitions changed.
func (tx *txn) mapLivePartitions(next func(p *metav1.PartitionState) *metav1.PartitionState) {
	for _, name := range tx.topicNames() {
		t := tx.topic(name)
		if !Live(t) {
			continue
		}
		var parts []*metav1.PartitionState
		for i, p := range t.GetPartitions() {
			np := next(p)
			if np == p {
				continue
			}
			if parts == nil {
				parts = slices.Clone(t.GetPartitions())
			}
			parts[i] = np
		}
		if parts != nil {
			tx.putTopic(&metav1.Topic{Config: t.GetConfig(), Partitions: parts, CleanupPendingNodes: t.GetCleanupPendingNodes()})
		}
	}
}

// stagedKeys returns the keys of the committed and the staged map, sorted,
// each once.
func stagedKeys[V any](committed, staged map[string]V) []string {
	keys := make([]string, 0, len(committed)+len(staged))
	for k := range committed {
		keys = append(keys, k)
	}
	for k := range staged {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func (tx *txn) node(id string) *metav1.Node {
	if n, ok := tx.nodes[id]; ok {
		return n
	}
	return tx.st.nodes[id]
}

func (tx *txn) putNode(n *metav1.Node) { tx.nodes[n.GetId()] = n }

// nodeIDs returns every node id in the staged view, sorted.
func (tx *txn) nodeIDs() []string { return stagedKeys(tx.st.nodes, tx.nodes) }

// liveNodes returns the live nodes of role in the staged view, sorted by id.
func (tx *txn) liveNodes(role metav1.NodeRole) []*metav1.Node {
	var out []*metav1.Node
	for _, id := range tx.nodeIDs() {
		if n := tx.node(id); n != nil && n.GetLive() && n.GetRole() == role {
			out = append(out, n)
		}
	}
	return out
}

// isLivePartitiond reports whether id is a live partition server.
func (tx *txn) isLivePartitiond(id string) bool {
	n := tx.node(id)
	return n != nil && n.GetLive() && n.GetRole() == metav1.NodeRole_NODE_ROLE_PARTITIOND
}

func (tx *txn) cur() settings {
	if tx.settings != nil {
		return *tx.settings
	}
	return settings{initialized: tx.st.initialized, txnShards: tx.st.txnShards, createdUnixMs: tx.st.createdUnixMs}
}

// commit applies the staged changes to st and returns the watch events they
// produce, numbered from st.revision+1: nodes first (by id), then topics (by
// name). Objects equal to the committed ones produce nothing; a node change
// that only renews the lease (last_heartbeat_unix_ms) changes the state but
// emits no event, so heartbeats do not flood watchers.
func (tx *txn) commit() []*metav1.WatchResponse {
	st := tx.st
	var events []*metav1.WatchResponse
	emit := func(ev *metav1.WatchResponse) {
		st.revision++
		ev.Revision = st.revision
		events = append(events, ev)
	}
	if tx.settings != nil {
		st.initialized, st.txnShards, st.createdUnixMs = tx.settings.initialized, tx.settings.txnShards, tx.settings.createdUnixMs
	}
	commitMap(tx.nodes, st.nodes, emit,
		func(id string) *metav1.WatchResponse {
			return &metav1.WatchResponse{Event: &metav1.WatchResponse_NodeRemoved{NodeRemoved: id}}
		},
		func(n, old *metav1.Node) *metav1.WatchResponse {
			if old != nil && sameBesidesHeartbeat(n, old) {
				return nil
			}
			return &metav1.WatchResponse{Event: &metav1.WatchResponse_NodeUpserted{NodeUpserted: n}}
		})
	commitMap(tx.topics, st.topics, emit,
		func(name string) *metav1.WatchResponse {
			return &metav1.WatchResponse{Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: name}}
		},
		func(t, _ *metav1.Topic) *metav1.WatchResponse {
			return &metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: t}}
		})
	return events
}

// commitMap applies the staged objects (nil: removed) to committed in key
// order and emits what changed: removed's event for a removal, upserted's
// (nil: none) for a new or changed object; equal objects change nothing.
func commitMap[T any, P interface {
	*T
	proto.Message
}](staged, committed map[string]P, emit func(*metav1.WatchResponse), removed func(key string) *metav1.WatchResponse, upserted func(v, old P) *metav1.WatchResponse) {
	for _, k := range sortedKeys(staged) {
		v, old := staged[k], committed[k]
		switch {
		case v == nil && old != nil:
			delete(committed, k)
			emit(removed(k))
		case v == nil, proto.Equal(v, old):
		default:
			committed[k] = v
			if ev := upserted(v, old); ev != nil {
				emit(ev)
			}
		}
	}
}

func sameBesidesHeartbeat(a, b *metav1.Node) bool {
	if a.GetLastHeartbeatUnixMs() == b.GetLastHeartbeatUnixMs() {
		return proto.Equal(a, b)
	}
	c := proto.CloneOf(a)
	c.LastHeartbeatUnixMs = b.GetLastHeartbeatUnixMs()
	return proto.Equal(c, b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
