package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/gateway/gateway/domain"
)

// Store holds the typed stores of the core. Key writes (PutKey, DeleteKey) read the old
// record to fix the indexes; they are serialised per key id by striped locks so two writers
// of one key cannot leave a stale index. Everything else is lock-free above the KV.
type Store struct {
	kv       KV
	users    *Table[domain.User]
	keys     *Table[domain.APIKey]
	usage    *Table[domain.KeyUsage]
	seed     maphash.Seed
	keyLocks [keyLockStripes]sync.Mutex
}

// NewStore returns the typed stores on kv.
func NewStore(kv KV) *Store {
	return &Store{
		kv:    kv,
		users: NewTable[domain.User](kv, usersTable, recordVersion1),
		keys:  NewTable[domain.APIKey](kv, keysTable, recordVersion1),
		usage: NewTable[domain.KeyUsage](kv, keyUsageTable, recordVersion1),
		seed:  maphash.MakeSeed(),
	}
}

// KV returns the underlying store, for multi-op commits across tables.
func (s *Store) KV() KV { return s.kv }

// GetUser returns user id or ErrNotFound.
func (s *Store) GetUser(id string) (domain.User, error) { return s.users.Get(id) }

// PutUser writes u (timestamps are the caller's).
func (s *Store) PutUser(ctx context.Context, u domain.User) error { return s.users.Put(ctx, u.ID, u) }

// ListUsers returns every user, by id.
func (s *Store) ListUsers() ([]domain.User, error) {
	var out []domain.User
	err := s.users.Scan("", func(_ string, u domain.User) error {
		out = append(out, u)
		return nil
	})
	return out, err
}

// GetKey returns API key id or ErrNotFound.
func (s *Store) GetKey(id string) (domain.APIKey, error) { return s.keys.Get(id) }

// GetKeyByHash returns the API key whose raw key hashes to hash, or ErrNotFound.
func (s *Store) GetKeyByHash(hash string) (domain.APIKey, error) {
	if hash == "" {
		return domain.APIKey{}, domain.ErrRecordNotFound
	}
	id, err := s.kv.Get(hashKey(hash))
	if err != nil {
		return domain.APIKey{}, err
	}
	return s.keys.Get(string(id))
}

// ListKeys returns every API key, by createdAt then id.
func (s *Store) ListKeys() ([]domain.APIKey, error) {
	var out []domain.APIKey
	if err := s.keys.Scan("", func(_ string, k domain.APIKey) error {
		out = append(out, k)
		return nil
	}); err != nil {
		return nil, err
	}
	sortKeys(out)
	return out, nil
}

// ListKeysByOwner returns the API keys of user userID, by createdAt then id.
func (s *Store) ListKeysByOwner(userID string) ([]domain.APIKey, error) {
	if userID == "" {
		return nil, nil
	}
	prefix := ownerPrefix(userID)
	var ids []string
	if err := s.kv.Scan(prefix, func(key, _ []byte) error {
		ids = append(ids, string(key[len(prefix):]))
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]domain.APIKey, 0, len(ids))
	for _, id := range ids {
		k, err := s.keys.Get(id)
		if errors.Is(err, domain.ErrRecordNotFound) {
			continue // deleted between the index scan and this read
		}
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	sortKeys(out)
	return out, nil
}

// PutKey writes k and its hash and owner indexes in one atomic commit, removing the indexes
// of the previous version of k when its hash or owner changed. A hash already indexed for
// another key is refused with ErrConflict.
func (s *Store) PutKey(ctx context.Context, k domain.APIKey) error {
	switch {
	case k.ID == "" || k.UserID == "" || k.Hash == "":
		return fmt.Errorf("%w: api key needs id, userId and hash", domain.ErrRecordInvalid)
	case strings.IndexByte(k.UserID, 0) >= 0:
		return fmt.Errorf("%w: api key userId contains NUL", domain.ErrRecordInvalid)
	}
	mu := s.keyLock(k.ID)
	mu.Lock()
	defer mu.Unlock()

	old, err := s.keys.Get(k.ID)
	exists := err == nil
	if err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
		return err
	}
	if !exists || old.Hash != k.Hash {
		holder, err := s.kv.Get(hashKey(k.Hash))
		switch {
		case err == nil && string(holder) != k.ID:
			return fmt.Errorf("%w: hash of api key %q is already used by %q", ErrConflict, k.ID, holder)
		case err != nil && !errors.Is(err, domain.ErrRecordNotFound):
			return err
		}
	}

	put, err := s.keys.PutOp(k.ID, k)
	if err != nil {
		return err
	}
	ops := []Op{
		put,
		{Key: hashKey(k.Hash), Value: []byte(k.ID)},
		{Key: ownerKey(k.UserID, k.ID), Value: []byte{}},
	}
	if exists && old.Hash != k.Hash {
		ops = append(ops, Op{Key: hashKey(old.Hash), Delete: true})
	}
	if exists && old.UserID != k.UserID {
		ops = append(ops, Op{Key: ownerKey(old.UserID, k.ID), Delete: true})
	}
	return s.kv.Commit(ctx, ops...)
}

// DeleteKey removes API key id, its indexes and its usage marks atomically, or returns
// ErrNotFound.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	mu := s.keyLock(id)
	mu.Lock()
	defer mu.Unlock()

	old, err := s.keys.Get(id)
	if err != nil {
		return err
	}
	ops := []Op{
		s.keys.DeleteOp(id),
		{Key: ownerKey(old.UserID, id), Delete: true},
		s.usage.DeleteOp(id),
	}
	// The hash index is removed only if it is this key's, never another key's entry.
	holder, err := s.kv.Get(hashKey(old.Hash))
	switch {
	case err == nil && string(holder) == id:
		ops = append(ops, Op{Key: hashKey(old.Hash), Delete: true})
	case err != nil && !errors.Is(err, domain.ErrRecordNotFound):
		return err
	}
	return s.kv.Commit(ctx, ops...)
}

// GetKeyUsage returns the usage marks of key id; the zero value and nil when there are none.
func (s *Store) GetKeyUsage(id string) (domain.KeyUsage, error) {
	u, err := s.usage.Get(id)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return domain.KeyUsage{}, nil
	}
	return u, err
}

// PutKeyUsage writes the usage marks of key id.
func (s *Store) PutKeyUsage(ctx context.Context, id string, u domain.KeyUsage) error {
	return s.usage.Put(ctx, id, u)
}

func (s *Store) keyLock(id string) *sync.Mutex {
	return &s.keyLocks[maphash.String(s.seed, id)%keyLockStripes]
}

func hashKey(hash string) []byte { return []byte(keyHashIndex + hash) }

func ownerPrefix(userID string) []byte { return []byte(keyOwnerIndex + userID + "\x00") }

func ownerKey(userID, keyID string) []byte { return append(ownerPrefix(userID), keyID...) }

func sortKeys(keys []domain.APIKey) {
	slices.SortFunc(keys, func(a, b domain.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
