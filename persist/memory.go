package persist

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// Memory is the in-memory KV for tests and the core's unit tests: a map, scanned in sorted
// key order. It follows the same contract as Badger (validation, atomic commits, TTL, errors
// after Close) but nothing survives the process.
type Memory struct {
	mu        sync.RWMutex
	m         map[string]memEntry
	closed    bool
	lastSweep time.Time
}

type memEntry struct {
	value   []byte    // owned by the map, never modified after it is stored
	expires time.Time // zero: never
}

func (e memEntry) live(now time.Time) bool { return e.expires.IsZero() || now.Before(e.expires) }

// sweepEvery bounds how long expired entries are kept around before Commit drops them.
const sweepEvery = time.Minute

// NewMemory returns an empty in-memory KV.
func NewMemory() *Memory {
	return &Memory{m: make(map[string]memEntry), lastSweep: time.Now()}
}

// Get returns a copy of the value at key.
func (m *Memory) Get(key []byte) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	e, ok := m.m[string(key)]
	if !ok || !e.live(time.Now()) {
		return nil, domain.ErrRecordNotFound
	}
	return slices.Clone(e.value), nil
}

// Scan calls fn for every live key under prefix, in key order, on a snapshot taken when the
// scan starts; fn runs without the lock held, so it may call Get or Commit.
func (m *Memory) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return m.ScanFrom(prefix, prefix, fn)
}

// ScanFrom is Scan from the first key at or after start.
func (m *Memory) ScanFrom(prefix, start []byte, fn func(key, value []byte) error) error {
	return m.scan(prefix, func(k string) bool { return k >= string(start) }, false, fn)
}

// ScanBefore calls fn for the live keys under prefix that sort before end (nil: all), last
// key first, on a snapshot as Scan does.
func (m *Memory) ScanBefore(prefix, end []byte, fn func(key, value []byte) error) error {
	return m.scan(prefix, func(k string) bool { return end == nil || k < string(end) }, true, fn)
}

// scan walks a snapshot of the live keys under prefix that keep accepts, in key order (or
// reversed), without the lock held.
func (m *Memory) scan(prefix []byte, keep func(string) bool, reverse bool, fn func(key, value []byte) error) error {
	type kv struct {
		key   string
		value []byte
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return ErrClosed
	}
	now := time.Now()
	p := string(prefix)
	var snap []kv
	for k, e := range m.m {
		if strings.HasPrefix(k, p) && keep(k) && e.live(now) {
			snap = append(snap, kv{k, e.value})
		}
	}
	m.mu.RUnlock()

	slices.SortFunc(snap, func(a, b kv) int { return strings.Compare(a.key, b.key) })
	if reverse {
		slices.Reverse(snap)
	}
	for _, e := range snap {
		if err := fn([]byte(e.key), e.value); err != nil {
			return err
		}
	}
	return nil
}

// Commit applies ops atomically, in order (a later op on the same key wins).
func (m *Memory) Commit(ctx context.Context, ops ...Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateOps(ops); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	now := time.Now()
	for _, op := range ops {
		e, ok := m.m[string(op.Key)]
		ok = ok && e.live(now)
		switch {
		case op.IfAbsent && ok:
			return domain.ErrRecordExists
		case op.IfPresent && !ok:
			return domain.ErrRecordNotFound
		}
	}
	for _, op := range ops {
		if op.isCond() {
			continue
		}
		if op.Delete {
			delete(m.m, string(op.Key))
			continue
		}
		e := memEntry{value: slices.Clone(op.Value)}
		if op.TTL > 0 {
			e.expires = now.Add(op.TTL)
		}
		m.m[string(op.Key)] = e
	}
	if now.Sub(m.lastSweep) > sweepEvery {
		m.lastSweep = now
		for k, e := range m.m {
			if !e.live(now) {
				delete(m.m, k)
			}
		}
	}
	return nil
}

// Close drops the data; every later call returns ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.m = nil
	return nil
}
