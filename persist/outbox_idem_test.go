package persist

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// countingKV counts a KV's reads: single gets, and batches (GetMany).
type countingKV struct {
	KV
	gets, batches int
}

func (c *countingKV) Get(k []byte) ([]byte, error) { c.gets++; return c.KV.Get(k) }

func (c *countingKV) GetMany(keys [][]byte) ([][]byte, error) {
	c.batches++
	return GetMany(c.KV, keys)
}

// idemOneByOne is the look-up IdemFind replaces: IdemOf each id in turn, then Idem.
func idemOneByOne(o *Outbox, ids []string, idemID string) (domain.IdemRecord, error) {
	for _, id := range ids {
		if id == "" {
			continue
		}
		rec, err := o.IdemOf(id)
		if err == nil || !errors.Is(err, domain.ErrRecordNotFound) {
			return rec, err
		}
	}
	return o.Idem(idemID)
}

// IdemFind finds what IdemOf and Idem one at a time find, in every state a message's record
// can be in (pending here, pending and marked, settled, of another process, without a key,
// older than a key binds), with a never-used key's look-up in one batch of reads.
func TestIdemFindAsOneByOne(t *testing.T) {
	clock := &testClock{}
	t0 := time.Now().Truncate(time.Millisecond)
	clock.set(t0)
	ctx := context.Background()
	mem := NewMemory()
	defer mem.Close()
	kv := &countingKV{KV: mem}
	o, _ := bootOutbox(t, kv, clock)
	accept := func(id, hash string, at time.Time) domain.OutboxEntry {
		e := queued(id, at)
		if err := o.Accept(ctx, &e, hash); err != nil {
			t.Fatal(err)
		}
		return e
	}
	old := accept("old", "h-old", t0) // settled below
	accept("marked", "h-marked", t0)  // pending long: marked by the checkpoint
	clock.add(markAfter + time.Second)
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	accept("pending", "h-pending", clock.now()) // pending, not marked
	settled := accept("settled", "h-set", clock.now())
	accept("nohash", "", clock.now()) // accepted without a key
	for _, e := range []domain.OutboxEntry{old, settled} {
		e.SetStatus(domain.MsgSent, clock.now())
		o.Settle(e, func(error) {})
	}
	o.Flush()
	op, err := o.IdemOp("k/own", domain.IdemRecord{BodyHash: "h-own", CampaignID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit(ctx, op); err != nil {
		t.Fatal(err)
	}
	here := o
	other, _ := bootOutbox(t, kv, clock) // booted: finds what is pending
	fresh := NewOutbox(kv)               // another process, not booted
	fresh.now = clock.now
	names := []string{"", "none", "old", "marked", "pending", "settled", "nohash"}
	for _, at := range []time.Duration{0, domain.IdempotencyTTL} {
		clock.set(t0.Add(markAfter + time.Second + at))
		for oi, o := range []*Outbox{here, other, fresh} {
			for _, a := range names {
				for _, b := range names {
					for _, own := range []string{"", "k/none", "k/own"} {
						ids := []string{a, b}
						want, werr := idemOneByOne(o, ids, own)
						got, gerr := o.IdemFind(ids, own, func(domain.IdemRecord) bool { return true })
						if fmt.Sprint(got, errors.Is(gerr, domain.ErrRecordNotFound), gerr == nil) !=
							fmt.Sprint(want, errors.Is(werr, domain.ErrRecordNotFound), werr == nil) {
							t.Fatalf("+%v outbox %d, ids %q, own %q: IdemFind %+v %v, one by one %+v %v", at, oi, ids, own, got, gerr, want, werr)
						}
					}
				}
			}
		}
	}
	clock.set(t0.Add(markAfter + time.Second))
	// A never-used key: one batch, no read on its own.
	kv.gets, kv.batches = 0, 0
	if _, err := other.IdemFind([]string{"n1", "n2", "n3", ""}, "k/n", func(domain.IdemRecord) bool { return true }); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatal(err)
	}
	if kv.gets != 0 || kv.batches != 1 {
		t.Fatalf("a new key read %d keys one by one and %d batches, want 0 and 1", kv.gets, kv.batches)
	}
	// A replay of a message pending here reads its accept alone.
	kv.gets, kv.batches = 0, 0
	if got, err := here.IdemFind([]string{"pending", "n2"}, "k/n", func(domain.IdemRecord) bool { return true }); err != nil || got.MessageID != "pending" {
		t.Fatalf("pending replay: %+v %v", got, err)
	}
	if kv.gets != 1 || kv.batches != 0 {
		t.Fatalf("a pending replay read %d keys one by one and %d batches, want 1 and 0", kv.gets, kv.batches)
	}
	// On a store that reads a key at a time, the caller reads one by one.
	if _, err := NewOutbox(mem).IdemFind([]string{"pending"}, "", func(domain.IdemRecord) bool { return true }); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("on Memory: %v", err)
	}
	// keep decides: the first kept, in order, else not found.
	got, err := here.IdemFind([]string{"settled", "pending"}, "k/own", func(r domain.IdemRecord) bool { return r.BodyHash != "h-set" })
	if err != nil || got.MessageID != "pending" {
		t.Fatalf("kept: %+v %v", got, err)
	}
	got, err = here.IdemFind([]string{"settled"}, "k/own", func(r domain.IdemRecord) bool { return r.MessageID == "" })
	if err != nil || got.CampaignID != "c1" {
		t.Fatalf("own kept: %+v %v", got, err)
	}
	if _, err := here.IdemFind([]string{"settled"}, "k/own", func(domain.IdemRecord) bool { return false }); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("none kept: %v", err)
	}
}
