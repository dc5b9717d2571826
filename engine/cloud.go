package engine

// The official WhatsApp Cloud API as a second network (DESIGN.md section 17): a session of kind
// cloud is a Cloud API phone number, connected with its id, its WABA's id, an access token and
// the app's secret (sealed at rest); its templates synced from the WABA; Meta's webhooks taken
// for it (the subscription check, then statuses and incoming messages); the contact's 24-hour
// service window kept from its last message. Routing between an account's linked and cloud
// sessions is routing.go's.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// CloudNetwork is the Cloud API network (network/cloud): the port, and what connect, the
// template sync and the webhook receiver ask of Meta.
type CloudNetwork interface {
	network.Network
	// Check reads the number with the account's token (domain.ErrValidation when Meta
	// refuses them, domain.ErrUnavailable when Meta cannot be reached).
	Check(ctx context.Context, acct domain.CloudAccount) (domain.CloudNumber, error)
	// Templates reads every template of the account's WABA.
	Templates(ctx context.Context, acct domain.CloudAccount) ([]domain.CloudTemplate, error)
	// Webhook takes a webhook Meta posted, its signature checked first
	// (domain.ErrInvalidSignature: nothing was read).
	Webhook(body []byte, signature string) error
}

// Cloud is the cloud facet: connecting a number, its templates, its webhooks.
type Cloud struct {
	e       *Engine
	net     CloudNetwork // nil: no cloud network (tests of the core)
	tmpl    CloudTemplateStore
	windows WindowStore
	connect sync.Mutex // serialises connects (one number, one session)
}

func newCloud(e *Engine) *Cloud {
	return &Cloud{e: e, net: e.cfg.Cloud, tmpl: e.cfg.Records.CloudTemplates, windows: e.cfg.Records.Windows}
}

// CloudConnect is POST /api/client/cloud/connect's request.
type CloudConnect struct {
	PhoneNumberID string
	WABAID        string
	AccessToken   string
	AppSecret     string
}

// CloudConnected is what connect answers: the session, and the verify token to paste in
// Meta's app settings beside the webhook URL (shown this once).
type CloudConnected struct {
	Session     SessionView
	VerifyToken string
	Templates   int // templates synced
}

// cloudPacing is a cloud session's pacing: Meta's throughput for its number.
func cloudPacing(st *domain.Session) domain.Pacing {
	tp := 0
	if st.Cloud != nil {
		tp = st.Cloud.Throughput
	}
	return domain.CloudPacing(tp)
}

// deps fills a cloud session's actor dependencies: the cloud network, its credentials
// (unsealed), its send log, Meta's pace.
func (c *Cloud) deps(st domain.Session, d *session.Deps) {
	d.Pacing = cloudPacing(&st)
	d.ConnectDelay = 0
	d.SendLog = c.e.cfg.Records.SendLog
	if c.net != nil {
		d.Network = c.net
	}
	acct, err := c.account(st)
	if err != nil {
		c.e.log.Error("cloud session: credentials", "session_id", st.ID, "err", err)
		return
	}
	d.Account = &acct
}

// account is a cloud session's credentials, unsealed.
func (c *Cloud) account(st domain.Session) (domain.CloudAccount, error) {
	n := st.Cloud
	if n == nil {
		return domain.CloudAccount{}, fmt.Errorf("session %s has no Cloud API number", st.ID)
	}
	sealer := c.e.Stores.s.sealer
	tok, err := sealer.Open(n.SealedToken)
	if err != nil {
		return domain.CloudAccount{}, fmt.Errorf("open the access token: %w", err)
	}
	sec, err := sealer.Open(n.SealedSecret)
	if err != nil {
		return domain.CloudAccount{}, fmt.Errorf("open the app secret: %w", err)
	}
	return domain.CloudAccount{PhoneNumberID: n.PhoneNumberID, WABAID: n.WABAID, AccessToken: tok, AppSecret: sec, Phone: st.Phone}, nil
}

// Connect checks a Cloud API number with the Graph API and makes it the user's CONNECTED cloud
// session (the same number connected again keeps its session and takes the new token). The
// token and the secret are sealed; a new verify token for the webhook's subscription check is
// answered this once.
func (c *Cloud) Connect(ctx context.Context, uid string, req CloudConnect) (CloudConnected, error) {
	if c.net == nil {
		return CloudConnected{}, fmt.Errorf("%w: this gateway has no Cloud API network", domain.ErrUnavailable)
	}
	req.PhoneNumberID, req.WABAID = strings.TrimSpace(req.PhoneNumberID), strings.TrimSpace(req.WABAID)
	req.AccessToken, req.AppSecret = strings.TrimSpace(req.AccessToken), strings.TrimSpace(req.AppSecret)
	for _, f := range []struct{ name, v string }{{"phoneNumberId", req.PhoneNumberID}, {"wabaId", req.WABAID}} {
		if f.v == "" || len(f.v) > 32 || strings.Trim(f.v, "0123456789") != "" {
			return CloudConnected{}, fmt.Errorf("%w: %s must be the numeric id Meta's app dashboard shows", domain.ErrValidation, f.name)
		}
	}
	if req.AccessToken == "" || len(req.AccessToken) > 1024 || strings.ContainsAny(req.AccessToken, " \t\n") {
		return CloudConnected{}, fmt.Errorf("%w: accessToken is required (a system user's permanent token)", domain.ErrValidation)
	}
	if req.AppSecret == "" || len(req.AppSecret) > 256 {
		return CloudConnected{}, fmt.Errorf("%w: appSecret is required (App settings > Basic > App secret)", domain.ErrValidation)
	}
	if _, err := c.e.Users.Get(uid); err != nil {
		return CloudConnected{}, err
	}
	acct := domain.CloudAccount{PhoneNumberID: req.PhoneNumberID, WABAID: req.WABAID, AccessToken: req.AccessToken, AppSecret: req.AppSecret}
	num, err := c.net.Check(ctx, acct)
	if err != nil {
		return CloudConnected{}, err
	}
	acct.Phone = digitsOf(num.DisplayPhone)
	if acct.Phone == "" {
		return CloudConnected{}, fmt.Errorf("%w: Meta gave the number no display phone number", domain.ErrValidation)
	}
	sealer := c.e.Stores.s.sealer
	if num.SealedToken, err = sealer.Seal(req.AccessToken); err != nil {
		return CloudConnected{}, fmt.Errorf("%w: seal the token: %w", domain.ErrUnavailable, err)
	}
	if num.SealedSecret, err = sealer.Seal(req.AppSecret); err != nil {
		return CloudConnected{}, fmt.Errorf("%w: seal the secret: %w", domain.ErrUnavailable, err)
	}
	verify := newVerifyToken()
	num.VerifyHash, num.ConnectedAt = verifyHash(verify), c.e.now().UTC()

	c.connect.Lock()
	defer c.connect.Unlock()
	s := c.e.Sessions
	var ent *sessionEntry
	for _, other := range s.idx.all() {
		v := other.view.Load()
		if v.IsCloud() && v.Cloud != nil && v.Cloud.PhoneNumberID == req.PhoneNumberID {
			if v.AssignedTo != uid {
				return CloudConnected{}, fmt.Errorf("%w: this Cloud API number is connected to another account", domain.ErrAlreadyExists)
			}
			ent = other
		}
	}
	if ent != nil {
		msg := &session.SetAccount{Account: acct, Number: num, Reply: make(chan session.Reply, 1)}
		if _, err := s.ask(ctx, ent, msg, msg.Reply); err != nil {
			return CloudConnected{}, err
		}
	} else {
		now := c.e.now().UTC()
		st := domain.Session{ID: uuid.NewString(), Kind: domain.SessionCloud, Name: cloudName(num), Status: domain.StatusDisconnected,
			Phone: acct.Phone, AssignedTo: uid, AssignedAt: now, CreatedAt: now, LastActivity: now, Linked: true, Cloud: &num}
		if m := c.e.cfg.Mover; m != nil && !m.Local(uid) {
			return CloudConnected{}, fmt.Errorf("%w: the account lives on another node", domain.ErrNodeUnavailable)
		}
		if err := s.table.PutSession(ctx, st); err != nil {
			return CloudConnected{}, fmt.Errorf("%w: save session: %w", domain.ErrUnavailable, err)
		}
		ent = s.spawn(st)
		c.e.log.Info("cloud session connected", "session_id", st.ID, "user_id", uid, "phone_number_id", num.PhoneNumberID)
	}
	out := CloudConnected{Session: s.view(ent), VerifyToken: verify}
	if set, err := c.sync(ctx, ent); err == nil {
		out.Templates = len(set.Templates)
	} else {
		c.e.log.Warn("cloud session: template sync", "session_id", ent.view.Load().ID, "err", err)
	}
	return out, nil
}

func cloudName(n domain.CloudNumber) string {
	if n.VerifiedName != "" {
		return n.VerifiedName + " (Cloud API)"
	}
	return n.DisplayPhone + " (Cloud API)"
}

func newVerifyToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "vt_" + base64.RawURLEncoding.EncodeToString(b)
}

func digitsOf(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Session is the user's cloud session (ErrSessionNotFound when none).
func (c *Cloud) Session(uid string) (SessionView, error) {
	ent, err := c.entry(uid)
	if err != nil {
		return SessionView{}, err
	}
	return c.e.Sessions.view(ent), nil
}

// Templates syncs the user's cloud session's templates from its WABA and answers them; when
// Meta cannot be reached, the last synced (ErrUnavailable when there are none).
func (c *Cloud) Templates(ctx context.Context, uid string) (domain.TemplateSet, error) {
	ent, err := c.entry(uid)
	if err != nil {
		return domain.TemplateSet{}, err
	}
	set, err := c.sync(ctx, ent)
	if err == nil {
		return set, nil
	}
	if !errors.Is(err, domain.ErrUnavailable) {
		return set, err
	}
	old, rerr := c.tmpl.CloudTemplates(ent.view.Load().ID)
	if rerr != nil || old.SyncedAt.IsZero() {
		return old, err
	}
	return old, nil
}

// TemplatesFresh is how long a sync answers the Cloud-API-shaped front's template list: tools
// that poll it (Chatwoot reads it on every inbox screen) do not each cost a Graph call.
const TemplatesFresh = time.Minute

// RecentTemplates is the user's cloud session's templates as last synced when that was less
// than TemplatesFresh ago, else synced now (Templates).
func (c *Cloud) RecentTemplates(ctx context.Context, uid string) (domain.TemplateSet, error) {
	ent, err := c.entry(uid)
	if err != nil {
		return domain.TemplateSet{}, err
	}
	if set, err := c.tmpl.CloudTemplates(ent.view.Load().ID); err == nil && !set.SyncedAt.IsZero() && c.e.now().Sub(set.SyncedAt) < TemplatesFresh {
		return set, nil
	}
	return c.Templates(ctx, uid)
}

// sync reads a cloud session's templates from Meta and keeps them.
func (c *Cloud) sync(ctx context.Context, ent *sessionEntry) (domain.TemplateSet, error) {
	st := *ent.view.Load()
	acct, err := c.account(st)
	if err != nil {
		return domain.TemplateSet{}, fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	ts, err := c.net.Templates(ctx, acct)
	if err != nil {
		return domain.TemplateSet{}, err
	}
	set := domain.TemplateSet{SyncedAt: c.e.now().UTC(), Templates: ts}
	if err := c.tmpl.PutCloudTemplates(ctx, st.ID, set); err != nil {
		return set, fmt.Errorf("%w: save templates: %w", domain.ErrUnavailable, err)
	}
	return set, nil
}

// template finds a template a message names on a cloud session: from the last sync, synced
// again once when it is not there (made at Meta since). It must be APPROVED.
func (c *Cloud) template(ctx context.Context, ent *sessionEntry, name, language string) (domain.CloudTemplate, error) {
	sid := ent.view.Load().ID
	set, err := c.tmpl.CloudTemplates(sid)
	if err != nil {
		return domain.CloudTemplate{}, fmt.Errorf("%w: templates: %w", domain.ErrUnavailable, err)
	}
	t, ok := set.Find(name, language)
	if !ok && c.net != nil {
		if fresh, err := c.sync(ctx, ent); err == nil {
			t, ok = fresh.Find(name, language)
		}
	}
	switch {
	case !ok:
		return t, fmt.Errorf("%w: the WABA has no template %q in language %q", domain.ErrTemplateNotApproved, name, language)
	case t.Status != domain.TemplateApproved:
		return t, fmt.Errorf("%w: template %q (%s) is %s", domain.ErrTemplateNotApproved, name, t.Language, t.Status)
	}
	return t, nil
}

// Disconnect deletes the user's cloud session: its queued messages fail (session_deleted);
// the number stays registered at Meta.
func (c *Cloud) Disconnect(ctx context.Context, uid string) error {
	ent, err := c.entry(uid)
	if err != nil {
		return err
	}
	sid := ent.view.Load().ID
	if err := c.e.Sessions.Delete(ctx, sid); err != nil {
		return err
	}
	if err := c.tmpl.DeleteCloudTemplates(ctx, sid); err != nil {
		c.e.log.Warn("cloud session deleted; its templates were not", "session_id", sid, "err", err)
	}
	if err := c.windows.DeleteSession(ctx, sid); err != nil {
		c.e.log.Warn("cloud session deleted; its windows were not", "session_id", sid, "err", err)
	}
	return nil
}

// Webhook takes a webhook Meta posted (POST /api/cloud/webhook): the signature is checked on
// the raw body first; ErrInvalidSignature changes nothing.
func (c *Cloud) Webhook(body []byte, signature string) error {
	if c.net == nil {
		return fmt.Errorf("%w: this gateway has no Cloud API network", domain.ErrUnavailable)
	}
	return c.net.Webhook(body, signature)
}

// Verify answers Meta's subscription check (GET /api/cloud/webhook): the challenge, when the
// verify token is one shown at connect (of the session named, or of any cloud session here).
func (c *Cloud) Verify(sessionID, mode, token, challenge string) (string, error) {
	if mode != "subscribe" || challenge == "" || token == "" {
		return "", fmt.Errorf("%w: hub.mode=subscribe, hub.verify_token and hub.challenge are required", domain.ErrValidation)
	}
	want := verifyHash(token)
	for _, ent := range c.e.Sessions.idx.all() {
		v := ent.view.Load()
		if !v.IsCloud() || v.Cloud == nil || (sessionID != "" && v.ID != sessionID) {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(v.Cloud.VerifyHash), []byte(want)) == 1 {
			return challenge, nil
		}
	}
	return "", domain.ErrVerifyToken
}

// wrote records that a contact wrote to a cloud session: its service window opens for 24
// hours from at. The error is the record's (logged here).
func (c *Cloud) wrote(sessionID, contact string, at time.Time) error {
	ctx, cancel := context.WithTimeout(c.e.stopCtx, c.e.cfg.AskTimeout)
	defer cancel()
	err := c.windows.Wrote(ctx, sessionID, contact, at)
	if err != nil {
		c.e.log.Warn("cloud: service window not kept", "session_id", sessionID, "err", err)
	}
	return err
}

// windowOpen tells whether a contact's service window with a cloud session is open at (a time
// ahead: whether it will still be, unless they write again meanwhile).
func (c *Cloud) windowOpen(sessionID, contact string, at time.Time) (bool, error) {
	last, err := c.windows.LastInbound(sessionID, contact)
	if err != nil {
		return false, fmt.Errorf("%w: service window: %w", domain.ErrUnavailable, err)
	}
	return !last.IsZero() && at.Sub(last) < domain.ServiceWindow, nil
}

// WebhookURL is the callback URL to paste in Meta's app settings for a cloud session: the
// gateway's public URL, naming the session (a cluster routes the webhook by it).
func (c *Cloud) WebhookURL(sessionID string) string {
	return c.e.Stores.s.cfg.PublicURL + "/api/cloud/webhook?session=" + url.QueryEscape(sessionID)
}

// verifyHash is what a cloud number keeps of its webhook verify token (the token itself is
// shown once, at connect).
func verifyHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// entry is the user's cloud session (ErrSessionNotFound when none).
func (c *Cloud) entry(uid string) (*sessionEntry, error) {
	if ent := c.e.Sessions.idx.cloudOf(uid); ent != nil {
		return ent, nil
	}
	return nil, fmt.Errorf("%w: this account has no Cloud API number; connect one", domain.ErrSessionNotFound)
}
