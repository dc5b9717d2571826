package engine

import (
	"crypto/sha256"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// The key index's hash table agrees with a map through adds, replacements and removals (its
// tombstones and rebuilds included), while lookups run beside the writes (-race).
func TestKeyHashTable(t *testing.T) {
	var x keyIndex
	x.init()
	model := map[string]*keyEntry{}
	entry := func(id string) *keyEntry { return &keyEntry{hash: sha256.Sum256([]byte("raw-" + id))} }
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a reader beside the writer: never a wrong entry
		defer wg.Done()
		for !stop.Load() {
			for i := range 64 {
				h := sha256.Sum256([]byte("raw-" + strconv.Itoa(i)))
				if e := x.hash(h); e != nil && e.hash != h {
					t.Errorf("key %d found entry of another hash", i)
					return
				}
			}
		}
	}()
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 20000 {
		id := strconv.Itoa(r.IntN(300))
		switch r.IntN(3) {
		case 0, 1:
			e := entry(id)
			x.remove(id) // a key spawned again replaces its entry, as Keys does
			x.add(id, e)
			model[id] = e
		case 2:
			x.remove(id)
			delete(model, id)
		}
		if step%500 == 0 || step == 19999 {
			for i := range 300 {
				id := strconv.Itoa(i)
				if got, want := x.hash(entry(id).hash), model[id]; got != want {
					t.Fatalf("step %d: key %s found %p, want %p", step, id, got, want)
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if tb := x.byHash.Load(); tb.live != len(model) || 2*tb.used > len(tb.slots) {
		t.Fatalf("table: %d live (want %d), %d used of %d slots", tb.live, len(model), tb.used, len(tb.slots))
	}
}
