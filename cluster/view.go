package cluster

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go/jetstream"
)

// leaseValue is a lease key's value: who holds the partition and how far it is.
type leaseValue struct {
	V        int       `json:"v"`
	Node     string    `json:"node"`
	Instance string    `json:"instance"` // the holding process (a node restarted under its id is another)
	State    string    `json:"state"`    // starting, active, releasing
	Since    time.Time `json:"since"`    // when this holder took it
}

// Lease states as written in the bucket.
const (
	leaseStarting  = "starting"
	leaseActive    = "active"
	leaseReleasing = "releasing"
)

// nodeValue is a node's heartbeat.
type nodeValue struct {
	V          int       `json:"v"`
	ID         string    `json:"id"`
	Instance   string    `json:"instance"`
	State      string    `json:"state"` // up, leaving
	Partitions int       `json:"partitions"`
	Sessions   int       `json:"sessions"`
	Started    time.Time `json:"started"`
}

const (
	nodeUp      = "up"
	nodeLeaving = "leaving"
)

// wireVersion versions the lease, heartbeat and forwarding formats: a node reads every version
// up to its own, so two adjacent releases run side by side during a rolling upgrade.
const wireVersion = 1

func leaseKey(p int) string { return "p." + strconv.Itoa(p) }

func partitionOfKey(k string) (int, bool) {
	s, ok := strings.CutPrefix(k, "p.")
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(s)
	return p, err == nil
}

// nodeKey encodes a node id (host:port has a colon, which KV keys refuse) reversibly.
func nodeKey(id string) string { return "n." + base64.RawURLEncoding.EncodeToString([]byte(id)) }

// nodeIDOfKey is nodeKey's inverse.
func nodeIDOfKey(k string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, "n."))
	return string(b), err == nil
}

type leaseSeen struct {
	value   leaseValue
	rev     uint64
	seen    time.Time // local monotonic time the watcher delivered it
	written time.Time // the server's timestamp of the entry (its clock: a guard only)
	deleted bool      // released gracefully: free now
	lapsed  bool      // the server's lapse marker (value: the last holder's): not held now
}

type nodeSeen struct {
	value   nodeValue
	rev     uint64
	seen    time.Time
	upSince time.Time // since when it heartbeats without a gap longer than the TTL
	deleted bool
}

// view is what this node knows of the buckets, kept current by two watchers. It is advice:
// every change of ownership is a revision-checked write, so a stale view costs a failed write,
// never two owners.
type view struct {
	ttl time.Duration

	mu        sync.Mutex
	leases    []*leaseSeen         // by partition; nil: never seen
	nodes     map[string]*nodeSeen // by node id (kept after they go, for the snapshot)
	changed   chan struct{}        // closed and replaced on every change of ownership
	wake      func()               // tells the node's loop that balancing may have work
	lastAny   time.Time            // last entry of the nodes bucket (heartbeats flow every tick)
	lastLease time.Time            // last entry of the leases bucket (renewals flow every tick)
}

func newView(partitions int, ttl time.Duration, wake func()) *view {
	return &view{ttl: ttl, leases: make([]*leaseSeen, partitions), nodes: map[string]*nodeSeen{},
		changed: make(chan struct{}), wake: wake}
}

// notifyLocked wakes whoever waits for a change (held requests) and the balancing loop.
func (v *view) notifyLocked() {
	close(v.changed)
	v.changed = make(chan struct{})
	if v.wake != nil {
		v.wake()
	}
}

// changes returns a channel closed at the next change of ownership.
func (v *view) changes() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

func (v *view) applyLease(e jetstream.KeyValueEntry) {
	p, ok := partitionOfKey(e.Key())
	if !ok || p >= len(v.leases) {
		return
	}
	s := &leaseSeen{rev: e.Revision(), seen: time.Now(), written: e.Created()}
	switch e.Operation() {
	case jetstream.KeyValuePut:
		if json.Unmarshal(e.Value(), &s.value) != nil {
			return
		}
	case jetstream.KeyValuePurge: // the marker the server writes when the key lapses (MaxAge)
		s.lapsed = true
	default:
		s.deleted = true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastLease = s.seen
	old := v.leases[p]
	if s.lapsed && old != nil {
		s.value = old.value // who held it last (it retakes its own first)
	}
	if old != nil && old.rev > s.rev {
		return // an older entry delivered late (a watcher restarted)
	}
	if old != nil && old.rev == s.rev {
		return // delivered again (a watcher restarted): not a renewal, keep when it was seen
	}
	v.leases[p] = s
	// A renewal that changes nothing but the revision is not a change of ownership.
	if old == nil || old.deleted != s.deleted || old.lapsed != s.lapsed || old.value.Instance != s.value.Instance || old.value.State != s.value.State {
		v.notifyLocked()
	}
}

func (v *view) applyNode(e jetstream.KeyValueEntry) {
	s := &nodeSeen{rev: e.Revision(), seen: time.Now()}
	id := ""
	if e.Operation() == jetstream.KeyValuePut {
		if json.Unmarshal(e.Value(), &s.value) != nil {
			return
		}
		id = s.value.ID
	} else {
		var ok bool
		if id, ok = nodeIDOfKey(e.Key()); !ok {
			return
		}
		s.deleted = true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastAny = s.seen
	old := v.nodes[id]
	if old != nil && old.rev >= s.rev {
		return
	}
	s.upSince = s.seen
	if old != nil && !old.deleted && old.value.Instance == s.value.Instance && s.seen.Before(old.seen.Add(v.ttl)) {
		s.upSince = old.upSince
	}
	if old != nil && s.deleted {
		s.value = old.value // keep what it last said, for the snapshot
		s.value.State = nodeLeaving
	}
	v.nodes[id] = s
	if old == nil || old.deleted != s.deleted || old.value.State != s.value.State || old.value.Instance != s.value.Instance {
		v.notifyLocked()
	}
}

// lease returns what is known of partition p's lease (nil: never seen).
func (v *view) lease(p int) *leaseSeen {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.leases[p]
}

// alive tells whether a lease entry is still within its TTL as seen here.
func (v *view) alive(s *leaseSeen, now time.Time) bool {
	return s != nil && !s.deleted && !s.lapsed && now.Before(s.seen.Add(v.ttl))
}

// lapsedAt is when a lease that is not alive lapsed, as seen here: its marker's arrival, else
// its last renewal seen + the TTL.
func (v *view) lapsedAt(s *leaseSeen) time.Time {
	if s.lapsed {
		return s.seen
	}
	return s.seen.Add(v.ttl)
}

// nodeAliveLocked tells whether a node heartbeats and is not leaving.
func (v *view) nodeAliveLocked(id string, now time.Time) bool {
	s := v.nodes[id]
	return s != nil && !s.deleted && s.value.State == nodeUp && now.Before(s.seen.Add(v.ttl))
}

// liveNodes are the ids of the nodes that heartbeat and are not leaving, sorted.
func (v *view) liveNodes(now time.Time) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var ids []string
	for id := range v.nodes {
		if v.nodeAliveLocked(id, now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// instanceGone tells whether the view knows process instance is no more: its node's
// heartbeat was deleted or lapsed, or no node heartbeats under it (a node restarted under the
// same id is another instance).
func (v *view) instanceGone(instance string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.nodes {
		if s.value.Instance == instance {
			return s.deleted
		}
	}
	return true
}

// nodeFresh tells whether node id's heartbeat was seen within d (a live node's come every
// renewal interval).
func (v *view) nodeFresh(id string, now time.Time, d time.Duration) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.nodes[id]
	return v.nodeAliveLocked(id, now) && now.Sub(s.seen) < d
}

// nodeUpSince is since when a live node heartbeats without a gap (zero if it is not live).
func (v *view) nodeUpSince(id string, now time.Time) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.nodeAliveLocked(id, now) {
		return time.Time{}
	}
	return v.nodes[id].upSince
}

// watch feeds a bucket's entries to apply until ctx ends; ready is closed once the initial
// values are in. The watcher is nats.go's ordered consumer, which recreates itself after a
// server loss; if it closes anyway, or restart is signalled (the node saw no heartbeat for
// too long), it is made again.
func watch(ctx context.Context, kv jetstream.KeyValue, apply func(jetstream.KeyValueEntry), ready chan<- struct{}, restart <-chan struct{}, onErr func(error)) {
	readyOnce := sync.OnceFunc(func() { close(ready) })
	for ctx.Err() == nil {
		w, err := kv.WatchAll(ctx)
		if err != nil {
			onErr(err)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		ended := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
			case <-restart:
			case <-ended:
			}
			_ = w.Stop()
		}()
		for e := range w.Updates() {
			if e == nil {
				readyOnce()
				continue
			}
			apply(e)
		}
		close(ended)
	}
}
