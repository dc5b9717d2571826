package engine

import (
	"sync"
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"
)

// The one actor registry: which actor serves which id, for every kind of actor the engine
// spawns (keys, sessions, accounts, campaigns, stores). A kind's entry type embeds actorRef (or,
// for stores, whose actor is spawned lazily, guards its own pid); the kind's secondary lookups
// (keys by hash, sessions by owner, stores by user) are plain maps beside the registry, guarded
// by the registry's mu and written in the same critical section as the primary map.
//
// mu guards the maps only: it is never held while talking to an actor, waiting for a reply, or
// doing I/O (LOCKS.md). getOrPut is the one exception in spirit: it spawns under the write lock,
// and spawning only registers the actor with hollywood (it sends nothing and waits for nothing).

// actorRef is what a registry entry holds: the actor and the last view it published, read
// without a round trip.
type actorRef[V any] struct {
	pid  *actor.PID
	view atomic.Pointer[V]
}

// Publish stores the actor's newest view (the actors' Publisher interfaces: key.Publisher,
// session.Publisher).
func (r *actorRef[V]) Publish(v V) { r.view.Store(&v) }

func (r *actorRef[V]) actorPID() *actor.PID { return r.pid }

// registryEntry is what a registry holds: anything that names its actor.
type registryEntry interface {
	comparable
	actorPID() *actor.PID
}

// registry maps an id to its actor's entry.
type registry[K comparable, E registryEntry] struct {
	mu   sync.RWMutex
	byID map[K]E
}

func (r *registry[K, E]) init() { r.byID = map[K]E{} }

// get returns id's entry (the zero E, nil, when there is none).
func (r *registry[K, E]) get(id K) E {
	r.mu.RLock()
	e := r.byID[id]
	r.mu.RUnlock()
	return e
}

// put makes e id's entry.
func (r *registry[K, E]) put(id K, e E) {
	r.mu.Lock()
	r.byID[id] = e
	r.mu.Unlock()
}

// delete removes id's entry.
func (r *registry[K, E]) delete(id K) {
	r.mu.Lock()
	delete(r.byID, id)
	r.mu.Unlock()
}

// getOrPut returns id's entry, making it with mk (under the write lock, so at most one is ever
// made) when there is none.
func (r *registry[K, E]) getOrPut(id K, mk func() E) E {
	r.mu.RLock()
	e, ok := r.byID[id]
	r.mu.RUnlock()
	if ok {
		return e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok = r.byID[id]; !ok {
		e = mk()
		r.byID[id] = e
	}
	return e
}

// all is a snapshot of every entry, in no order.
func (r *registry[K, E]) all() []E {
	r.mu.RLock()
	out := make([]E, 0, len(r.byID))
	for _, e := range r.byID {
		out = append(out, e)
	}
	r.mu.RUnlock()
	return out
}

// each calls fn for every entry under the read lock, until fn returns false. fn must only read
// (no actor, no wait, no other registry).
func (r *registry[K, E]) each(fn func(K, E) bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for id, e := range r.byID {
		if !fn(id, e) {
			return
		}
	}
}

// len is the number of entries.
func (r *registry[K, E]) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byID)
}

// pids is a snapshot of every entry's actor.
func (r *registry[K, E]) pids() []*actor.PID {
	all := r.all()
	out := make([]*actor.PID, 0, len(all))
	for _, e := range all {
		if pid := e.actorPID(); pid != nil {
			out = append(out, pid)
		}
	}
	return out
}

// drain empties the registry and returns what it held (Stop: nothing is found any more).
func (r *registry[K, E]) drain() []E {
	r.mu.Lock()
	out := make([]E, 0, len(r.byID))
	for _, e := range r.byID {
		out = append(out, e)
	}
	r.byID = map[K]E{}
	r.mu.Unlock()
	return out
}
