package coordinatord

import (
	"sync"
	"sync/atomic"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/libs/errcode"
)

// entry guards one group. Its mu serialises every command on the group,
// including the durable write, so the group's state always matches its
// log; groups of one partition proceed independently (their writes only
// queue on the partition's producer), so a slow commit of one group never
// delays another group's heartbeats.
//
// Lock order: entry.mu, then shard.mu (held briefly); never the reverse.
type entry struct {
	mu sync.Mutex
	// g is nil only while a registration is in flight.
	g *group.Group
	// topics of g, readable without mu (HWM refresh).
	topics atomic.Pointer[[]string]
}

func newEntry(g *group.Group) *entry {
	e := &entry{g: g}
	if g != nil {
		e.setTopics()
	}
	return e
}

// setTopics publishes the topics of e.g. Caller holds e.mu.
func (e *entry) setTopics() {
	t := topicsOf(e.g)
	e.topics.Store(&t)
}

func (e *entry) topicList() []string {
	if t := e.topics.Load(); t != nil {
		return *t
	}
	return nil
}

// snapshot returns the entries of s and whether s serves.
func (s *shard) snapshot() (map[string]*entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*entry, len(s.groups))
	for k, v := range s.groups {
		out[k] = v
	}
	return out, s.state == shardReady
}

// current reports whether e is still the live entry of name in a serving
// shard; with it an entry-locked caller knows the group was not deleted or
// released meanwhile.
func (s *shard) current(name string, e *entry) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != shardReady {
		return false, errcode.CoordinatorNotAvailable.New("offsets partition not serving", "partition", itoa(s.p), "reason", "released")
	}
	return s.groups[name] == e, nil
}

// remove drops e from s when it is still the entry of name.
func (s *shard) remove(name string, e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[name] == e {
		delete(s.groups, name)
	}
}

// existing returns the shard and the locked entry of a group that exists,
// or the typed group-not-found error; the caller unlocks e.mu.
func (r *Role) existing(name string) (*shard, *entry, error) {
	s, e, err := r.acquire(name, false)
	if err != nil {
		return nil, nil, err
	}
	if e == nil {
		return nil, nil, groupNotFound(name)
	}
	return s, e, nil
}

// withGroup runs f on the existing group name and its shard under the
// group's entry lock (the shape of every handler on one existing group);
// a missing group is the typed group-not-found error.
func withGroup[T any](r *Role, name string, f func(*shard, *group.Group) (T, error)) (T, error) {
	s, e, err := r.existing(name)
	if err != nil {
		var zero T
		return zero, err
	}
	defer e.mu.Unlock()
	return f(s, e.g)
}

// acquire resolves the shard of group name and returns its entry locked
// (the caller unlocks e.mu). Without create an unknown group gives a nil
// entry; with create a placeholder entry (g nil) is made that the caller
// must fill or abandon.
func (r *Role) acquire(name string, create bool) (*shard, *entry, error) {
	s, err := r.shardFor(name)
	if err != nil {
		return nil, nil, err
	}
	for {
		s.mu.Lock()
		if s.state != shardReady {
			s.mu.Unlock()
			return nil, nil, errcode.CoordinatorNotAvailable.New("offsets partition not serving", "partition", itoa(s.p), "reason", "released")
		}
		e := s.groups[name]
		if e == nil {
			if !create {
				s.mu.Unlock()
				return s, nil, nil
			}
			e = &entry{}
			s.groups[name] = e
		}
		s.mu.Unlock()
		e.mu.Lock()
		ok, err := s.current(name, e)
		if err != nil {
			e.mu.Unlock()
			return nil, nil, err
		}
		if !ok {
			e.mu.Unlock() // deleted or replaced meanwhile: look again
			continue
		}
		if e.g == nil && !create {
			e.mu.Unlock()
			return s, nil, nil
		}
		return s, e, nil
	}
}

// abandon removes a placeholder entry whose registration failed. Caller
// holds e.mu.
func (s *shard) abandon(name string, e *entry) {
	if e.g == nil {
		s.remove(name, e)
	}
}
