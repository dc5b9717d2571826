package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// fullDisk is the world with storage that refuses writes while full is set: the accept of a
// number (the Sender) and the campaign's own records.
type fullDisk struct {
	*world
	full atomic.Bool
	// refused counts the accepts refused while full.
	refused atomic.Int64
	// finalSaved is set when a final record landed; doneEarly when the end was published
	// before it.
	finalSaved, doneEarly atomic.Bool
}

func (f *fullDisk) SaveCampaign(ctx context.Context, s domain.Campaign, d *domain.CampaignDetail, final bool) error {
	if f.full.Load() {
		return domain.ErrStorageUnavailable
	}
	if final {
		f.finalSaved.Store(true)
	}
	return f.world.SaveCampaign(ctx, s, d, final)
}

func (f *fullDisk) Send(ctx context.Context, s domain.Campaign, to, msgID string) (domain.OutboxEntry, error) {
	if f.full.Load() {
		f.refused.Add(1)
		return domain.OutboxEntry{ID: msgID}, fmt.Errorf("%w: outbox: %w", domain.ErrUnavailable, domain.ErrStorageUnavailable)
	}
	return f.world.Send(ctx, s, to, msgID)
}

func (f *fullDisk) Publish(s domain.Campaign) {
	if s.Done() && !f.finalSaved.Load() {
		f.doneEarly.Store(true)
	}
	f.world.Publish(s)
}

// A campaign running when storage fills waits, keeps every number's reservation, and goes on
// by itself once storage returns: each number sent once, every detail saved, the end published
// only once the final record is durable, one log line each way.
func TestCampaignWaitsForStorage(t *testing.T) {
	f := &fullDisk{world: &world{done: make(chan domain.Campaign, 1), outbox: map[string]domain.OutboxEntry{}}}
	var logs strings.Builder
	var logMu sync.Mutex
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{Store: f, Clock: f, Log: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil)),
		Numbers: f, Sender: f, Outbox: f, Allowance: f, Publisher: f}
	numbers := make([]string, 6)
	for i := range numbers {
		numbers[i] = "49151000000" + strconv.Itoa(i)
	}
	st := domain.Campaign{ID: "c2", UserID: "u1", Status: domain.CampaignQueued, Granted: 6, Numbers: numbers, Delay: 0.05}
	f.full.Store(true)
	hw.Spawn(New(st, deps), "campaign", actor.WithID("c2"))
	for deadline := time.Now().Add(10 * time.Second); f.refused.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the campaign tried %d times under a full disk, want a few retries", f.refused.Load())
		}
	}
	f.full.Store(false)

	var end domain.Campaign
	select {
	case end = <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the campaign did not go on after storage returned")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if end.Status != domain.CampaignCompleted || end.Successful != 6 || end.Failed != 0 {
		t.Fatalf("final view: %s, %d ok, %d failed", end.Status, end.Successful, end.Failed)
	}
	if got := strings.Join(f.sent, ","); got != strings.Join(numbers, ",") {
		t.Fatalf("sent %s, want each number once, in order", got)
	}
	if len(f.details) != 6 || f.released != 0 {
		t.Fatalf("%d details saved, %d released", len(f.details), f.released)
	}
	if f.doneEarly.Load() {
		t.Fatal("the end was published before the final record was durable")
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if strings.Count(out, "refuses its writes") != 1 || strings.Count(out, "accepts its writes again") != 1 {
		t.Fatalf("want one line each way:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
