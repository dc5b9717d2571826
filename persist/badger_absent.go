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
// Only Badger's own TTL removes keys under these prefixes without a commit: a hash leaves the
// set an hour after its key's expiry, which Commit reckons from the same clock read as the
// writer (commitReq.at). A wall clock stepped back over that hour makes a key Badger had
// expired (and the set dropped) readable again: only a record already past its TTL.
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
	// hold, when set by a test, holds load after its read snapshot until closed.
	hold chan struct{}
	// checked, when set by a test, runs in absent between its checks and its read of keys.
	checked func()
}

const (
	// absentMax is the most key hashes absentKeys holds.
	absentMax = 1 << 20
	// absentSlack is how long a hash stays past its key's expiry (a margin: Commit and the
	// writer reckon it from the same clock read).
	absentSlack = time.Hour
	// absentBatch is how many hashes load adds under one hold of the lock.
	absentBatch = 1024
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
	if !a.ready.Load() || a.off.Load() || !a.covers(key) {
		return false
	}
	h := maphash.Bytes(a.seed, key)
	if a.checked != nil {
		a.checked()
	}
	a.mu.RLock()
	held := a.keys == nil // off since the check above: every key may be there
	if !held {
		_, held = a.keys[h]
	}
	a.mu.RUnlock()
	if !held {
		a.hits.Add(1)
	}
	return !held
}

// written adds the keys ops put under a's prefixes (before their commit is handed to the
// writer), with their expiry from now.
func (a *absentKeys) written(ops []Op, now time.Time) {
	if a.off.Load() {
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

// sweep drops the hashes of the keys expired over absentSlack before now: found under the read
// lock (commits wait, look-ups go on), then dropped under the write lock, each only if it was
// not written again meanwhile with a later expiry.
func (a *absentKeys) sweep(now time.Time) {
	if a.off.Load() {
		return
	}
	before := now.Add(-absentSlack).Unix()
	var expired []uint64
	a.mu.RLock()
	for h, exp := range a.keys {
		if exp != 0 && exp < before {
			expired = append(expired, h)
		}
	}
	a.mu.RUnlock()
	a.mu.Lock()
	for _, h := range expired {
		if exp, ok := a.keys[h]; ok && exp != 0 && exp < before {
			delete(a.keys, h)
		}
	}
	a.mu.Unlock()
}

// load adds the live keys under a's prefixes in db, absentBatch at a time (the lock is not held
// while the iterator reads), then marks a ready; it gives up (a stays not ready) when stop is
// closed, a read fails or a goes off.
func (a *absentKeys) load(db *badger.DB, stop <-chan struct{}) error {
	batch := make([]uint64, 0, absentBatch)
	exps := make([]int64, 0, absentBatch)
	flush := func() bool {
		a.mu.Lock()
		for i, h := range batch {
			a.addLocked(h, exps[i])
		}
		off := a.keys == nil
		a.mu.Unlock()
		batch, exps = batch[:0], exps[:0]
		return !off
	}
	for _, p := range a.prefixes {
		err := db.View(func(txn *badger.Txn) error {
			if a.hold != nil {
				<-a.hold
			}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p}) // keys only: no values prefetched
			defer it.Close()
			for it.Seek(p); it.Valid(); it.Next() {
				item := it.Item()
				batch = append(batch, maphash.Bytes(a.seed, item.Key()))
				exps = append(exps, int64(item.ExpiresAt()))
				if len(batch) < absentBatch {
					continue
				}
				if !flush() {
					return nil // off
				}
				select {
				case <-stop:
					return errStopped
				default:
				}
			}
			flush()
			return nil
		})
		if err != nil {
			return err
		}
		if a.off.Load() {
			return nil
		}
	}
	a.ready.Store(true) // off from here on too: absent checks off first
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
