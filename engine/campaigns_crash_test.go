package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// killedCampaigns keeps a campaign's accept and loses every write of its progress: the process
// died after its numbers went out, before its cursor was written.
type killedCampaigns struct{ *persist.Campaigns }

func (s killedCampaigns) SaveCampaign(ctx context.Context, c domain.Campaign, d *domain.CampaignDetail, final bool) error {
	if c.Cursor > 0 {
		return nil
	}
	return s.Campaigns.SaveCampaign(ctx, c, d, final)
}

// killedAccounts keeps the marks written before the first message was counted and loses every
// write after it: the count written behind (every 20 ms) that a kill -9 cut short.
type killedAccounts struct{ account.Store }

func (s killedAccounts) PutAccount(ctx context.Context, a domain.Allowance) error {
	if a.Sent > 0 {
		return nil
	}
	return s.Store.PutAccount(ctx, a)
}

// killedCampaign runs a campaign of numbers (delay seconds apart) for user u1 with a monthly
// limit, until its first sent numbers are out, and kills its engine there: the store keeps the
// campaign at its first number and the account's marks but none of its counted messages. It
// returns an engine started on the store it left (stopped with the test) and the campaign.
// wrap, when given, changes the records the engine after the kill starts on.
func killedCampaign(t *testing.T, limit int64, numbers []string, delay float64, sent int, wrap ...func(r *Records, c domain.Campaign)) (*Engine, domain.Campaign) {
	t.Helper()
	recs := persist.NewRecords(persist.NewMemory())
	dir := t.TempDir()
	ctx := context.Background()
	boot := func(r Records) (*Engine, error) {
		net, err := sim.Open(sim.Options{Dir: dir, AutoPair: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { net.Close() })
		return New(Config{Store: recs.Store, Records: r, Network: net,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Plans:  Plans{"small": {MonthlyMessages: limit}}, DefaultPlan: "small"})
	}
	start := func(r Records) *Engine {
		e, err := boot(r)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	r := recordsOf(recs)
	r.Campaigns, r.Accounts = killedCampaigns{recs.Campaigns}, killedAccounts{recs.Accounts}
	e1 := start(r)
	u := linkU1(t, e1)
	c, err := e1.Campaigns.Start(ctx, CampaignRequest{UserID: u.ID, Numbers: numbers, Message: "hi", Delay: delay})
	if err != nil || c.Granted != len(numbers) {
		t.Fatalf("start: %+v %v", c, err)
	}
	waitUntil(t, 20*time.Second, "the first numbers sent", func() bool {
		for i := range sent {
			if m, err := e1.Messages.Get(u.ID, CampaignMessageID(c.ID, i)); err != nil || !m.Final() {
				return false
			}
		}
		return true
	})
	mark, err := recs.Accounts.GetAccount(u.ID)
	e1.Stop(ctx)
	// What the kill left: the mark of the campaign's reservation, no message counted, the
	// campaign at its first number.
	if err != nil || mark.Sent != 0 || mark.Mark < int64(len(numbers)) {
		t.Fatalf("the account the kill left: %+v %v", mark, err)
	}
	if s, err := recs.Campaigns.LoadCampaign(c.ID); err != nil || s.Cursor != 0 || s.Done() {
		t.Fatalf("the campaign the kill left: %+v %v", s, err)
	}
	r = recordsOf(recs)
	for _, w := range wrap {
		w(&r, c)
	}
	e2, err := boot(r)
	if err != nil && len(wrap) > 0 {
		// A boot the wrapped records failed: the next one, as the process's restart.
		t.Logf("the boot after the kill failed (%v): booted again", err)
		e2, err = boot(r)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Stop(ctx) })
	return e2, c
}

// A campaign whose numbers went out before a kill -9 that lost both its cursor and the count
// of those messages is resumed at boot without giving their allowance back: the numbers the
// outbox holds are not reserved again (their allowance is in the mark the dead process left),
// so the month's limit holds. The resume used to reclaim the whole mark for them and then
// release it as each number was found settled: the user could send the limit again.
func TestCampaignResumedAfterKillKeepsTheLimit(t *testing.T) {
	const limit = 3
	numbers := []string{"491510000001", "491510000002", "491510000003"}
	e, c := killedCampaign(t, limit, numbers, 0, len(numbers))
	ctx := context.Background()
	waitUntil(t, 20*time.Second, "the resumed campaign completed", func() bool {
		s, err := e.Campaigns.Get(c.UserID, c.ID)
		return err == nil && s.Status == domain.CampaignCompleted
	})
	for i := range numbers {
		m, err := e.Messages.Get(c.UserID, CampaignMessageID(c.ID, i))
		if err != nil || m.Attempts != 1 {
			t.Fatalf("number %d: %+v %v, want sent once", i, m, err)
		}
	}
	a, err := e.Messages.Allowance(ctx, c.UserID)
	if err != nil || a.Remaining != 0 {
		t.Fatalf("allowance after %d messages of %d: %+v %v, want none left", limit, limit, a, err)
	}
	_, err = e.Messages.Send(ctx, SendRequest{UserID: c.UserID, Origin: "api",
		Message: domain.Message{To: "491510000009", Kind: domain.KindText, Text: "one more"}})
	if !errors.Is(err, domain.ErrQuotaExceeded) {
		t.Fatalf("a message past the limit: %v, want quota exceeded", err)
	}
}

// A campaign resumed past a number sent before the kill, then cancelled, gives back what it
// holds and nothing more: not the number it found sent (it reserved nothing for it), and so
// not another reservation of the user's (a message scheduled meanwhile keeps its own).
func TestCampaignCancelledAfterResumeReleasesOnlyItsOwn(t *testing.T) {
	// A month of 5: the campaign's 3 and the block ahead make the kill's mark 4 (1 sent, its
	// count lost; 2 reserved again at boot).
	const limit = 5
	e, c := killedCampaign(t, limit, []string{"491510000001", "491510000002", "491510000003"}, 3600, 1)
	ctx := context.Background()
	waitUntil(t, 20*time.Second, "the resumed campaign past its first number", func() bool {
		s, err := e.Campaigns.Get(c.UserID, c.ID)
		return err == nil && s.Cursor == 1
	})
	if _, err := e.Messages.Send(ctx, SendRequest{UserID: c.UserID, Origin: "api", SendAt: time.Now().Add(time.Hour),
		Message: domain.Message{To: "491510000009", Kind: domain.KindText, Text: "later"}}); err != nil {
		t.Fatal(err)
	}
	if s, err := e.Campaigns.Cancel(ctx, c.UserID, c.ID); err != nil || s.Status != domain.CampaignCancelled {
		t.Fatalf("cancel: %+v %v", s, err)
	}
	// Used: the kill's mark less what the resume reclaimed and gave back (4 - 2), and the
	// scheduled message.
	if a, err := e.Messages.Allowance(ctx, c.UserID); err != nil || a.Remaining != limit-3 {
		t.Fatalf("allowance: %+v %v, want %d left", a, err, limit-3)
	}
}

// faltering is an outbox whose at-th read of one message fails (storage busy for a moment).
type faltering struct {
	Outbox
	id     string
	at     int32
	reads  atomic.Int32
	failed atomic.Bool
}

func (o *faltering) Get(id string) (domain.OutboxEntry, error) {
	if id == o.id && o.reads.Add(1) == o.at {
		o.failed.Store(true)
		return domain.OutboxEntry{}, fmt.Errorf("%w: storage busy", domain.ErrUnavailable)
	}
	return o.Outbox.Get(id)
}

// A campaign's resume that cannot read whether the outbox holds the number at its cursor does
// not take it for one never sent: it would reserve its allowance again, and give it back once
// the campaign found the number sent (the limit passed by one, as the kill's resume once did
// for every number). The boot fails instead (storage unavailable), as for its other reads.
func TestCampaignResumeThatCannotReadTheOutboxReservesNothing(t *testing.T) {
	const limit = 3
	numbers := []string{"491510000001", "491510000002", "491510000003"}
	var f *faltering
	e, c := killedCampaign(t, limit, numbers, 0, 1, func(r *Records, c domain.Campaign) {
		f = &faltering{Outbox: r.Outbox, id: CampaignMessageID(c.ID, 0), at: 1}
		r.Outbox = f
	})
	ctx := context.Background()
	if !f.failed.Load() {
		t.Fatal("the resume did not read the number at the cursor")
	}
	waitUntil(t, 20*time.Second, "the resumed campaign completed", func() bool {
		s, err := e.Campaigns.Get(c.UserID, c.ID)
		return err == nil && s.Status == domain.CampaignCompleted
	})
	_, err := e.Messages.Send(ctx, SendRequest{UserID: c.UserID, Origin: "api",
		Message: domain.Message{To: "491510000009", Kind: domain.KindText, Text: "one more"}})
	if err == nil {
		t.Fatalf("a message past the month's limit of %d was accepted", limit)
	}
}

// The same when the read that fails is the resumed campaign's own, of the number at its cursor
// (found sent by the resume, which reserved nothing for it): the campaign does not send it
// again as a number never sent, whose send finds it stored and gives back an allowance the
// campaign does not hold (another number's: a message past the limit while it waits).
func TestResumedCampaignThatCannotReadItsNumberWaitsForIt(t *testing.T) {
	const limit = 3
	numbers := []string{"491510000001", "491510000002", "491510000003"}
	var f *faltering
	e, c := killedCampaign(t, limit, numbers, 3600, 1, func(r *Records, c domain.Campaign) {
		f = &faltering{Outbox: r.Outbox, id: CampaignMessageID(c.ID, 0), at: 2} // the resume's read is the first
		r.Outbox = f
	})
	ctx := context.Background()
	waitUntil(t, 20*time.Second, "the resumed campaign past its first number", func() bool {
		s, err := e.Campaigns.Get(c.UserID, c.ID)
		return err == nil && s.Cursor == 1
	})
	if !f.failed.Load() {
		t.Fatal("the campaign did not read the number at its cursor")
	}
	// Its first number sent, the two others reserved: nothing left of the month.
	_, err := e.Messages.Send(ctx, SendRequest{UserID: c.UserID, Origin: "api",
		Message: domain.Message{To: "491510000009", Kind: domain.KindText, Text: "one more"}})
	if !errors.Is(err, domain.ErrQuotaExceeded) {
		t.Fatalf("a message past the month's limit of %d: %v, want quota exceeded", limit, err)
	}
}
