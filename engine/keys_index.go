package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"
)

// hashTable finds a key's entry by the SHA-256 of the raw key, for every v1 call and validate:
// an open-addressed table indexed by the digest's first eight bytes (already uniform: no
// hashing), probed linearly, read without a lock. It replaced a sync.Map, whose trie walk and
// 32-byte key hashing were about 0.18 µs of a validate under load (bench/README.md, issue 32's
// seventh pass). Writes (keys created, revoked for good, deleted: rare) are serialised by the
// key index's mu. A removed entry leaves a tombstone that lookups step over; the table is
// rebuilt, twice as large when it needs to be, once live entries and tombstones fill half of
// it, and published whole: a lookup reads one table, old or new, never a table being built.
type hashTable struct {
	slots []atomic.Pointer[keyEntry]
	mask  uint64
	used  int // live entries and tombstones: the rebuild's trigger
	live  int
}

// removedKey is a tombstone: a slot whose entry was removed. Lookups go on past it.
var removedKey = &keyEntry{}

func newHashTable(size int) *hashTable {
	n := 16
	for n < 2*size {
		n *= 2
	}
	return &hashTable{slots: make([]atomic.Pointer[keyEntry], n), mask: uint64(n - 1)}
}

func home(h *[sha256.Size]byte) uint64 { return binary.LittleEndian.Uint64(h[:8]) }

// find returns h's entry, or nil.
func (t *hashTable) find(h *[sha256.Size]byte) *keyEntry {
	for i := home(h); ; i++ {
		e := t.slots[i&t.mask].Load()
		if e == nil {
			return nil
		}
		if e != removedKey && e.hash == *h {
			return e
		}
	}
}

// put makes e h's entry (in place of one already there). Called with the index's mu held; t is
// the published table, changed in place (a lookup sees a slot before or after its store).
func (t *hashTable) put(e *keyEntry) {
	free := -1
	for i := home(&e.hash); ; i++ {
		s := &t.slots[i&t.mask]
		old := s.Load()
		if old == nil {
			if free < 0 {
				free = int(i & t.mask)
				t.used++
			}
			t.live++
			t.slots[free].Store(e)
			return
		}
		if old == removedKey {
			if free < 0 {
				free = int(i & t.mask)
			}
			continue
		}
		if old.hash == e.hash {
			s.Store(e)
			return
		}
	}
}

// remove drops e if it is h's entry. Called with the index's mu held.
func (t *hashTable) remove(e *keyEntry) {
	for i := home(&e.hash); ; i++ {
		s := &t.slots[i&t.mask]
		old := s.Load()
		if old == nil {
			return
		}
		if old == e {
			s.Store(removedKey)
			t.live--
			return
		}
	}
}

// full: live entries and tombstones fill half of the table.
func (t *hashTable) full() bool { return 2*(t.used+1) > len(t.slots) }

// rebuilt is a new table of the live entries, with room for as many again.
func (t *hashTable) rebuilt() *hashTable {
	n := newHashTable(2 * (t.live + 1))
	for i := range t.slots {
		if e := t.slots[i].Load(); e != nil && e != removedKey {
			n.put(e)
		}
	}
	return n
}
