// Package persist owns the gateway's durable state: the ordered key-value store (Badger on disk,
// a map for tests), the versioned record codec, typed tables and every typed store of domain
// types the core uses (schema.go lists every key prefix, version and TTL).
//
// It may import only the standard library, github.com/dgraph-io/badger/v4,
// github.com/goccy/go-json and the gateway's domain and internal/jsonenc packages; never the
// core (engine, actors, httpapi), which TestImportAllowList checks.
//
// Key schema: every record lives under "<table>/<id>"; table names never contain "/", so one
// table's prefix never covers another's.
package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"
)

// ErrClosed is returned by every call on a KV after Close.
var ErrClosed = errors.New("persist: store closed")

// ErrConflict is returned when a unique index already holds another record (two API keys
// with the same hash).
var ErrConflict = errors.New("persist: conflict")

// Limits every KV enforces, so an implementation never sees what Badger would refuse
// (Badger refuses keys over 65000 bytes and keys under its internal "!badger!" prefix).
const (
	MaxKeySize   = 65000
	MaxValueSize = 64 << 20
)

var reservedPrefix = []byte("!badger!")

// Op is one write of an atomic, durable commit, or a condition on it.
type Op struct {
	Key    []byte
	Value  []byte
	Delete bool
	TTL    time.Duration // 0 = no expiry (Badger entry TTL; the memory KV honours it too)
	// IfAbsent makes the op a condition, not a write: the commit applies only if Key is absent
	// (or expired) when the writer stages it, else it fails with ErrExists. The writer checks
	// it inside its own transaction, so a put-if-absent costs no read before the commit (a
	// Badger read waits for the commits in flight, their sync included).
	IfAbsent bool
	// IfPresent is the opposite condition: the commit fails with ErrNotFound, writing nothing,
	// unless Key is present.
	IfPresent bool
}

// IfPresentOp is the condition "key is present".
func IfPresentOp(key []byte) Op { return Op{Key: key, IfPresent: true} }

// isCond tells whether op is a condition, not a write.
func (op Op) isCond() bool { return op.IfAbsent || op.IfPresent }

// Haver is implemented by the stores that can tell which of many keys are present in one read
// (Badger: one read transaction, so one wait for the commits in flight instead of one per key).
type Haver interface {
	Has(keys [][]byte) ([]bool, error)
}

// Has tells which of keys are present, in one read where kv allows it.
func Has(kv KV, keys [][]byte) ([]bool, error) {
	if h, ok := kv.(Haver); ok {
		return h.Has(keys)
	}
	out := make([]bool, len(keys))
	for i, k := range keys {
		switch _, err := kv.Get(k); {
		case err == nil:
			out[i] = true
		case !errors.Is(err, domain.ErrRecordNotFound):
			return nil, err
		}
	}
	return out, nil
}

// Blobs is a store of large values beside a KV, for a KV whose records must stay small
// (JetStream: a message is at most the server's max_payload, 1 MiB by default; persist/natskv
// keeps such values in an object store). Objects are named by the caller and expire on their
// own (natskv.BlobTTL) after the records that name them.
type Blobs interface {
	PutBlob(ctx context.Context, name string, data []byte) error
	GetBlob(ctx context.Context, name string) ([]byte, error) // ErrRecordNotFound when absent
	DeleteBlob(ctx context.Context, name string) error
}

// BlobMin: a message's media over this many bytes goes to the KV's Blobs when it has them, its
// outbox record holding a reference (DESIGN.md section 19). So does smaller media whose record
// (the media in base64, 4/3 of it, and the message's other fields) would be over the store's
// largest value (maxValueOf): a NATS server's max_payload may be under BlobMin's record.
const BlobMin = 512 << 10

// maxValueOf is the largest value kv takes: its MaxValue (a NATS store's: its server's
// max_payload less what a message adds), or MaxValueSize.
func maxValueOf(kv KV) int {
	if mv, ok := kv.(interface{ MaxValue() int }); ok && mv.MaxValue() > 0 {
		return min(mv.MaxValue(), MaxValueSize)
	}
	return MaxValueSize
}

// Getter is implemented by the stores that read many keys in few round trips (persist/natskv:
// 1,024 keys per request).
type Getter interface {
	GetMany(keys [][]byte) ([][]byte, error)
}

// GetMany reads keys (values[i] nil for an absent key), in as few reads as kv allows.
func GetMany(kv KV, keys [][]byte) ([][]byte, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if g, ok := kv.(Getter); ok {
		return g.GetMany(keys)
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := kv.Get(k)
		switch {
		case err == nil:
			out[i] = v
		case !errors.Is(err, domain.ErrRecordNotFound):
			return nil, err
		}
	}
	return out, nil
}

// IfAbsentOp is the condition "key is absent".
func IfAbsentOp(key []byte) Op { return Op{Key: key, IfAbsent: true} }

// KV is the ordered key-value store every typed store sits on. Its contract, beyond these
// comments (keys of any bytes in byte order, atomic commits, conditions under concurrent
// committers, TTLs, errors when unavailable), is the suite in persist/kvtest, which every
// implementation runs: Badger and Memory here, JetStream in persist/natskv.
type KV interface {
	Get(key []byte) ([]byte, error)                             // ErrNotFound when absent or expired
	Scan(prefix []byte, fn func(key, value []byte) error) error // key order; fn must not keep slices
	// Commit applies ops atomically and returns once they are durable (Badger: per the fsync
	// mode; JetStream: acknowledged by the stream). Concurrent Commit calls share the store's
	// writes (group commit). Safe for concurrent use.
	Commit(ctx context.Context, ops ...Op) error
	Close() error
}

// Durable is a KV that holds the gateway's records (Badger, JetStream): Health is nil while it
// accepts commits, else ErrStorageUnavailable with the cause (/readyz, and the 503 a write
// gets before it starts); Close flushes what was acknowledged.
type Durable interface {
	KV
	Health() error
}

// ValidateOps refuses what no implementation may write, before anything is queued, so a bad
// op fails only its own caller. Every KV calls it first.
func ValidateOps(ops []Op) error {
	for i, op := range ops {
		switch {
		case len(op.Key) == 0:
			return fmt.Errorf("%w: op %d: empty key", domain.ErrRecordInvalid, i)
		case len(op.Key) > MaxKeySize:
			return fmt.Errorf("%w: op %d: key of %d bytes exceeds %d", domain.ErrRecordInvalid, i, len(op.Key), MaxKeySize)
		case bytes.HasPrefix(op.Key, reservedPrefix):
			return fmt.Errorf("%w: op %d: key uses the reserved prefix %q", domain.ErrRecordInvalid, i, reservedPrefix)
		case len(op.Value) > MaxValueSize:
			return fmt.Errorf("%w: op %d: value of %d bytes exceeds %d", domain.ErrRecordInvalid, i, len(op.Value), MaxValueSize)
		case op.TTL < 0:
			return fmt.Errorf("%w: op %d: negative TTL", domain.ErrRecordInvalid, i)
		}
	}
	return nil
}

// gate counts calls in flight and, once closed, refuses new ones and lets Close wait for
// the running ones. It is lock-free so that nested calls (a Scan callback that commits)
// never deadlock against a waiting Close: a nested call after Close just gets ErrClosed.
type gate struct {
	state    atomic.Int64 // calls in flight, plus gateClosed once closed
	idleOnce sync.Once
	idle     chan struct{} // closed when the gate is closed and nothing is in flight
}

const gateClosed = 1 << 62

func newGate() *gate { return &gate{idle: make(chan struct{})} }

func (g *gate) enter() bool {
	if g.state.Add(1)&gateClosed != 0 {
		g.leave()
		return false
	}
	return true
}

func (g *gate) leave() {
	if g.state.Add(-1) == gateClosed {
		g.idleOnce.Do(func() { close(g.idle) })
	}
}

// closeAndWait refuses new calls and returns when the last call in flight has left.
func (g *gate) closeAndWait() {
	if g.state.Add(gateClosed) == gateClosed {
		g.idleOnce.Do(func() { close(g.idle) })
	}
	<-g.idle
}
