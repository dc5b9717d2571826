package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/google/uuid"

	"github.com/gateway/gateway/actors/campaign"
)

// Campaigns is the bulk-send facet: starting, reading, waiting for and cancelling campaigns.
// Each running campaign is an actor (actors/campaign) that owns its cursor and timer and sends
// its numbers through Messages one at a time; the facet's registry holds the running ones (an
// ended campaign is read from storage).
type Campaigns struct {
	e     *Engine
	idx   registry[string, *campaignEntry]
	store CampaignStore
	late  lateness // the campaign timers' lateness (campaign.Observer)
	// reviveMu makes the check "running here?" and the spawn one step (Start, revive).
	reviveMu sync.Mutex
}

func newCampaigns(e *Engine) *Campaigns {
	c := &Campaigns{e: e, store: e.cfg.Records.Campaigns}
	c.idx.init()
	return c
}

// campaignEntry is a running campaign's actor and its last published view.
type campaignEntry struct {
	actorRef[domain.Campaign]
	lastProgress time.Time // the last campaign.progress event (at most one a second)
	// done is closed once the campaign's final view is published: waiters select on it rather
	// than message an actor that may already be gone.
	done     chan struct{}
	doneOnce sync.Once
	// unheld counts the numbers at the cursor that its resume found in the outbox and reserved
	// nothing for: the first releases of the campaign are theirs, and give nothing back.
	unheld atomic.Int64
}

// CampaignRequest is a bulk send.
type CampaignRequest struct {
	UserID    string
	SessionID string // "" = the user's default session
	Numbers   []string
	Message   string
	Delay     float64 // seconds
	// Name labels the campaign; Names, when set, is each number's {name} (one per number).
	Name  string
	Names []string
	// ID "" = a new one. A derived id (Idempotency-Key) makes the start idempotent: a campaign
	// that exists already is answered as it stands; Idem's record is committed with it.
	ID   string
	Idem *Idem
	// SendAt starts the campaign later (DESIGN.md section 18; zero: now): scheduled until then,
	// its allowance reserved at once.
	SendAt time.Time
}

// Start reserves min(len(numbers), remaining allowance) and starts the campaign actor.
// ErrQuotaExceeded when nothing is left this month.
func (c *Campaigns) Start(ctx context.Context, r CampaignRequest) (domain.Campaign, error) {
	ent, err := c.e.Sessions.forSend(r.UserID, r.SessionID)
	if err != nil {
		return domain.Campaign{}, err
	}
	if r.ID != "" {
		// A campaign accepted before (by a commit that seemed to fail, its key's record not
		// read yet): answered as it stands, and running.
		switch st, err := c.revive(r.UserID, r.ID); {
		case err == nil:
			return st, nil
		case !errors.Is(err, domain.ErrCampaignNotFound):
			return domain.Campaign{}, err
		}
	} else {
		r.ID = uuid.NewString()
	}
	startAt, err := SendAtLimits(r.SendAt, c.e.now())
	if err != nil {
		return domain.Campaign{}, err
	}
	res, err := c.e.Messages.reserve(ctx, r.UserID, int64(len(r.Numbers)), ReserveOpts{})
	if err != nil {
		return domain.Campaign{}, err
	}
	now := c.e.now().UTC()
	st := domain.Campaign{
		ID: r.ID, UserID: r.UserID, SessionID: ent.view.Load().ID, Name: r.Name, Message: r.Message,
		Numbers: r.Numbers, Names: r.Names, Delay: r.Delay, Status: domain.CampaignQueued, Granted: int(res.Granted()),
		CreatedAt: now, UpdatedAt: now,
	}
	if !startAt.IsZero() {
		st.Status, st.StartAt, st.NextAt = domain.CampaignScheduled, startAt.UTC(), startAt.UTC()
	}
	var idemID string
	var idem domain.IdemRecord
	if r.Idem != nil {
		idemID, idem = r.Idem.ID(), domain.IdemRecord{BodyHash: r.Idem.BodyHash, CampaignID: st.ID, At: domain.MillisOf(now)}
	}
	if err := c.store.Accept(ctx, st, idemID, idem); err != nil {
		res.Release()
		return domain.Campaign{}, fmt.Errorf("%w: save campaign: %w", domain.ErrUnavailable, err)
	}
	c.reviveMu.Lock()
	ce := c.idx.get(st.ID)
	if ce == nil {
		ce = c.spawn(st, 0)
	}
	c.reviveMu.Unlock()
	c.e.log.Info("campaign started", "campaign_id", st.ID, "user_id", st.UserID, "numbers", len(st.Numbers), "granted", st.Granted)
	return *ce.view.Load(), nil
}

func (c *Campaigns) spawn(st domain.Campaign, unheld int) *campaignEntry {
	ce := &campaignEntry{done: make(chan struct{})}
	ce.unheld.Store(int64(unheld))
	view := st
	ce.view.Store(&view)
	deps := campaign.Deps{
		Store: c.store, Clock: clockFunc(c.e.cfg.Now), Log: c.e.log,
		Numbers: campaignNumbers{}, Sender: campaignSender{c}, Outbox: campaignSender{c}, Allowance: campaignAllowance{c, ce},
		Publisher: campaignViews{c, ce}, Observer: &c.late, Audience: campaignAudience{c.e},
		AfterFunc: func(d time.Duration, f func()) campaign.Timer { return c.e.cfg.AfterFunc(d, f) },
	}
	c.idx.put(st.ID, ce)
	ce.pid = c.e.spawn(campaign.New(st, deps), "campaign", st.ID)
	return ce
}

// sendMessage sends one campaign number (its allowance reserved at the start).
func (c *Campaigns) sendMessage(ctx context.Context, s domain.Campaign, to, msgID string) (domain.OutboxEntry, error) {
	// Still the campaign user's, and connected (an admin may have reassigned it meanwhile; after
	// a restart it reconnects while the campaign resumes: the campaign waits for it).
	ent, err := c.e.Sessions.forSend(s.UserID, s.SessionID)
	if errors.Is(err, domain.ErrNotConnected) {
		return domain.OutboxEntry{ID: msgID}, fmt.Errorf("%w: %w", campaign.ErrSessionNotReady, err)
	}
	if err != nil {
		c.e.Messages.adopt(s.UserID, 1).Release()
		return domain.OutboxEntry{ID: msgID}, err
	}
	// The number's allowance is the campaign's (reserved at its start). The campaign waits for
	// the network's outcome: its details say sent or failed, and pacing stretches its cadence.
	res := c.e.Messages.adopt(s.UserID, 1)
	e, err := c.e.Messages.Send(ctx, SendRequest{
		UserID: s.UserID, SessionID: ent.view.Load().ID, Origin: "campaign:" + s.ID,
		// The actor sends the number at its cursor: that number's {name}.
		Message:  domain.Message{ID: msgID, To: to, Kind: domain.KindText, Text: s.TextFor(s.Cursor)},
		Reserved: res, Wait: campaignSendWait,
	})
	switch {
	case err == nil:
	case errors.Is(err, domain.ErrUnavailable):
		// Not accepted (storage refused it, a full disk): the campaign keeps the number's
		// allowance and tries it again (campaign.Sender).
		return domain.OutboxEntry{ID: msgID}, err
	default:
		res.Release()
	}
	return e, err
}

// campaignSendWait bounds a campaign's wait for one number's outcome: a message still queued
// then (a session paced, held or reconnecting) is left to its deliverer and the campaign asks
// the outbox for its outcome on its next step.
const campaignSendWait = 10 * time.Minute

// CampaignMessageID is the message id of a campaign's number: derived from the campaign id and
// the index, so a crash between the outbox and the campaign's own record cannot send it twice.
func CampaignMessageID(campaignID string, idx int) string {
	sum := sha256.Sum256([]byte(campaignID + "/" + strconv.Itoa(idx)))
	return "3EB0" + strings.ToUpper(hex.EncodeToString(sum[:10]))
}

// What a campaign actor consumes (campaign.Deps), implemented by the engine.

// campaignNumbers implements campaign.Numbers: the phone rule of every send, and message ids
// derived from the campaign.
type campaignNumbers struct{}

func (campaignNumbers) Normalize(number string) (string, error) { return NormalizePhone(number) }

func (campaignNumbers) MessageID(campaignID string, idx int) string {
	return CampaignMessageID(campaignID, idx)
}

// campaignAudience is the store loop's word on a campaign's numbers (campaign.Audience): the
// suppression list and the owner's quiet hours.
type campaignAudience struct{ e *Engine }

func (a campaignAudience) OptedOut(uid, phone string) bool { return a.e.OptOuts.Has(uid, phone) }

func (a campaignAudience) QuietUntil(uid string, t time.Time) (time.Time, bool) {
	return a.e.Users.QuietUntil(uid, t)
}

// campaignSender sends a campaign's numbers through the engine, looks earlier sends up in the
// outbox (campaign.Sender and Outbox).
type campaignSender struct{ c *Campaigns }

func (cs campaignSender) Send(ctx context.Context, s domain.Campaign, to, msgID string) (domain.OutboxEntry, error) {
	return cs.c.sendMessage(ctx, s, to, msgID)
}

// Outcome takes a number whose read fails for one pending (asked again in a moment), not for
// one never sent: its send would find it stored and give back an allowance the campaign may
// not hold (the numbers its resume found sent: campaignAllowance).
func (cs campaignSender) Outcome(msgID string) (domain.OutboxEntry, bool) {
	e, err := cs.c.e.Messages.msgs.outbox.Get(msgID)
	if err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
		return domain.OutboxEntry{ID: msgID, Status: domain.MsgQueued}, true
	}
	return e, err == nil
}

// campaignViews takes a campaign actor's views (campaign.Publisher): the entry's view, the
// campaign events, and at the end the metrics and the index.
type campaignViews struct {
	c  *Campaigns
	ce *campaignEntry
}

func (v campaignViews) Publish(s domain.Campaign) {
	c, ce := v.c, v.ce
	ce.view.Store(&s)
	c.event(ce, s)
	if s.Done() {
		ce.doneOnce.Do(func() { close(ce.done) })
		c.e.metrics.campaignsDone(s.Status)
		c.idx.delete(s.ID)
	}
}

// Interface guards.
var (
	_ campaign.Numbers   = campaignNumbers{}
	_ campaign.Sender    = campaignSender{}
	_ campaign.Outbox    = campaignSender{}
	_ campaign.Allowance = campaignAllowance{}
	_ campaign.Publisher = campaignViews{}
	_ campaign.Observer  = (*lateness)(nil)
	_ campaign.Audience  = campaignAudience{}
)

// Get returns one of the user's campaigns, with its details so far. ErrCampaignNotFound when
// storage has no such campaign of the user's; ErrUnavailable when storage cannot say.
func (c *Campaigns) Get(uid, id string) (domain.Campaign, error) {
	if ce := c.idx.get(id); ce != nil {
		if v := *ce.view.Load(); v.UserID == uid {
			return v, nil
		}
		return domain.Campaign{}, fmt.Errorf("%w: %s", domain.ErrCampaignNotFound, id)
	}
	s, err := c.store.LoadCampaign(id)
	switch {
	case errors.Is(err, domain.ErrRecordNotFound) || (err == nil && s.UserID != uid):
		return domain.Campaign{}, fmt.Errorf("%w: %s", domain.ErrCampaignNotFound, id)
	case err != nil:
		return domain.Campaign{}, fmt.Errorf("%w: campaign %s: %w", domain.ErrUnavailable, id, err)
	}
	return s, nil
}

// Replay returns the campaign an Idempotency-Key's record names (the replay of the request
// that made it), as it stands, running it here if it was accepted by a commit that seemed to
// fail (Start gave its allowance back and spawned nothing: it would have waited for its
// partition's next boot). The record is committed with the campaign, so a campaign storage
// does not show is a read behind that commit (a replica that has not applied it): unavailable
// (the client retries), never not found.
func (c *Campaigns) Replay(uid, id string) (domain.Campaign, error) {
	st, err := c.revive(uid, id)
	if errors.Is(err, domain.ErrCampaignNotFound) {
		return st, fmt.Errorf("%w: campaign %s: its Idempotency-Key's record is stored but the campaign is not readable here yet", domain.ErrUnavailable, id)
	}
	return st, err
}

// revive returns one of the user's campaigns, spawning its actor if it has not ended and does
// not run here (with its allowance reserved again, as at boot).
func (c *Campaigns) revive(uid, id string) (domain.Campaign, error) {
	st, err := c.Get(uid, id)
	if err != nil || st.Done() || c.idx.get(id) != nil {
		return st, err
	}
	c.reviveMu.Lock()
	defer c.reviveMu.Unlock()
	if ce := c.idx.get(id); ce != nil { // spawned meanwhile
		return *ce.view.Load(), nil
	}
	// Read again under the lock: an actor that ended between the first read and the lock has
	// left the index and written its end.
	if st, err = c.Get(uid, id); err != nil || st.Done() {
		return st, err
	}
	// Its first reservation went back when the accept seemed to fail: a new one (clipped by
	// what is left, as at boot).
	ce, err := c.resume(st, ReserveOpts{})
	if err != nil {
		return st, fmt.Errorf("%w: resume campaign %s: %w", domain.ErrUnavailable, id, err)
	}
	c.e.log.Warn("campaign: a campaign accepted by a commit that seemed to fail runs now", "campaign_id", id, "user_id", uid)
	return *ce.view.Load(), nil
}

// Wait returns once the campaign has ended (or ctx ends).
func (c *Campaigns) Wait(ctx context.Context, id string) (domain.Campaign, error) {
	ce := c.idx.get(id)
	if ce == nil {
		s, err := c.store.LoadCampaign(id)
		if err != nil {
			return s, fmt.Errorf("%w: %s", domain.ErrCampaignNotFound, id)
		}
		return s, nil
	}
	select {
	case <-ce.done:
		return *ce.view.Load(), nil
	case <-ctx.Done():
		return *ce.view.Load(), ctx.Err()
	}
}

// Cancel stops a running campaign before its next number. It answers once no send is
// in flight, so nothing is delivered after it.
func (c *Campaigns) Cancel(ctx context.Context, uid, id string) (domain.Campaign, error) {
	s, err := c.Get(uid, id)
	if err != nil {
		return s, err
	}
	ce := c.idx.get(id)
	if ce == nil || s.Done() {
		return s, nil
	}
	msg := &campaign.Cancel{Reply: make(chan domain.Campaign, 1)}
	c.e.hw.Send(ce.pid, msg)
	t := time.NewTimer(c.e.cfg.SendTimeout + 10*time.Second)
	defer t.Stop()
	select {
	case r := <-msg.Reply:
		return r, nil
	case <-ce.done: // it ended on its own just before the cancel arrived
		return *ce.view.Load(), nil
	case <-ctx.Done():
		return s, ctx.Err()
	case <-t.C:
		return s, fmt.Errorf("%w: the campaign did not answer in time", domain.ErrUnavailable)
	}
}

// open reads every campaign that had not ended (the engine's boot reads it beside the other
// facets' records: only campaign actors write campaigns, and none runs before boot).
func (c *Campaigns) open() ([]domain.Campaign, error) {
	var ids []string
	err := c.store.Each(func(s domain.Campaign) error {
		if !s.Done() {
			ids = append(ids, s.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine: load campaigns: %w", err)
	}
	open := make([]domain.Campaign, 0, len(ids))
	for _, id := range ids {
		s, err := c.store.LoadCampaign(id)
		if err != nil {
			return nil, fmt.Errorf("engine: load campaign %s: %w", id, err)
		}
		open = append(open, s)
	}
	return open, nil
}

// boot respawns every campaign that had not ended (open), re-reserving what it still needs
// (reservations live in memory and died with the last process).
func (c *Campaigns) boot(open []domain.Campaign) (int, error) {
	for _, s := range open {
		if _, err := c.resume(s, ReserveOpts{Reclaim: true}); err != nil {
			return 0, fmt.Errorf("engine: campaign %s: %w", s.ID, err)
		}
	}
	return len(open), nil
}

// resume spawns the actor of a stored campaign that has not ended, re-reserving what it still
// needs (reservations live in memory: they died with the last process, which boot reclaims
// (o.Reclaim), or went back when the campaign's accept seemed to fail).
//
// The numbers at its cursor that the outbox holds already (sent before a kill -9 lost the
// cursor's write) are not reserved: a settled one was counted by the last process (its count
// maybe lost with the kill, its allowance then in the ghost of the mark it left, which must
// stay used), a pending one by recover. Reclaiming them too gave back the allowance of
// messages that went out, once the campaign found them settled and released them.
func (c *Campaigns) resume(s domain.Campaign, o ReserveOpts) (*campaignEntry, error) {
	held := s.Cursor
	for ; held < s.Granted; held++ {
		// A read that fails is no answer: taken for a number never sent, it was reserved
		// again and given back once found sent (the limit passed by one).
		_, err := c.e.Messages.msgs.outbox.Get(CampaignMessageID(s.ID, held))
		if errors.Is(err, domain.ErrRecordNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: read the outbox: %w", domain.ErrUnavailable, err)
		}
	}
	if need := int64(s.Granted - held); need > 0 {
		res, err := c.e.Messages.reserve(context.Background(), s.UserID, need, o)
		granted := int64(0)
		switch {
		case err == nil:
			granted = res.Granted()
		case !errors.Is(err, domain.ErrQuotaExceeded):
			return nil, err
		}
		// Allowance used elsewhere meanwhile clips the rest of the batch.
		if g := held + int(granted); g != s.Granted {
			s.Granted = g
			snap := s
			snap.Details = nil
			if err := c.store.SaveCampaign(context.Background(), snap, nil, false); err != nil {
				if res != nil {
					res.Release()
				}
				return nil, fmt.Errorf("save campaign: %w", err)
			}
		}
	}
	return c.spawn(s, held-s.Cursor), nil
}

// running counts running campaigns (metrics).
func (c *Campaigns) running() int {
	return c.idx.len()
}

// lateness keeps the most recent campaign timer delays (how late each fired and was handled),
// for the drift figures of tests, benchmarks and metrics.
type lateness struct {
	mu      sync.Mutex
	samples []time.Duration
	next    int
}

const latenessSamples = 1 << 16

// TimerLate implements campaign.Observer: it keeps the sample.
func (l *lateness) TimerLate(d time.Duration) {
	l.mu.Lock()
	if len(l.samples) < latenessSamples {
		l.samples = append(l.samples, d)
	} else {
		l.samples[l.next] = d
		l.next = (l.next + 1) % latenessSamples
	}
	l.mu.Unlock()
}

// TimerLateness returns the recent campaign timer delays, sorted.
func (c *Campaigns) TimerLateness() []time.Duration {
	c.late.mu.Lock()
	out := slices.Clone(c.late.samples)
	c.late.mu.Unlock()
	slices.Sort(out)
	return out
}

// event reports a campaign's progress (at most once a second) and its end.
func (c *Campaigns) event(ce *campaignEntry, s domain.Campaign) {
	if c.e.pub == nil {
		return
	}
	d := domain.CampaignEventData{CampaignID: s.ID, Status: s.Status, TotalRequested: len(s.Numbers),
		TotalProcessed: s.Cursor, Successful: s.Successful, Failed: s.Failed, OptedOut: s.OptedOut}
	if s.Done() {
		c.e.pub.publish(s.UserID, domain.Event{Type: domain.EventCampaignCompleted, Data: d})
		return
	}
	if now := time.Now(); now.Sub(ce.lastProgress) >= time.Second {
		ce.lastProgress = now
		c.e.pub.publish(s.UserID, domain.Event{Type: domain.EventCampaignProgress, Data: d})
	}
}
