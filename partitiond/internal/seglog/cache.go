package seglog

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/strataio/strata/partitiond/internal/fsys"
)

// ReaderCache is the node-level bounded cache of open segment readers
// (file descriptors used with pread). The spec's storage metrics describe a
// memory-mapped reader cache; Strata reads with pread through cached
// descriptors instead, which keeps page faults out of the read path and
// makes I/O errors ordinary error values. The counters are the spec's
// segment cache entries/hits/misses/evictions.
//
// An entry in use is never closed under its reader: eviction or retirement
// of a segment marks the entry dead and the last release closes it.
type ReaderCache struct {
	mu    sync.Mutex
	limit int
	lru   list.List // of *cacheEntry, most recent at the front
	m     map[*seg]*cacheEntry

	hits, misses, evictions atomic.Uint64
	inUse                   atomic.Int64
}

type cacheEntry struct {
	key  *seg
	f    fsys.File
	refs int
	elem *list.Element
	dead bool
}

// NewReaderCache returns a cache holding at most limit open readers
// (minimum 1).
func NewReaderCache(limit int) *ReaderCache {
	if limit < 1 {
		limit = 1
	}
	return &ReaderCache{limit: limit, m: make(map[*seg]*cacheEntry)}
}

// CacheStats is a point-in-time view of the cache.
type CacheStats struct {
	Entries   int
	Hits      uint64
	Misses    uint64
	Evictions uint64
	// ActiveReaders counts readers currently reading.
	ActiveReaders int64
}

// Stats returns the cache counters.
func (c *ReaderCache) Stats() CacheStats {
	c.mu.Lock()
	n := len(c.m)
	c.mu.Unlock()
	return CacheStats{Entries: n, Hits: c.hits.Load(), Misses: c.misses.Load(),
		Evictions: c.evictions.Load(), ActiveReaders: c.inUse.Load()}
}

// acquire returns an open reader of s, opening it with open on a miss.
func (c *ReaderCache) acquire(s *seg, open func() (fsys.File, error)) (*cacheEntry, error) {
	c.mu.Lock()
	if e, ok := c.m[s]; ok {
		e.refs++
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		c.hits.Add(1)
		c.inUse.Add(1)
		return e, nil
	}
	c.mu.Unlock()
	c.misses.Add(1)
	f, err := open()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if e, ok := c.m[s]; ok { // another reader opened it meanwhile
		e.refs++
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		_ = f.Close()
		c.inUse.Add(1)
		return e, nil
	}
	e := &cacheEntry{key: s, f: f, refs: 1}
	e.elem = c.lru.PushFront(e)
	c.m[s] = e
	var victims []fsys.File
	for len(c.m) > c.limit {
		back := c.lru.Back()
		v := back.Value.(*cacheEntry)
		if v == e {
			break
		}
		c.removeLocked(v)
		c.evictions.Add(1)
		if v.refs == 0 {
			victims = append(victims, v.f)
		}
	}
	c.mu.Unlock()
	c.inUse.Add(1)
	for _, f := range victims {
		_ = f.Close()
	}
	return e, nil
}

func (c *ReaderCache) removeLocked(e *cacheEntry) {
	c.lru.Remove(e.elem)
	delete(c.m, e.key)
	e.dead = true
}

// release returns a reader taken with acquire.
func (c *ReaderCache) release(e *cacheEntry) {
	c.inUse.Add(-1)
	c.mu.Lock()
	e.refs--
	closeIt := e.dead && e.refs == 0
	c.mu.Unlock()
	if closeIt {
		_ = e.f.Close()
	}
}

// drop forgets s's reader (the segment was deleted, replaced or closed).
func (c *ReaderCache) drop(s *seg) {
	c.mu.Lock()
	e, ok := c.m[s]
	if !ok {
		c.mu.Unlock()
		return
	}
	c.removeLocked(e)
	closeIt := e.refs == 0
	c.mu.Unlock()
	if closeIt {
		_ = e.f.Close()
	}
}
