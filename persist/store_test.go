package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

func TestStore(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			testStore(t, impl.open)
		})
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

func keyIDs(keys []domain.APIKey) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

// indexKeys lists the raw index entries of the key store, to catch stale ones.
func indexKeys(t *testing.T, kv KV) []string {
	t.Helper()
	var out []string
	for _, p := range []string{keyHashIndex, keyOwnerIndex} {
		if err := kv.Scan([]byte(p), func(k, v []byte) error {
			out = append(out, fmt.Sprintf("%s=%s", k, v))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func testStore(t *testing.T, newKV func(t *testing.T) KV) {
	ctx := context.Background()

	t.Run("Users", func(t *testing.T) {
		s := NewStore(newKV(t))
		if _, err := s.GetUser("u1"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("GetUser(missing) = %v, want ErrNotFound", err)
		}
		u2 := domain.User{ID: "u2", Name: "Bea", Email: "bea@example.com", Role: "admin", Plan: "business", CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}
		u1 := domain.User{ID: "u1", Name: "Ann", Email: "ann@example.com", Role: "client", Plan: "free", CreatedAt: t0.Add(time.Minute), UpdatedAt: t0.Add(time.Minute)}
		for _, u := range []domain.User{u2, u1} {
			if err := s.PutUser(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.GetUser("u1")
		if err != nil || !reflect.DeepEqual(got, u1) {
			t.Fatalf("GetUser = %+v, %v; want %+v", got, err, u1)
		}
		u1.Plan = "starter"
		if err := s.PutUser(ctx, u1); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListUsers()
		if err != nil || !reflect.DeepEqual(list, []domain.User{u1, u2}) {
			t.Fatalf("ListUsers = %+v, %v; want u1 (updated), u2", list, err)
		}
		if err := s.PutUser(ctx, domain.User{Name: "no id"}); !errors.Is(err, domain.ErrRecordInvalid) {
			t.Fatalf("PutUser without id = %v, want ErrInvalid", err)
		}
	})

	t.Run("KeysAndIndexes", func(t *testing.T) {
		s := NewStore(newKV(t))
		exp := t0.Add(30 * 24 * time.Hour)
		k1 := domain.APIKey{ID: "k1", UserID: "u1", Name: "shop", Hash: "h1", Last4: "aaaa", Status: "active", Scopes: []string{"send_text"}, CreatedAt: t0.Add(2 * time.Second), ExpiresAt: &exp}
		k2 := domain.APIKey{ID: "k2", UserID: "u1", Name: "crm", Hash: "h2", Last4: "bbbb", Status: "active", Scopes: []string{"send_text", "send_bulk"}, CreatedAt: t0}
		k3 := domain.APIKey{ID: "k3", UserID: "u1x", Name: "other", Hash: "h3", Status: "active", CreatedAt: t0}
		for _, k := range []domain.APIKey{k1, k2, k3} {
			if err := s.PutKey(ctx, k); err != nil {
				t.Fatalf("PutKey(%s): %v", k.ID, err)
			}
		}
		if got, err := s.GetKey("k1"); err != nil || !reflect.DeepEqual(got, k1) {
			t.Fatalf("GetKey(k1) = %+v, %v; want %+v", got, err, k1)
		}
		if got, err := s.GetKeyByHash("h2"); err != nil || got.ID != "k2" {
			t.Fatalf("GetKeyByHash(h2) = %+v, %v", got, err)
		}
		if _, err := s.GetKeyByHash("nope"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("GetKeyByHash(unknown) = %v, want ErrNotFound", err)
		}
		if _, err := s.GetKeyByHash(""); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("GetKeyByHash(\"\") = %v, want ErrNotFound", err)
		}
		// createdAt, then id for equal times.
		if list, err := s.ListKeys(); err != nil || !slices.Equal(keyIDs(list), []string{"k2", "k3", "k1"}) {
			t.Fatalf("ListKeys = %v, %v; want [k2 k3 k1]", keyIDs(list), err)
		}
		// "u1" does not see the keys of "u1x".
		if list, err := s.ListKeysByOwner("u1"); err != nil || !slices.Equal(keyIDs(list), []string{"k2", "k1"}) {
			t.Fatalf("ListKeysByOwner(u1) = %v, %v; want [k2 k1]", keyIDs(list), err)
		}

		// Rename and revoke: same hash, same owner; indexes unchanged.
		k1.Name, k1.Status = "shop (old)", "revoked"
		if err := s.PutKey(ctx, k1); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetKeyByHash("h1"); err != nil || got.Name != "shop (old)" || got.Status != "revoked" {
			t.Fatalf("GetKeyByHash(h1) after rename = %+v, %v", got, err)
		}
		if list, _ := s.ListKeysByOwner("u1"); !slices.Equal(keyIDs(list), []string{"k2", "k1"}) {
			t.Fatalf("ListKeysByOwner(u1) after rename = %v", keyIDs(list))
		}
		want := []string{"apikey_hash/h1=k1", "apikey_hash/h2=k2", "apikey_hash/h3=k3", "apikey_owner/u1\x00k1=", "apikey_owner/u1\x00k2=", "apikey_owner/u1x\x00k3="}
		if got := indexKeys(t, s.KV()); !slices.Equal(got, want) {
			t.Fatalf("indexes after rename = %q, want %q", got, want)
		}

		// New owner and new hash: old index entries go away in the same commit.
		k2.UserID, k2.Hash = "u1x", "h2b"
		if err := s.PutKey(ctx, k2); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetKeyByHash("h2"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("old hash still resolves: %v", err)
		}
		if got, err := s.GetKeyByHash("h2b"); err != nil || got.ID != "k2" {
			t.Fatalf("GetKeyByHash(h2b) = %+v, %v", got, err)
		}
		if list, _ := s.ListKeysByOwner("u1"); !slices.Equal(keyIDs(list), []string{"k1"}) {
			t.Fatalf("ListKeysByOwner(u1) after move = %v", keyIDs(list))
		}
		if list, _ := s.ListKeysByOwner("u1x"); !slices.Equal(keyIDs(list), []string{"k2", "k3"}) {
			t.Fatalf("ListKeysByOwner(u1x) after move = %v", keyIDs(list))
		}
		want = []string{"apikey_hash/h1=k1", "apikey_hash/h2b=k2", "apikey_hash/h3=k3", "apikey_owner/u1\x00k1=", "apikey_owner/u1x\x00k2=", "apikey_owner/u1x\x00k3="}
		if got := indexKeys(t, s.KV()); !slices.Equal(got, want) {
			t.Fatalf("indexes after move = %q, want %q", got, want)
		}

		// A hash held by another key is refused, and nothing is written.
		if err := s.PutKey(ctx, domain.APIKey{ID: "k4", UserID: "u2", Hash: "h1", CreatedAt: t0}); !errors.Is(err, ErrConflict) {
			t.Fatalf("PutKey with a taken hash = %v, want ErrConflict", err)
		}
		if _, err := s.GetKey("k4"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("refused key was written: %v", err)
		}
		for _, bad := range []domain.APIKey{{UserID: "u", Hash: "h"}, {ID: "k", Hash: "h"}, {ID: "k", UserID: "u"}, {ID: "k", UserID: "u\x00v", Hash: "h"}} {
			if err := s.PutKey(ctx, bad); !errors.Is(err, domain.ErrRecordInvalid) {
				t.Fatalf("PutKey(%+v) = %v, want ErrInvalid", bad, err)
			}
		}

		// Delete removes the key, both index entries and the usage marks.
		if err := s.PutKeyUsage(ctx, "k1", domain.KeyUsage{Day: "2026-03-01", DayMark: 100, CallsMark: 500}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteKey(ctx, "k1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetKey("k1"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("GetKey after delete = %v", err)
		}
		if _, err := s.GetKeyByHash("h1"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("GetKeyByHash after delete = %v", err)
		}
		if u, err := s.GetKeyUsage("k1"); err != nil || u != (domain.KeyUsage{}) {
			t.Fatalf("usage after delete = %+v, %v", u, err)
		}
		if list, _ := s.ListKeysByOwner("u1"); len(list) != 0 {
			t.Fatalf("ListKeysByOwner(u1) after delete = %v", keyIDs(list))
		}
		want = []string{"apikey_hash/h2b=k2", "apikey_hash/h3=k3", "apikey_owner/u1x\x00k2=", "apikey_owner/u1x\x00k3="}
		if got := indexKeys(t, s.KV()); !slices.Equal(got, want) {
			t.Fatalf("indexes after delete = %q, want %q", got, want)
		}
		if err := s.DeleteKey(ctx, "k1"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("second DeleteKey = %v, want ErrNotFound", err)
		}
		// The freed hash can be used again.
		if err := s.PutKey(ctx, domain.APIKey{ID: "k5", UserID: "u2", Hash: "h1", CreatedAt: t0}); err != nil {
			t.Fatalf("PutKey reusing a freed hash: %v", err)
		}
	})

	t.Run("ConcurrentKeyWrites", func(t *testing.T) {
		// Many writers of one key (moving it between owners and hashes) leave exactly the
		// indexes of the last version written.
		s := NewStore(newKV(t))
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 10 {
					k := domain.APIKey{ID: "k", UserID: fmt.Sprintf("u%d", w), Hash: fmt.Sprintf("h%d-%d", w, i), CreatedAt: t0}
					if err := s.PutKey(ctx, k); err != nil {
						t.Errorf("PutKey: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		final, err := s.GetKey("k")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"apikey_hash/" + final.Hash + "=k", "apikey_owner/" + final.UserID + "\x00k="}
		if got := indexKeys(t, s.KV()); !slices.Equal(got, want) {
			t.Fatalf("indexes = %q, want %q", got, want)
		}
	})

	t.Run("Usage", func(t *testing.T) {
		s := NewStore(newKV(t))
		if u, err := s.GetKeyUsage("k1"); err != nil || u != (domain.KeyUsage{}) {
			t.Fatalf("GetKeyUsage(none) = %+v, %v; want zero, nil", u, err)
		}
		want := domain.KeyUsage{Day: "2026-03-01", DayMark: 200, CallsMark: 12_345_678_901}
		if err := s.PutKeyUsage(ctx, "k1", want); err != nil {
			t.Fatal(err)
		}
		if u, err := s.GetKeyUsage("k1"); err != nil || u != want {
			t.Fatalf("GetKeyUsage = %+v, %v; want %+v", u, err, want)
		}
	})

	t.Run("TableVersions", func(t *testing.T) {
		kv := newKV(t)
		type v1 struct {
			Name string `json:"name"`
		}
		type v2 struct {
			Name string `json:"name"`
			Tier int    `json:"tier"`
		}
		old, next := NewTable[v1](kv, "thing", 1), NewTable[v2](kv, "thing", 2)
		if err := old.Put(ctx, "a", v1{Name: "from v1"}); err != nil {
			t.Fatal(err)
		}
		// A newer build reads older records.
		if got, err := next.Get("a"); err != nil || got != (v2{Name: "from v1"}) {
			t.Fatalf("v2 reading a v1 record = %+v, %v", got, err)
		}
		if err := next.Put(ctx, "b", v2{Name: "from v2", Tier: 3}); err != nil {
			t.Fatal(err)
		}
		// An older build refuses newer records, in Get and in Scan.
		if _, err := old.Get("b"); !errors.Is(err, ErrNewerVersion) {
			t.Fatalf("v1 reading a v2 record = %v, want ErrNewerVersion", err)
		}
		if err := old.Scan("", func(string, v1) error { return nil }); !errors.Is(err, ErrNewerVersion) {
			t.Fatalf("v1 scanning a v2 record = %v, want ErrNewerVersion", err)
		}
	})

	t.Run("TableOps", func(t *testing.T) {
		kv := newKV(t)
		type rec struct {
			N int `json:"n"`
		}
		tab, other := NewTable[rec](kv, "t", 1), NewTable[rec](kv, "t2", 1)
		if _, err := tab.Get("x"); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("Get(missing) = %v", err)
		}
		// Several tables in one atomic commit.
		var ops []Op
		for i, id := range []string{"b/2", "a", "b/1", "c"} {
			op, err := tab.PutOp(id, rec{N: i})
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
		}
		op, _ := other.PutOp("a", rec{N: 99})
		if err := kv.Commit(ctx, append(ops, op)...); err != nil {
			t.Fatal(err)
		}
		scan := func(prefix string) []string {
			var ids []string
			if err := tab.Scan(prefix, func(id string, _ rec) error {
				ids = append(ids, id)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return ids
		}
		// "t/" never reaches into "t2/".
		if got := scan(""); !slices.Equal(got, []string{"a", "b/1", "b/2", "c"}) {
			t.Fatalf("Scan(all) = %q", got)
		}
		if got := scan("b/"); !slices.Equal(got, []string{"b/1", "b/2"}) {
			t.Fatalf("Scan(b/) = %q", got)
		}
		if err := kv.Commit(ctx, tab.DeleteOp("a"), tab.DeleteOp("c")); err != nil {
			t.Fatal(err)
		}
		if err := tab.Delete(ctx, "b/1"); err != nil {
			t.Fatal(err)
		}
		if got := scan(""); !slices.Equal(got, []string{"b/2"}) {
			t.Fatalf("Scan after deletes = %q", got)
		}
		if got, err := other.Get("a"); err != nil || got.N != 99 {
			t.Fatalf("other table = %+v, %v", got, err)
		}
		if _, err := tab.PutOp("", rec{}); !errors.Is(err, domain.ErrRecordInvalid) {
			t.Fatalf("PutOp(\"\") = %v, want ErrInvalid", err)
		}
		ttlOp, err := tab.PutTTLOp("tmp", rec{N: 1}, 300*time.Millisecond)
		if err != nil || ttlOp.TTL != 300*time.Millisecond {
			t.Fatalf("PutTTLOp = %+v, %v", ttlOp, err)
		}
		if err := kv.Commit(ctx, ttlOp); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the TTL'd record to expire", func() bool {
			_, err := tab.Get("tmp")
			return errors.Is(err, domain.ErrRecordNotFound)
		})
	})

	t.Run("ScannedRecordsOutliveTheScan", func(t *testing.T) {
		// Scan hands out slices valid only during fn; decoded records must not alias them.
		s := NewStore(newKV(t))
		for i := range 20 {
			u := domain.User{ID: fmt.Sprintf("u%02d", i), Name: fmt.Sprintf("name-%02d", i), Email: "e@x", CreatedAt: t0}
			if err := s.PutUser(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
		users, err := s.ListUsers()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 { // churn the store so reused buffers would show
			_ = s.PutUser(ctx, domain.User{ID: fmt.Sprintf("u%02d", i), Name: "overwritten-xx"})
			_, _ = s.ListUsers()
		}
		for i, u := range users {
			if u.Name != fmt.Sprintf("name-%02d", i) {
				t.Fatalf("user %d name changed to %q after later scans", i, u.Name)
			}
		}
	})
}

func TestCodec(t *testing.T) {
	type rec struct {
		A string `json:"a"`
	}
	data, err := Encode(3, rec{A: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != 3 || !bytes.Equal(data[1:], []byte(`{"a":"x"}`)) {
		t.Fatalf("Encode = %q", data)
	}
	var r rec
	if v, err := Decode(data, 3, &r); err != nil || v != 3 || r.A != "x" {
		t.Fatalf("Decode = %d, %+v, %v", v, r, err)
	}
	if v, err := Decode(data, 2, &r); !errors.Is(err, ErrNewerVersion) || v != 3 {
		t.Fatalf("Decode with maxVersion 2 = %d, %v; want 3, ErrNewerVersion", v, err)
	}
	for _, bad := range [][]byte{nil, {0, '{', '}'}} {
		if _, err := Decode(bad, 3, &r); !errors.Is(err, domain.ErrRecordInvalid) {
			t.Fatalf("Decode(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := Decode([]byte{1, '{'}, 3, &r); err == nil {
		t.Fatal("Decode of broken JSON succeeded")
	}
	if _, err := Encode(0, rec{}); !errors.Is(err, domain.ErrRecordInvalid) {
		t.Fatalf("Encode(version 0) = %v, want ErrInvalid", err)
	}
	if _, err := Encode(1, make(chan int)); err == nil {
		t.Fatal("Encode of a channel succeeded")
	}
}

func TestNewTableRefusesBadNames(t *testing.T) {
	for _, c := range []struct {
		name    string
		version byte
	}{{"", 1}, {"a/b", 1}, {"ok", 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewTable(%q, %d) did not panic", c.name, c.version)
				}
			}()
			NewTable[int](NewMemory(), c.name, c.version)
		}()
	}
}
