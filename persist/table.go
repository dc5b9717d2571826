package persist

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gateway/gateway/domain"
)

// Table is a typed collection under a key prefix: key = "<name>/" + id, value = Encode(version, T).
// It reads records up to its version and writes its version.
type Table[T any] struct {
	kv      KV
	name    string
	prefix  string
	version byte
}

// NewTable returns the table name on kv. name must be non-empty without "/" and version at
// least 1: these are fixed in code, so a wrong one panics at construction.
func NewTable[T any](kv KV, name string, version byte) *Table[T] {
	if name == "" || strings.Contains(name, "/") || version == 0 {
		panic(fmt.Sprintf("persist: bad table %q version %d", name, version))
	}
	return &Table[T]{kv: kv, name: name, prefix: name + "/", version: version}
}

// KV returns the store the table sits on, for multi-op commits.
func (t *Table[T]) KV() KV { return t.kv }

func (t *Table[T]) key(id string) []byte {
	k := make([]byte, 0, len(t.prefix)+len(id))
	return append(append(k, t.prefix...), id...)
}

func (t *Table[T]) checkID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: %s: empty id", domain.ErrRecordInvalid, t.name)
	}
	return nil
}

// Get returns the record id, or ErrNotFound.
func (t *Table[T]) Get(id string) (T, error) {
	var v T
	data, err := t.kv.Get(t.key(id))
	if err != nil {
		return v, err
	}
	return t.value(id, data)
}

// value decodes record id's stored bytes.
func (t *Table[T]) value(id string, data []byte) (T, error) {
	var v T
	if _, err := Decode(data, t.version, &v); err != nil {
		return v, fmt.Errorf("%s %q: %w", t.name, id, err)
	}
	return v, nil
}

// Put writes the record id durably.
func (t *Table[T]) Put(ctx context.Context, id string, v T) error {
	op, err := t.PutOp(id, v)
	if err != nil {
		return err
	}
	return t.kv.Commit(ctx, op)
}

// PutOp returns the write of record id, for a multi-op atomic commit.
func (t *Table[T]) PutOp(id string, v T) (Op, error) {
	return t.PutTTLOp(id, v, 0)
}

// PutTTLOp is PutOp for a record that expires after ttl (0 = never).
func (t *Table[T]) PutTTLOp(id string, v T, ttl time.Duration) (Op, error) {
	if err := t.checkID(id); err != nil {
		return Op{}, err
	}
	data, err := Encode(t.version, v)
	if err != nil {
		return Op{}, fmt.Errorf("%s %q: %w", t.name, id, err)
	}
	return Op{Key: t.key(id), Value: data, TTL: ttl}, nil
}

// PutRawOp is PutTTLOp for a value the caller encoded itself (the table's version byte, then
// the JSON Decode reads as T): a hot path's record written by hand.
func (t *Table[T]) PutRawOp(id string, value []byte, ttl time.Duration) (Op, error) {
	if err := t.checkID(id); err != nil {
		return Op{}, err
	}
	return Op{Key: t.key(id), Value: value, TTL: ttl}, nil
}

// Delete removes record id durably; deleting an absent record is not an error.
func (t *Table[T]) Delete(ctx context.Context, id string) error {
	return t.kv.Commit(ctx, t.DeleteOp(id))
}

// DeleteOp returns the removal of record id, for a multi-op atomic commit.
func (t *Table[T]) DeleteOp(id string) Op {
	return Op{Key: t.key(id), Delete: true}
}

// Scan calls fn for every record whose id starts with idPrefix ("" = all), in id byte order.
// An error from fn, or a record that does not decode, stops the scan and is returned.
func (t *Table[T]) Scan(idPrefix string, fn func(id string, v T) error) error {
	return t.kv.Scan(t.key(idPrefix), func(key, value []byte) error {
		id := string(key[len(t.prefix):])
		var v T
		if _, err := Decode(value, t.version, &v); err != nil {
			return fmt.Errorf("%s %q: %w", t.name, id, err)
		}
		return fn(id, v)
	})
}
