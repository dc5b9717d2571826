package persist

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// stampedKV is a memory KV that stamps each record with the time its write landed on the
// store's own clock (server: NATS stamps by the stream leader's) and reads by it as natskv does
// (ScanSince; ReadWritten), and counts the accept records its scans hand out. hold, when set,
// runs before a commit lands (a commit in flight, a process paused before its write).
type stampedKV struct {
	*Memory
	server  *testClock
	mu      sync.Mutex
	stamps  map[string]time.Time
	hold    func(ops []Op)
	scanned atomic.Int32 // accept records (msg_log) handed to a scan
}

func newStampedKV(t *testing.T, server *testClock) *stampedKV {
	k := &stampedKV{Memory: NewMemory(), server: server, stamps: map[string]time.Time{}}
	t.Cleanup(func() { k.Memory.Close() })
	return k
}

func (k *stampedKV) Commit(ctx context.Context, ops ...Op) error {
	k.mu.Lock()
	hold := k.hold
	k.mu.Unlock()
	if hold != nil {
		hold(ops)
	}
	if err := k.Memory.Commit(ctx, ops...); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, op := range ops {
		k.stamps[string(op.Key)] = k.server.now()
	}
	return nil
}

func (k *stampedKV) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return k.ScanSince(prefix, time.Time{}, fn)
}

func (k *stampedKV) ScanSince(prefix []byte, since time.Time, fn func(key, value []byte) error) error {
	return k.Memory.Scan(prefix, func(key, value []byte) error {
		k.mu.Lock()
		at := k.stamps[string(key)]
		k.mu.Unlock()
		if at.Before(since) {
			return nil
		}
		if bytes.HasPrefix(key, []byte(messageLogTable+"/")) {
			k.scanned.Add(1)
		}
		return fn(key, value)
	})
}

func (k *stampedKV) ReadWritten(key []byte) ([]byte, time.Time, error) {
	v, err := k.Memory.Get(key)
	if err != nil {
		return nil, time.Time{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return v, k.stamps[string(key)], nil
}

func (k *stampedKV) setHold(hold func(ops []Op)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.hold = hold
}

func (k *stampedKV) has(key string) bool {
	_, err := k.Memory.Get([]byte(key))
	return err == nil
}

// floorNode is a process's outbox on kv whose engine clock is the store's plus skew, booted.
type floorNode struct {
	o     *Outbox
	clock *testClock
	got   []string // what its boot found pending
}

func bootNode(t *testing.T, kv *stampedKV, skew time.Duration) *floorNode {
	t.Helper()
	clock := &testClock{}
	clock.set(kv.server.now().Add(skew))
	o := NewOutbox(kv)
	o.now = clock.now
	p, err := o.Pending()
	if err != nil {
		t.Fatal(err)
	}
	n := &floorNode{o: o, clock: clock}
	for _, e := range p {
		n.got = append(n.got, e.ID)
	}
	return n
}

// pass moves time on by d for the store and every node (one real clock, read differently).
func pass(kv *stampedKV, d time.Duration, nodes ...*floorNode) {
	kv.server.add(d)
	for _, n := range nodes {
		n.clock.add(d)
	}
}

// takeOver is the next owner's boot, after d (its clock the store's plus skew), which finds
// want pending.
func takeOver(t *testing.T, kv *stampedKV, d, skew time.Duration, want []string) *floorNode {
	t.Helper()
	pass(kv, d)
	n := bootNode(t, kv, skew)
	sameIDs(t, n.got, want)
	return n
}

// rhythm is the engine's Checkpoint every 5 s, n times.
func rhythm(t *testing.T, kv *stampedKV, n *floorNode, times int) {
	t.Helper()
	for range times {
		pass(kv, 5*time.Second, n)
		if err := n.o.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
}

// On a store that reads records by their write time (NATS), a boot reads the accepts written
// since the floor kept beside the checkpoint (a time on the store's clock), not the partition's
// whole history (two weeks of accepts: bodyTTL), and still finds every message pending: the
// marked ones, and those without a mark, accepted by a node whose clock was an hour ahead of
// the store's or an hour behind (a bound by the accepts' own times, branch boot9's 8690876,
// lost the one accepted ahead). The code before read every accept record (28 here for the 5
// written since the floor).
func TestOutboxBootReadsTheAcceptsSinceTheFloor(t *testing.T) {
	for _, skew := range []time.Duration{0, time.Hour, -time.Hour} {
		t.Run("clock "+skew.String(), func(t *testing.T) {
			server := &testClock{}
			server.set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			kv := newStampedKV(t, server)
			a := bootNode(t, kv, skew)
			settleAll(a.o, acceptN(t, a.o, "u", "old", 20, a.clock.now()))
			long := acceptN(t, a.o, "u", "long", 3, a.clock.now()) // queued for long: marked
			pass(kv, markAfter+time.Minute, a)
			rhythm(t, kv, a, 1)
			pass(kv, 3*time.Hour, a)
			// The engine's rhythm runs on meanwhile: the outbox has read a store time a few
			// seconds old when the next messages are indexed (the floor is the time read before
			// a message was indexed, less RecountSkew: without these it is the one read three
			// hours ago, and the boot reads every accept since).
			rhythm(t, kv, a, 2)
			recent := acceptN(t, a.o, "u", "recent", 5, a.clock.now())
			settleAll(a.o, recent[:2])
			rhythm(t, kv, a, 2)
			kv.scanned.Store(0) // a kill -9; the next owner's boot ten minutes later
			takeOver(t, kv, 10*time.Minute, 0, append(long, recent[2:]...))
			if n := kv.scanned.Load(); n > int32(len(recent)) {
				t.Errorf("the boot read %d accept records, want at most the %d written since the floor", n, len(recent))
			}
		})
	}
}

// The cases of a takeover: each would lose a queued message to a floor taken as the
// checkpoint's own write time less markAfter and a margin.
func TestOutboxFloorTakeovers(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) (*stampedKV, *floorNode) {
		server := &testClock{}
		server.set(start)
		kv := newStampedKV(t, server)
		a := bootNode(t, kv, time.Hour)
		settleAll(a.o, acceptN(t, a.o, "u", "old", 10, a.clock.now()))
		rhythm(t, kv, a, 2)
		return kv, a
	}
	// The checkpoint computed while a message waits unmarked, its commit landing two minutes
	// later (a process paused before its write, a commit held in a queue); the owner dies.
	t.Run("checkpoint landing late", func(t *testing.T) {
		kv, a := setup(t)
		m := acceptN(t, a.o, "u", "m", 1, a.clock.now())
		pass(kv, 25*time.Second, a)
		kv.setHold(func(ops []Op) {
			if slices.ContainsFunc(ops, func(op Op) bool { return bytes.Equal(op.Key, checkpointKey) }) {
				kv.server.add(2 * time.Minute)
			}
		})
		if err := a.o.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		kv.setHold(nil)
		takeOver(t, kv, time.Minute, 0, m)
	})
	// A checkpoint written by another node: the message the first owner left is found by the
	// second's boot (from the first's floor), which writes its own checkpoints and dies before
	// markAfter marks it; the third owner boots an hour later.
	t.Run("the next owner's checkpoint", func(t *testing.T) {
		kv, a := setup(t)
		m := acceptN(t, a.o, "u", "m", 1, a.clock.now())
		rhythm(t, kv, a, 2)
		b := takeOver(t, kv, 10*time.Minute, -time.Hour, m)
		rhythm(t, kv, b, 3)
		takeOver(t, kv, time.Hour, 0, m)
	})
	// A boot that read every accept (no floor: a store the release before wrote) knows no
	// floor for what it found: it writes none until those are marked or settled.
	t.Run("after a boot that read every accept", func(t *testing.T) {
		kv, a := setup(t)
		m := acceptN(t, a.o, "u", "m", 1, a.clock.now())
		rhythm(t, kv, a, 2)
		if err := kv.Memory.Commit(context.Background(), Op{Key: []byte("outbox_checkpoint/floor"), Delete: true}); err != nil {
			t.Fatal(err)
		}
		b := takeOver(t, kv, 10*time.Minute, 0, m)
		rhythm(t, kv, b, 3)
		if kv.has("outbox_checkpoint/floor") {
			t.Error("a floor written while a message the boot found by reading every accept waits unmarked")
		}
		c := takeOver(t, kv, time.Hour, 0, m)
		rhythm(t, kv, c, 7) // past markAfter: marked, a floor again
		if !kv.has("outbox_checkpoint/floor") {
			t.Error("no floor written once every message found was marked")
		}
	})
	// An accept whose commit landed and answered an error 20 s later (doubtful: Checkpoint
	// reads it back after markAfter), and an accept in flight while checkpoints are written.
	t.Run("an accept in doubt and one in flight", func(t *testing.T) {
		kv, a := setup(t)
		doubt := queued("doubt", a.clock.now())
		doubt.UserID = "u"
		a.o.index1(&doubt)
		op, err := a.o.acceptOp(context.Background(), doubt, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Commit(context.Background(), op); err != nil {
			t.Fatal(err)
		}
		pass(kv, 20*time.Second, a)
		a.o.accepted(doubt.ID, domain.ErrUnavailable)
		var (
			inFlight = make(chan struct{})
			release  = make(chan struct{})
			accepted = make(chan error, 1)
		)
		kv.setHold(func(ops []Op) {
			if bytes.HasPrefix(ops[0].Key, []byte(messageLogTable+"/")) {
				close(inFlight)
				<-release
			}
		})
		flying := queued("flying", a.clock.now())
		flying.UserID = "u"
		go func() { accepted <- a.o.Accept(context.Background(), &flying, "") }()
		<-inFlight
		kv.setHold(nil)
		rhythm(t, kv, a, 2)
		close(release)
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
		rhythm(t, kv, a, 2)
		takeOver(t, kv, 10*time.Minute, 0, []string{"doubt", "flying"})
	})
}

func sameIDs(t *testing.T, got, want []string) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
}
