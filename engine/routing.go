package engine

// Routing per message (DESIGN.md section 17): an account with a linked session and a cloud
// session sends each message over one of them. Mode linked or cloud names the session; auto
// sends over the linked session when the contact is warm there (it wrote to that phone, or the
// phone wrote to it: section 14's book) and no timelock holds first messages to it, otherwise
// over the cloud session: as it is inside the contact's 24-hour service window, else as the
// cold template (the message's text as its first parameter), else it waits for the contact to
// write (queued, code waiting_for_contact) and fails after 72 hours. Each message records which
// way it went and why (via, viaReason).
//
// Decisions where the design is silent, for a shop owner who pays Meta per template: never a
// template where a free message would do (inside the window a message goes as it is, and a
// contact warm on the linked phone gets it there); only a text is turned into the cold
// template (a medium, a location or buttons would lose their content: they wait for the
// contact instead); a waiting message goes through the session the contact writes to.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
)

// Routing is the routing facet: the accounts' routing settings, the way each message goes,
// and the messages waiting for their contacts.
type Routing struct {
	e     *Engine
	store RoutingStore

	mu      sync.Mutex
	waiting map[string]map[string]domain.OutboxEntry // uid NUL contact → id → entry
	keyOf   map[string]string                        // id → its key in waiting
	timer   session.Timer
	timerAt time.Time
}

func newRouting(e *Engine) *Routing {
	return &Routing{e: e, store: e.cfg.Records.Routings, waiting: map[string]map[string]domain.OutboxEntry{}, keyOf: map[string]string{}}
}

// Get is an account's routing (its mode "" when never set).
func (rt *Routing) Get(uid string) (domain.Routing, error) {
	if rt.store == nil {
		return domain.Routing{}, nil
	}
	r, err := rt.store.Routing(uid)
	if err != nil {
		return r, fmt.Errorf("%w: routing: %w", domain.ErrUnavailable, err)
	}
	return r, nil
}

// RoutingUpdate is PATCH /api/client/routing: the mode (nil: unchanged) and the cold template
// (SetCold: ColdTemplate replaces it; nil removes it).
type RoutingUpdate struct {
	Mode         *string
	SetCold      bool
	ColdTemplate *domain.TemplateRef
}

// Set changes an account's routing. A cold template must be one of its cloud number's APPROVED
// templates whose body takes at least one parameter (the message's text).
func (rt *Routing) Set(ctx context.Context, uid string, u RoutingUpdate) (domain.Routing, error) {
	if rt.store == nil {
		return domain.Routing{}, fmt.Errorf("%w: routing is not kept here", domain.ErrUnavailable)
	}
	cur, err := rt.Get(uid)
	if err != nil {
		return cur, err
	}
	if u.Mode != nil {
		switch m := strings.TrimSpace(*u.Mode); m {
		case domain.RouteLinked, domain.RouteCloud, domain.RouteAuto:
			cur.Mode = m
		default:
			return cur, fmt.Errorf("%w: mode must be linked, cloud or auto", domain.ErrValidation)
		}
	}
	if u.SetCold {
		cur.ColdTemplate = nil
		if t := u.ColdTemplate; t != nil {
			name, lang := strings.TrimSpace(t.Name), strings.TrimSpace(t.Language)
			if name == "" || lang == "" {
				return cur, fmt.Errorf("%w: coldTemplate needs name and language", domain.ErrValidation)
			}
			ent := rt.e.Sessions.idx.cloudOf(uid)
			if ent == nil {
				return cur, fmt.Errorf("%w: a cold template is one of the Cloud API number's templates; connect one first", domain.ErrNeedsCloud)
			}
			tpl, err := rt.e.Cloud.template(ctx, ent, name, lang)
			if err != nil {
				return cur, err
			}
			if tpl.BodyParams() < 1 {
				return cur, fmt.Errorf("%w: template %q's body takes no parameter for the message's text", domain.ErrValidation, name)
			}
			cur.ColdTemplate = &domain.TemplateRef{Name: name, Language: tpl.Language}
		}
	}
	if cur.Mode != "" && cur.Mode != domain.RouteLinked && rt.e.Sessions.idx.cloudOf(uid) == nil {
		return cur, fmt.Errorf("%w: mode %s needs a Cloud API number; connect one first", domain.ErrNeedsCloud, cur.Mode)
	}
	cur.UpdatedAt = domain.MillisOf(rt.e.now())
	if err := rt.store.PutRouting(ctx, uid, cur); err != nil {
		return cur, fmt.Errorf("%w: save routing: %w", domain.ErrUnavailable, err)
	}
	return cur, nil
}

// routed is the way a message goes: via which kind of session and why, and whether it waits
// for its contact.
type routed struct {
	via, reason string
	waiting     bool
}

func (r routed) apply(e *domain.OutboxEntry) {
	e.Via, e.ViaReason, e.Waiting = r.via, r.reason, r.waiting
}

// route decides the session a message goes through (r.SessionID) when the account has a
// cloud session, and what it goes as: the cloud session's rules (a template checked and
// rendered; a text outside the window wrapped in the cold template; else waiting). Accounts
// with a linked session only are not routed.
//
// def is the user's default (linked) session as way read it when the message goes there with
// no session named (nil otherwise, or when the user has none): Send takes it instead of
// reading the index again (forSend).
func (ms *Messages) route(ctx context.Context, r *SendRequest) (_ routed, def *sessionEntry, _ error) {
	rt, s := ms.e.Routing, ms.e.Sessions
	k := r.Message.Kind
	if r.SessionID != "" {
		ent := s.idx.get(r.SessionID)
		if ent == nil {
			return routed{}, nil, nil // forSend answers
		}
		if v := ent.view.Load(); v.IsCloud() {
			rd, err := rt.overCloud(ctx, r, ent, "", nil)
			return rd, nil, err
		}
		if !k.OnLinked() {
			return routed{}, nil, fmt.Errorf("%w: a %s goes over a Cloud API number, not session %s", domain.ErrNeedsCloud, k, r.SessionID)
		}
		return routed{}, nil, nil
	}
	w, err := ms.way(r.UserID, r.Message)
	switch {
	case err != nil:
		return routed{}, nil, err
	case w.cloud != nil:
		rd, err := rt.overCloud(ctx, r, w.cloud, w.routed.reason, w.settings)
		return rd, nil, err
	case w.linked != nil:
		r.SessionID = w.linked.view.Load().ID
	}
	return w.routed, w.def, nil
}

// way is where a message goes when it names no session: over the cloud session (cloud; the
// routing's reason in routed, "" when the window will say), else over the linked session
// (linked, nil for the default's; routed its via and reason, zero for an account without a
// cloud session: it is not routed).
type way struct {
	cloud, linked *sessionEntry
	routed        routed
	settings      *domain.Routing // the account's routing as way read it (with cloud)
	// def: the user's default (linked) session as read, when the user has no cloud session
	// (the message goes there; nil when the user has none).
	def *sessionEntry
}

// way decides the session a message m of the user's goes through when none is named (route;
// the store loop's presentation asks it how a question will go).
func (ms *Messages) way(uid string, m domain.Message) (way, error) {
	s := ms.e.Sessions
	k := m.Kind
	linked, cloud := s.idx.kindsOf(uid)
	if cloud == nil {
		if !k.OnLinked() {
			return way{}, fmt.Errorf("%w: a %s goes only over a Cloud API number", domain.ErrNeedsCloud, k)
		}
		return way{def: linked}, nil
	}
	if linked != nil && !linked.view.Load().Linked {
		linked = nil // not linked to a phone: it cannot take the message
	}
	settings, err := ms.e.Routing.Get(uid)
	if err != nil {
		return way{}, err
	}
	mode := settings.Mode
	switch {
	case (!k.OnCloud() || domain.IsGroup(m.To)) && linked == nil:
		return way{}, fmt.Errorf("%w: a %s (the account's only session is a Cloud API number)", domain.ErrNotOnCloud, kindOrGroup(m))
	case !k.OnCloud() || domain.IsGroup(m.To):
		mode = domain.RouteLinked // polls, groups: the linked session's
	case !k.OnLinked() || linked == nil:
		mode = domain.RouteCloud
	case mode == "":
		mode = domain.RouteLinked
	}
	switch mode {
	case domain.RouteLinked:
		return way{routed: routed{via: domain.ViaLinked}, linked: linked}, nil
	case domain.RouteCloud:
		return way{cloud: cloud, settings: &settings}, nil
	}
	// auto: warm on the linked phone and no timelock holding it → linked.
	v := linked.view.Load()
	c, err := s.records.Contact(v.ID, v.Phone, m.To)
	if err != nil {
		return way{}, fmt.Errorf("%w: contact book: %w", domain.ErrUnavailable, err)
	}
	switch timelock := v.TimelockUntil.After(ms.e.now()); {
	case timelock && c.Wrote == 0:
		return way{cloud: cloud, routed: routed{reason: domain.ViaTimelock}, settings: &settings}, nil
	case c.Known():
		return way{routed: routed{via: domain.ViaLinked, reason: domain.ViaWarm}, linked: linked}, nil
	}
	return way{cloud: cloud, routed: routed{reason: domain.ViaCold}, settings: &settings}, nil
}

// overCloud sends r over the cloud session ent, by the Cloud API's rules: a template goes
// (checked and rendered); another message goes as it is inside the contact's service window
// (at the message's time: one for later, at its sendAt); outside it a text goes as the cold
// template (the message's, or the account's), anything else waits for the contact. why is the
// routing's reason ("": the window says); settings the account's routing when the caller read
// it already (nil: read here when the cold template is wanted).
func (rt *Routing) overCloud(ctx context.Context, r *SendRequest, ent *sessionEntry, why string, settings *domain.Routing) (routed, error) {
	v := ent.view.Load()
	r.SessionID = v.ID
	m := &r.Message
	if !m.Kind.OnCloud() {
		return routed{}, fmt.Errorf("%w: a %s", domain.ErrNotOnCloud, m.Kind)
	}
	open, err := rt.e.Cloud.windowOpen(v.ID, m.To, notBefore(r.SendAt, rt.e.now()))
	if err != nil {
		return routed{}, err
	}
	out := routed{via: domain.ViaCloud, reason: why}
	switch {
	case why == domain.ViaTimelock:
	case open:
		out.reason = domain.ViaWindow
	default:
		out.reason = domain.ViaCold
	}
	switch {
	case m.Kind == domain.KindTemplate:
		return out, rt.fillTemplate(ctx, ent, m.Template, &m.Text)
	case open:
		return out, nil
	case m.Kind == domain.KindText:
		cold := m.ColdTemplate
		if cold == nil && settings == nil {
			s, err := rt.Get(r.UserID)
			if err != nil {
				return routed{}, err
			}
			settings = &s
		}
		if cold == nil {
			if t := settings.ColdTemplate; t != nil {
				cold = &domain.TemplateSend{Name: t.Name, Language: t.Language}
			}
		}
		if cold != nil {
			send := *cold
			if len(send.Params) == 0 {
				send.Params = []string{m.Text}
			}
			if err := rt.fillTemplate(ctx, ent, &send, nil); err != nil {
				return routed{}, err
			}
			m.Kind, m.Template, m.ColdTemplate = domain.KindTemplate, &send, nil
			return out, nil
		}
	}
	out.waiting = true
	return out, nil
}

// fillTemplate checks a template send against the number's template (APPROVED, its body's
// parameter count), names a named template's parameters and, with text, renders the body.
func (rt *Routing) fillTemplate(ctx context.Context, ent *sessionEntry, t *domain.TemplateSend, text *string) error {
	if t == nil || t.Name == "" || t.Language == "" {
		return fmt.Errorf("%w: template needs name and language", domain.ErrValidation)
	}
	tpl, err := rt.e.Cloud.template(ctx, ent, t.Name, t.Language)
	if err != nil {
		return err
	}
	if n := tpl.BodyParams(); len(t.Params) != n {
		// Meta refuses a template whose parameters do not match its body (132000): said here.
		return fmt.Errorf("%w: template %q's body takes %d parameters, %d given", domain.ErrValidation, t.Name, n, len(t.Params))
	}
	t.Names = tpl.ParamNames()
	if text != nil && *text == "" {
		*text = tpl.Render(t.Params)
	}
	return nil
}

// wait keeps a message that waits for its contact (accepted, or found pending at boot) until
// the contact writes or its 72 hours pass.
func (rt *Routing) wait(e domain.OutboxEntry) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	key := e.UserID + "\x00" + e.Message.To
	if rt.waiting[key] == nil {
		rt.waiting[key] = map[string]domain.OutboxEntry{}
	}
	rt.waiting[key][e.ID] = e
	rt.keyOf[e.ID] = key
	rt.scheduleLocked(e.CreatedAt.Time().Add(domain.WaitForContact))
}

// scheduleLocked makes sure the expiry runs by at.
func (rt *Routing) scheduleLocked(at time.Time) {
	if !rt.timerAt.IsZero() && !rt.timerAt.After(at) {
		return
	}
	if rt.timer != nil {
		rt.timer.Stop()
	}
	rt.timerAt = at
	rt.timer = rt.e.cfg.AfterFunc(max(at.Sub(rt.e.now()), 0)+time.Millisecond, rt.expire)
}

// expire fails the waiting messages whose 72 hours have passed.
func (rt *Routing) expire() {
	now := rt.e.now()
	var due []domain.OutboxEntry
	next := time.Time{}
	rt.mu.Lock()
	rt.timer, rt.timerAt = nil, time.Time{}
	for key, byID := range rt.waiting {
		for id, e := range byID {
			end := e.CreatedAt.Time().Add(domain.WaitForContact)
			if !now.Before(end) {
				due = append(due, e)
				delete(byID, id)
				delete(rt.keyOf, id)
				continue
			}
			if next.IsZero() || end.Before(next) {
				next = end
			}
		}
		if len(byID) == 0 {
			delete(rt.waiting, key)
		}
	}
	if !next.IsZero() {
		rt.scheduleLocked(next)
	}
	rt.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].CreatedAt < due[j].CreatedAt })
	for _, e := range due {
		err := fmt.Errorf("%w: waited since %s", domain.ErrContactNeverWrote, e.CreatedAt.Time().UTC().Format(time.RFC3339))
		e.Code, e.Error, e.Waiting = domain.CodeOf(err), err.Error(), false
		e.SetStatus(domain.MsgFailed, now)
		rt.e.Messages.msgs.Outcome(e, err)
	}
}

// cancel takes a waiting message back (DELETE before it went, an answered order's follow-up):
// cancelled with code and why, its allowance released, once that is recorded (an error when it
// was not: outcomeRecorded). False when it is not waiting.
func (rt *Routing) cancel(uid, id, code, why string) (domain.OutboxEntry, bool, error) {
	rt.mu.Lock()
	key := rt.keyOf[id]
	e, found := rt.waiting[key][id]
	if found && e.UserID == uid {
		delete(rt.waiting[key], id)
		delete(rt.keyOf, id)
		if len(rt.waiting[key]) == 0 {
			delete(rt.waiting, key)
		}
	}
	rt.mu.Unlock()
	if !found || e.UserID != uid {
		return domain.OutboxEntry{}, false, nil
	}
	e.Code, e.Error, e.Waiting = code, why, false
	e.SetStatus(domain.MsgCancelled, rt.e.now())
	return e, true, rt.e.Messages.msgs.outcomeRecorded(e, domain.ErrCancelled)
}

// contactWrote releases the messages waiting for a contact who wrote to session st: each goes
// through st (the phone they wrote to, or the cloud number, inside the window it just opened),
// recorded first so a restart sends it from there.
func (rt *Routing) contactWrote(st domain.Session, contact string) {
	key := st.AssignedTo + "\x00" + contact
	rt.mu.Lock()
	byID := rt.waiting[key]
	delete(rt.waiting, key)
	for id := range byID {
		delete(rt.keyOf, id)
	}
	rt.mu.Unlock()
	if len(byID) == 0 {
		return
	}
	ent := rt.e.Sessions.idx.get(st.ID)
	released := make([]domain.OutboxEntry, 0, len(byID))
	for _, e := range byID {
		released = append(released, e)
	}
	sort.Slice(released, func(i, j int) bool { return released[i].CreatedAt < released[j].CreatedAt })
	for _, orig := range released {
		e := orig
		e.SessionID, e.From, e.Waiting = st.ID, st.Phone, false
		e.Via, e.ViaReason = domain.ViaLinked, domain.ViaWarm
		if st.IsCloud() {
			e.Via, e.ViaReason = domain.ViaCloud, domain.ViaWindow
		}
		if ent == nil || (!st.IsCloud() && !e.Message.Kind.OnLinked()) {
			rt.wait(orig) // not a session this message can go through: it waits on
			continue
		}
		ctx, cancel := context.WithTimeout(rt.e.stopCtx, rt.e.cfg.AskTimeout)
		err := rt.e.Messages.msgs.outbox.Requeue(ctx, e)
		cancel()
		if err != nil {
			rt.e.log.Warn("a waiting message stays waiting: its record could not be written", "message_id", e.ID, "err", err)
			rt.wait(orig)
			continue
		}
		rt.e.pub.message(&e, domain.MsgQueued, rt.e.now())
		ent.queue.Push(e)
	}
}

// stop stops the expiry timer (Stop): waiting messages stay pending in the outbox.
func (rt *Routing) stop() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.timer != nil {
		rt.timer.Stop()
		rt.timer = nil
	}
}

// wrote hears that a contact wrote to session st (at at): a cloud number's service window
// opens for 24 hours (the error is its record's). The messages waiting for them go with
// release, called after what they wrote was read as a possible answer (an answer cancels a
// follow-up that waits for them).
func (rt *Routing) wrote(st domain.Session, contact string, at time.Time) error {
	if st.IsCloud() {
		return rt.e.Cloud.wrote(st.ID, contact, at)
	}
	return nil
}

// WaitingFor is how many of a user's messages wait for their contacts.
func (rt *Routing) WaitingFor(uid string) int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for key, byID := range rt.waiting {
		if strings.HasPrefix(key, uid+"\x00") {
			n += len(byID)
		}
	}
	return n
}

func kindOrGroup(m domain.Message) string {
	if domain.IsGroup(m.To) {
		return "message to a group"
	}
	return string(m.Kind)
}
