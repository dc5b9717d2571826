package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
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

// A campaign whose numbers went out before a kill -9 that lost both its cursor and the count
// of those messages is resumed at boot without giving their allowance back: the numbers the
// outbox holds are not reserved again (their allowance is in the mark the dead process left),
// so the month's limit holds. The resume used to reclaim the whole mark for them and then
// release it as each number was found settled: the user could send the limit again.
func TestCampaignResumedAfterKillKeepsTheLimit(t *testing.T) {
	const limit = 3
	recs := persist.NewRecords(persist.NewMemory())
	dir := t.TempDir()
	ctx := context.Background()
	start := func(r Records) (*Engine, *sim.Network) {
		net, err := sim.Open(sim.Options{Dir: dir, AutoPair: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{Store: recs.Store, Records: r, Network: net,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Plans:  Plans{"small": {MonthlyMessages: limit}}, DefaultPlan: "small"})
		if err != nil {
			t.Fatal(err)
		}
		return e, net
	}

	r := recordsOf(recs)
	r.Campaigns, r.Accounts = killedCampaigns{recs.Campaigns}, killedAccounts{recs.Accounts}
	e1, net1 := start(r)
	u, err := e1.Users.Create(ctx, NewUser{ID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Sessions.QR(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "linked", func() bool { return e1.Sessions.Status(u.ID).Status == domain.StatusConnected })
	numbers := []string{"491510000001", "491510000002", "491510000003"}
	c, err := e1.Campaigns.Start(ctx, CampaignRequest{UserID: u.ID, Numbers: numbers, Message: "hi"})
	if err != nil || c.Granted != limit {
		t.Fatalf("start: %+v %v", c, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if c, err = e1.Campaigns.Wait(wctx, c.ID); err != nil || c.Successful != limit {
		t.Fatalf("first run: %+v %v", c, err)
	}
	e1.Stop(ctx)
	net1.Close()
	// What the kill left: the mark of the campaign's reservation, no message counted, the
	// campaign at its first number, and every number sent in the outbox.
	if a, err := recs.Accounts.GetAccount(u.ID); err != nil || a.Sent != 0 || a.Mark != limit {
		t.Fatalf("the account the kill left: %+v %v", a, err)
	}
	if s, err := recs.Campaigns.LoadCampaign(c.ID); err != nil || s.Cursor != 0 || s.Done() {
		t.Fatalf("the campaign the kill left: %+v %v", s, err)
	}

	e2, net2 := start(recordsOf(recs))
	defer net2.Close()
	defer e2.Stop(ctx)
	waitUntil(t, 20*time.Second, "the resumed campaign completed", func() bool {
		s, err := e2.Campaigns.Get(u.ID, c.ID)
		return err == nil && s.Status == domain.CampaignCompleted
	})
	for i := range numbers {
		m, err := e2.Messages.Get(u.ID, CampaignMessageID(c.ID, i))
		if err != nil || m.Attempts != 1 {
			t.Fatalf("number %d: %+v %v, want sent once", i, m, err)
		}
	}
	a, err := e2.Messages.Allowance(ctx, u.ID)
	if err != nil || a.Remaining != 0 {
		t.Fatalf("allowance after %d messages of %d: %+v %v, want none left", limit, limit, a, err)
	}
	_, err = e2.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "491510000009", Kind: domain.KindText, Text: "one more"}})
	if !errors.Is(err, domain.ErrQuotaExceeded) {
		t.Fatalf("a message past the limit: %v, want quota exceeded", err)
	}
}
