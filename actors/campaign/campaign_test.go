package campaign

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
)

// world is the campaign actor's whole world: storage, numbers, sender, outbox, allowance and
// views, in memory.
type world struct {
	mu       sync.Mutex
	saved    []domain.Campaign
	details  []domain.CampaignDetail
	sent     []string // recipients, in order
	outbox   map[string]domain.OutboxEntry
	released int64
	done     chan domain.Campaign
}

func (w *world) SaveCampaign(_ context.Context, s domain.Campaign, d *domain.CampaignDetail, _ bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.saved = append(w.saved, s)
	if d != nil {
		w.details = append(w.details, *d)
	}
	return nil
}

func (w *world) LoadCampaign(string) (domain.Campaign, error) {
	return domain.Campaign{}, errors.New("not persisted yet") // the spawn state stands
}

func (w *world) Normalize(number string) (string, error) {
	n := strings.TrimPrefix(number, "+")
	if _, err := strconv.Atoi(n); err != nil {
		return "", domain.ErrInvalidPhone
	}
	return n, nil
}

func (w *world) MessageID(campaignID string, idx int) string {
	return campaignID + "-" + strconv.Itoa(idx)
}

func (w *world) Send(_ context.Context, _ domain.Campaign, to, msgID string) (domain.OutboxEntry, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, to)
	return domain.OutboxEntry{ID: msgID, Status: domain.MsgSent}, nil
}

func (w *world) Outcome(msgID string) (domain.OutboxEntry, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.outbox[msgID]
	return e, ok
}

func (w *world) Release(_ string, n int64) { w.mu.Lock(); w.released += n; w.mu.Unlock() }

func (w *world) Publish(s domain.Campaign) {
	if s.Done() {
		w.done <- s
	}
}

func (w *world) Now() time.Time { return time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC) }

var (
	_ Store     = (*world)(nil)
	_ Numbers   = (*world)(nil)
	_ Sender    = (*world)(nil)
	_ Outbox    = (*world)(nil)
	_ Allowance = (*world)(nil)
	_ Publisher = (*world)(nil)
	_ Clock     = (*world)(nil)
)

// A campaign sends its numbers in order; a number the outbox already settled (an earlier run
// sent it) is not sent again, and an invalid number fails alone; neither keeps its allowance.
func TestCampaignSendsInOrderThroughItsInterfaces(t *testing.T) {
	w := &world{done: make(chan domain.Campaign, 1), outbox: map[string]domain.OutboxEntry{
		"c1-0": {ID: "c1-0", Status: domain.MsgSent, CreatedAt: domain.MillisOf(time.Now())},
	}}
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{Store: w, Clock: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Numbers: w, Sender: w, Outbox: w, Allowance: w, Publisher: w}
	st := domain.Campaign{ID: "c1", UserID: "u1", Status: domain.CampaignQueued, Granted: 4,
		Numbers: []string{"+4915100000000", "+4915111111111", "not a number", "4915122222222"}}
	hw.Spawn(New(st, deps), "campaign", actor.WithID("c1"))

	var end domain.Campaign
	select {
	case end = <-w.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the campaign did not finish")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if end.Status != domain.CampaignCompleted || end.Successful != 3 || end.Failed != 1 || len(end.Details) != 4 {
		t.Fatalf("final view: status %s, %d ok, %d failed, %d details", end.Status, end.Successful, end.Failed, len(end.Details))
	}
	if got := strings.Join(w.sent, ","); got != "4915111111111,4915122222222" {
		t.Fatalf("sent to %s", got)
	}
	if end.Details[0].MessageID != "c1-0" || !end.Details[0].Success || end.Details[2].Success {
		t.Fatalf("details: %+v", end.Details)
	}
	if w.released != 2 {
		t.Fatalf("released %d, want 2 (the number the outbox settled, the invalid one)", w.released)
	}
	if len(w.details) != 4 || !w.saved[len(w.saved)-1].Done() {
		t.Fatalf("saved %d details, last record %+v", len(w.details), w.saved[len(w.saved)-1])
	}
}
