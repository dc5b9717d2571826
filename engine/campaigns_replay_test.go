package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// lostAnswerCampaigns stores a campaign's accept and then reports it failed, once armed (a
// commit whose answer was lost: the records stream's leader killed after it replicated), and
// reads a campaign as absent once armed (a replica behind that commit).
type lostAnswerCampaigns struct {
	*persist.Campaigns
	lostAnswer
	behind atomic.Bool
}

func (s *lostAnswerCampaigns) Accept(ctx context.Context, c domain.Campaign, idemID string, rec domain.IdemRecord) error {
	return s.answer(s.Campaigns.Accept(ctx, c, idemID, rec))
}

func (s *lostAnswerCampaigns) LoadCampaign(id string) (domain.Campaign, error) {
	if s.behind.Swap(false) {
		return domain.Campaign{}, domain.ErrRecordNotFound
	}
	return s.Campaigns.LoadCampaign(id)
}

// A campaign stored by an accept that answered an error, replayed under its Idempotency-Key:
// answered as it stands (never campaign_not_found) and run here, each number sent once. It
// used to be answered 404 when the read missed the campaign its key's record names, and, when
// the read found it, 202 "queued" while nothing ran it until its partition's next boot.
func TestCampaignAcceptThatSeemedToFailRunsOnReplay(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	cs := &lostAnswerCampaigns{Campaigns: recs.Campaigns}
	r := recordsOf(recs)
	r.Campaigns = cs
	e, u := linkedEngineOn(t, recs, r)
	ctx := context.Background()

	idem := Idem{KeyID: "k1", Key: "bulk-1", BodyHash: "h", At: e.now()}
	// A delay between the numbers keeps it running while it is replayed again below.
	req := CampaignRequest{UserID: u.ID, Numbers: []string{"491510000001", "491510000002"}, Message: "hi", Delay: 0.3,
		ID: idem.DerivedCampaign(), Idem: &idem}
	cs.lose.Store(true)
	if _, err := e.Campaigns.Start(ctx, req); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("the accept whose answer was lost: %v, want unavailable", err)
	}
	rec, found, _, err := e.Messages.BeginIdempotent(&idem)
	if err != nil || !found || rec.CampaignID != idem.DerivedCampaign() {
		t.Fatalf("the key's record: %+v %v %v", rec, found, err)
	}

	// A read behind the commit: the client is told to retry, not that the campaign is gone.
	cs.behind.Store(true)
	if _, err := e.Campaigns.Replay(u.ID, rec.CampaignID); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("replay read behind the commit: %v, want unavailable", err)
	}

	// The retry finds it: answered as it stands (its actor, spawned by the replay, may have sent
	// and even ended already under load), and it runs.
	st, err := e.Campaigns.Replay(u.ID, rec.CampaignID)
	if err != nil || st.ID != rec.CampaignID {
		t.Fatalf("replay: %+v %v", st, err)
	}
	// Replayed again (and started again under the same id) while it runs: not a second actor.
	if _, err := e.Campaigns.Replay(u.ID, rec.CampaignID); err != nil {
		t.Fatal(err)
	}
	if again, err := e.Campaigns.Start(ctx, req); err != nil || again.ID != st.ID {
		t.Fatalf("start again under the same id: %+v %v", again, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done, err := e.Campaigns.Wait(wctx, st.ID)
	if err != nil {
		t.Fatalf("the replayed campaign never ended: %v", err)
	}
	if done.Status != domain.CampaignCompleted || done.Successful != 2 {
		t.Fatalf("ended: %s, %d successful, want completed, 2", done.Status, done.Successful)
	}
	for i := range req.Numbers {
		m, err := e.Messages.Get(u.ID, CampaignMessageID(st.ID, i))
		if err != nil || m.Attempts != 1 {
			t.Fatalf("number %d: %+v %v, want sent once", i, m, err)
		}
	}
}
