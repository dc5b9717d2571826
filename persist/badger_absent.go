package persist

import (
	"bytes"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The keys Badger knows to be absent without reading them.
//
// A send with an Idempotency-Key looks up every id a record of its key may be under (the
// message ids derived from the key for today, yesterday and, near midnight, tomorrow; the
// release before's; the key's own record: engine.Messages.idemRecord), and a send with a
// caller's id looks its id up once more (engine.Messages.Send). For a key never used, which is
// nearly every such send, each look-up is a miss that walks every memtable's skiplist (about
// 3.3 µs a key in `make bench`'s profile: 4 to 5 keys, 17.6 µs of the 121.9 µs such a send
// cost, and the second look-up 5.2 more).
//
// absentKeys holds a 64-bit hash of every live key under a few prefixes (outlog_pos: a
// caller's or a derived id's position in the outbox's log; idem: the idempotency records of
// their own), so a key it does not hold is answered absent without a read. It is exact in one
// direction, which is the one that matters: every key written under a prefix is added before
// its commit is handed to the writer (Commit), and the keys on disk at open by a scan in the
// background; until that scan ends, every read goes to Badger. A key it holds may be absent
// (deleted, expired, its commit failed, two keys' hashes equal): that costs a read, as before.
// Only Badger's own TTL removes keys under these prefixes without a commit, and a hash leaves
// the set only an hour after its key's expiry.
//
// Its size is bounded by absentMax hashes (at most about 40 MB): a store with more live keys
// under the prefixes (more than about a million keyed or caller-id sends within the outbox's
// retention) reads every key, as before, until it is opened again. No probabilistic filter
// (bits-and-blooms/bloom): the keys expire, and a Bloom filter cannot drop one, so it would
// need generations by expiry, each checked on every look-up; a map drops a key at its expiry.
type absentKeys struct {
	prefixes [][]byte
	seed     maphash.Seed

	mu   sync.RWMutex
	keys map[uint64]int64 // a key's hash → when it expires (Unix seconds; 0: never)

	ready atomic.Bool // the boot scan ended: keys holds every live key under prefixes
	off   atomic.Bool // more than absentMax keys: not kept, every read goes to Badger
	max   int         // absentMax; tests set a smaller one

	hits atomic.Uint64 // reads answered absent without Badger (tests, benchmarks)
}

const (
	// absentMax is the most key hashes absentKeys holds.
	absentMax = 1 << 20
	// absentSlack is how long a hash stays past its key's expiry: Commit reckons the expiry
	// from its own clock, and the writer stages the op (which sets Badger's) a little later.
	absentSlack = time.Hour
	// absentSweep is how often the hashes of expired keys are dropped.
	absentSweep = 10 * time.Minute
)

// errStopped ends absentKeys.load when the store closes.
var errStopped = errors.New("persist: stopped")

// absentPrefixes are the key prefixes absentKeys covers.
var absentPrefixes = [][]byte{[]byte(logPosTable + "/"), []byte(idemTable + "/")}

func newAbsentKeys(prefixes [][]byte) *absentKeys {
	return &absentKeys{prefixes: prefixes, seed: maphash.MakeSeed(), keys: map[uint64]int64{}, max: absentMax}
}

// covers tells whether key is under one of a's prefixes.
func (a *absentKeys) covers(key []byte) bool {
	for _, p := range a.prefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// absent tells whether key is certainly not stored: a covered key whose hash a does not hold,
// once the boot scan ended. False means "read it".
func (a *absentKeys) absent(key []byte) bool {
	if a == nil || !a.ready.Load() || a.off.Load() || !a.covers(key) {
		return false
	}
	h := maphash.Bytes(a.seed, key)
	a.mu.RLock()
	_, ok := a.keys[h]
	a.mu.RUnlock()
	if !ok {
		a.hits.Add(1)
	}
	return !ok
}

// written adds the keys ops put under a's prefixes (before their commit is handed to the
// writer), with their expiry from now.
func (a *absentKeys) written(ops []Op, now time.Time) {
	if a == nil || a.off.Load() {
		return
	}
	locked := false
	for _, op := range ops {
		if op.Delete || op.isCond() || !a.covers(op.Key) {
			continue
		}
		var exp int64
		if op.TTL > 0 {
			exp = int64(expiresAt(now, op.TTL))
		}
		if !locked {
			a.mu.Lock()
			locked = true
		}
		a.addLocked(maphash.Bytes(a.seed, op.Key), exp)
	}
	if locked {
		a.mu.Unlock()
	}
}

// addLocked adds hash h expiring at exp (mu held), keeping the later expiry of a key written
// again; past max hashes, a stops keeping any.
func (a *absentKeys) addLocked(h uint64, exp int64) {
	if a.keys == nil {
		return // off
	}
	if old, ok := a.keys[h]; ok && (old == 0 || (exp != 0 && old >= exp)) {
		return
	}
	a.keys[h] = exp
	if len(a.keys) > a.max {
		a.off.Store(true)
		a.keys = nil
	}
}

// sweep drops the hashes of the keys expired over absentSlack before now.
func (a *absentKeys) sweep(now time.Time) {
	if a == nil || a.off.Load() {
		return
	}
	before := now.Add(-absentSlack).Unix()
	a.mu.Lock()
	for h, exp := range a.keys {
		if exp != 0 && exp < before {
			delete(a.keys, h)
		}
	}
	a.mu.Unlock()
}

// load adds the live keys under a's prefixes in db, then marks a ready; it gives up (a stays
// not ready) when stop is closed or a read fails.
func (a *absentKeys) load(db *badger.DB, stop <-chan struct{}) error {
	for _, p := range a.prefixes {
		err := db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p}) // keys only: no values prefetched
			defer it.Close()
			n := 0
			a.mu.Lock()
			defer func() { a.mu.Unlock() }()
			for it.Seek(p); it.Valid(); it.Next() {
				item := it.Item()
				a.addLocked(maphash.Bytes(a.seed, item.Key()), int64(item.ExpiresAt()))
				if a.keys == nil {
					return nil // off
				}
				if n++; n%1024 == 0 { // let the look-ups and commits in between
					a.mu.Unlock()
					select {
					case <-stop:
						a.mu.Lock()
						return errStopped
					default:
					}
					a.mu.Lock()
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if !a.off.Load() {
		a.ready.Store(true)
	}
	return nil
}

// run loads a (load), then sweeps it every absentSweep until stop is closed.
func (a *absentKeys) run(db *badger.DB, stop <-chan struct{}, log func(msg string, args ...any)) {
	if err := a.load(db, stop); err != nil {
		if !errors.Is(err, errStopped) {
			log("the scan of the keys known absent failed: every look-up reads Badger", "err", err)
		}
		return
	}
	t := time.NewTicker(absentSweep)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			a.sweep(now)
		}
	}
}
