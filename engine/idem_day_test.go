package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// idemClock is real time plus an offset a test moves (the sessions' pacing and timers keep
// running on it).
type idemClock struct{ off atomic.Int64 }

func (c *idemClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *idemClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// toBeforeMidnight moves the clock to d before the next UTC midnight.
func (c *idemClock) toBeforeMidnight(d time.Duration) {
	now := c.now()
	c.advance(now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Add(-d).Sub(now))
}

// keyed runs a keyed send as httpapi does: the key's record looked up, and replayed when in
// force; else the message sent under the id the key derives.
type keyed struct {
	t   *testing.T
	e   *Engine
	u   domain.User
	net *sim.Network
}

func idemEngine(t *testing.T) (keyed, *idemClock) {
	t.Helper()
	recs := persist.NewRecords(persist.NewMemory())
	net, err := sim.Open(sim.Options{Dir: t.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	clk := &idemClock{}
	e, u := startLinked(t, Config{Store: recs.Store, Records: recordsOf(recs), Network: net, Now: clk.now})
	return keyed{t: t, e: e, u: u, net: net}, clk
}

// send sends text to `to` under Idempotency-Key key (the body hash is the text's); replayed
// says it was answered from the key's record.
func (k keyed) send(key, to, text string) (m domain.OutboxEntry, replayed bool) {
	k.t.Helper()
	idem := &Idem{KeyID: "k1", Key: key, BodyHash: text}
	rec, found, release, err := k.e.Messages.BeginIdempotent(idem)
	if err != nil {
		k.t.Fatalf("key %s: %v", key, err)
	}
	if found {
		if m, err = k.e.Messages.Replay(k.u.ID, rec.MessageID); err != nil {
			k.t.Fatalf("replay %s: %v", rec.MessageID, err)
		}
		return m, true
	}
	defer release()
	m, err = k.e.Messages.Send(context.Background(), SendRequest{UserID: k.u.ID, Origin: "api", IdemID: idem.ID(),
		Idem: domain.IdemRecord{BodyHash: idem.BodyHash}, Message: domain.Message{ID: idem.Derived(), To: to, Kind: domain.KindText, Text: text}})
	if err != nil {
		k.t.Fatalf("send under key %s: %v", key, err)
	}
	return m, false
}

// delivered waits until the phone `to` has n messages and returns their ids.
func (k keyed) delivered(to string, n int) []string {
	k.t.Helper()
	var ids []string
	waitUntil(k.t, 10*time.Second, "the deliveries", func() bool {
		ids = ids[:0]
		for _, d := range k.net.Messages(to) {
			ids = append(ids, d.ID)
		}
		return len(ids) >= n
	})
	return ids
}

// settled waits until message id has its network outcome, so that what the phone got is all
// it will get of it.
func (k keyed) settled(id string) {
	k.t.Helper()
	waitUntil(k.t, 10*time.Second, id+" settled", func() bool {
		m, err := k.e.Messages.Get(k.u.ID, id)
		return err == nil && m.Final()
	})
}

// An Idempotency-Key used again after its 24 hours (the SPEC lets it) makes a new message with
// a new id, sent, while the old message is still kept (7 days). Its id was a function of the
// key alone: the new request was answered with the old message, and nothing was sent (and,
// once the old one was gone, the same WhatsApp id went out again, which receivers drop).
func TestIdempotencyKeyUsedAgainAfterItsDayMakesANewMessage(t *testing.T) {
	k, clk := idemEngine(t)
	const to = "491510000101"
	first, replayed := k.send("order-7", to, "first")
	if replayed {
		t.Fatal("the first use replayed")
	}
	k.settled(first.ID)
	// Within its 24 hours the key still binds: the retry is the first message.
	clk.advance(23 * time.Hour)
	if again, replayed := k.send("order-7", to, "first"); !replayed || again.ID != first.ID {
		t.Fatalf("a retry within 24 h: %s replayed %v, want %s replayed", again.ID, replayed, first.ID)
	}
	// After them, the same key (and the same body) makes a new message.
	clk.advance(time.Hour + time.Minute)
	second, replayed := k.send("order-7", to, "first")
	if replayed || second.ID == first.ID {
		t.Fatalf("the key used again after 24 h: %s replayed %v, want a new message (the first was %s)", second.ID, replayed, first.ID)
	}
	k.settled(second.ID)
	if ids := k.delivered(to, 2); len(ids) != 2 || ids[0] != first.ID || ids[1] != second.ID {
		t.Fatalf("the phone got %v, want %s then %s", ids, first.ID, second.ID)
	}
	if old, err := k.e.Messages.Get(k.u.ID, first.ID); err != nil || old.Message.Text != "first" {
		t.Fatalf("the old message: %+v %v, want it kept", old, err)
	}
	// The new message's key binds for its own 24 hours, across the next midnight too.
	clk.advance(23 * time.Hour)
	if again, replayed := k.send("order-7", to, "first"); !replayed || again.ID != second.ID {
		t.Fatalf("a retry of the second use: %s replayed %v, want %s", again.ID, replayed, second.ID)
	}
}

// A retry that straddles midnight (the first request a second before it, the retry a second
// after) is the first message, sent once; so is one whose node's clock is a little behind the
// node that made it (the message derived on the next day).
func TestIdempotencyKeyRetryAcrossMidnightIsTheFirstMessage(t *testing.T) {
	k, clk := idemEngine(t)
	const to = "491510000102"
	clk.toBeforeMidnight(time.Second)
	first, _ := k.send("edge-1", to, "at midnight")
	clk.advance(2 * time.Second)
	again, replayed := k.send("edge-1", to, "at midnight")
	if !replayed || again.ID != first.ID {
		t.Fatalf("the retry after midnight: %s replayed %v, want %s replayed", again.ID, replayed, first.ID)
	}
	// The other way: made just after midnight, retried where the clock is 2 s behind.
	clk.toBeforeMidnight(-time.Second)
	ahead, _ := k.send("edge-2", to, "after midnight")
	clk.advance(-2 * time.Second)
	if again, replayed := k.send("edge-2", to, "after midnight"); !replayed || again.ID != ahead.ID {
		t.Fatalf("the retry on a clock behind: %s replayed %v, want %s replayed", again.ID, replayed, ahead.ID)
	}
	k.settled(first.ID)
	k.settled(ahead.ID)
	if ids := k.delivered(to, 2); len(ids) != 2 {
		t.Fatalf("the phone got %v, want 2 messages (each sent once)", ids)
	}
}

// A message whose id the release before derived (of the key alone) still answers its retry
// within its 24 hours, and binds its key no longer after them.
func TestIdempotencyKeyRecordOfTheOlderDerivationAnswersItsRetry(t *testing.T) {
	k, clk := idemEngine(t)
	const to = "491510000103"
	old := DerivedID("k1", "legacy-1")
	if _, err := k.e.Messages.Send(context.Background(), SendRequest{UserID: k.u.ID, Origin: "api", IdemID: "k1/legacy-1",
		Idem: domain.IdemRecord{BodyHash: "before"}, Message: domain.Message{ID: old, To: to, Kind: domain.KindText, Text: "before"}}); err != nil {
		t.Fatal(err)
	}
	clk.advance(20 * time.Hour)
	if m, replayed := k.send("legacy-1", to, "before"); !replayed || m.ID != old {
		t.Fatalf("the retry of an older record: %s replayed %v, want %s", m.ID, replayed, old)
	}
	idem := &Idem{KeyID: "k1", Key: "legacy-1", BodyHash: "other"}
	if _, _, _, err := k.e.Messages.BeginIdempotent(idem); err != domain.ErrIdempotencyMismatch {
		t.Fatalf("another body under an older record: %v, want a mismatch", err)
	}
	clk.advance(5 * time.Hour)
	if m, replayed := k.send("legacy-1", to, "after"); replayed || m.ID == old {
		t.Fatalf("the key after the older record's 24 h: %s replayed %v, want a new message", m.ID, replayed)
	}
}

// The ids a key derives: one per day, none the older derivation's, and a campaign's a UUID of
// its own per day.
func TestIdemDerivesPerDay(t *testing.T) {
	noon := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := Idem{KeyID: "k1", Key: "x", At: noon}
	b := Idem{KeyID: "k1", Key: "x", At: noon.Add(11*time.Hour + 59*time.Minute)}
	c := Idem{KeyID: "k1", Key: "x", At: noon.Add(12 * time.Hour)}
	if a.Derived() != b.Derived() || a.Derived() == c.Derived() || a.Derived() == DerivedID("k1", "x") {
		t.Fatalf("message ids %s %s %s: want the first two equal (one day), the third new", a.Derived(), b.Derived(), c.Derived())
	}
	if a.DerivedCampaign() != b.DerivedCampaign() || a.DerivedCampaign() == c.DerivedCampaign() {
		t.Fatalf("campaign ids %s %s %s", a.DerivedCampaign(), b.DerivedCampaign(), c.DerivedCampaign())
	}
	if d := IdemDay(time.Unix(-1, 0)); d != -1 {
		t.Fatalf("IdemDay of the second before the epoch: %d, want -1", d)
	}
}
