package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// Connecting and disconnecting a store: OAuth install, manual token, native webhooks and
// POST /api/client/store/connect, each ending in saveStore.

// OAuthInit starts an OAuth install: it stores the app credentials with a single-use nonce
// (10 minutes) and returns the platform's authorization address and the shop. Empty clientID
// and clientSecret use the configured app credentials.
func (st *Stores) OAuthInit(ctx context.Context, uid, shop, clientID, clientSecret string) (authURL, canonical string, err error) {
	s := st.s
	canonical, ok := ecom.NormalizeShopDomain(shop)
	if !ok {
		return "", "", fmt.Errorf("%w: %q; use <name>.myshopify.com", domain.ErrInvalidShop, shop)
	}
	n := domain.OAuthNonce{UserID: uid, Shop: canonical, ClientID: strings.TrimSpace(clientID), CreatedAt: st.e.now().UTC()}
	clientSecret = strings.TrimSpace(clientSecret)
	switch {
	case n.ClientID == "" && clientSecret == "":
		if s.cfg.ClientID == "" || s.cfg.ClientSecret == "" {
			return "", "", fmt.Errorf("%w: clientId and clientSecret are required (no app credentials are configured)", domain.ErrValidation)
		}
		n.ClientID, n.AppCredentials = s.cfg.ClientID, true
	case n.ClientID == "":
		return "", "", fmt.Errorf("%w: clientId is required", domain.ErrValidation)
	case clientSecret == "":
		return "", "", fmt.Errorf("%w: clientSecret is required", domain.ErrValidation)
	default:
		if n.ClientSecret, err = s.sealer.Seal(clientSecret); err != nil {
			return "", "", fmt.Errorf("%w: seal the client secret: %w", domain.ErrUnavailable, err)
		}
	}
	nonce := randomHex(16)
	if err := s.records.PutNonce(ctx, nonce, n); err != nil {
		return "", "", fmt.Errorf("%w: save the OAuth state: %w", domain.ErrUnavailable, err)
	}
	authURL = s.client.AuthorizeURL(canonical, n.ClientID, OAuthScopes, s.cfg.PublicURL+"/api/ecom/callback", uid+"___"+nonce)
	return authURL, canonical, nil
}

// CallbackError is why an OAuth callback failed; Reason is the code the error page gets.
type CallbackError struct {
	Reason string
	Err    error
}

func (c *CallbackError) Error() string { return "oauth callback: " + c.Reason + ": " + c.Err.Error() }
func (c *CallbackError) Unwrap() error { return c.Err }

// OAuth callback failure reasons.
const (
	CallbackInvalidRequest = "invalid_request"
	CallbackInvalidShop    = "invalid_shop"
	CallbackInvalidState   = "invalid_state"
	CallbackInvalidHMAC    = "invalid_hmac"
	CallbackExchange       = "token_exchange_failed"
	CallbackWebhooks       = "webhook_registration_failed"
	CallbackPlatform       = "store_platform_error"
	CallbackUnavailable    = "unavailable"
)

// OAuthCallback completes an install (SPEC.md section 4.5): the state's nonce must be one this
// gateway issued, unexpired, for that user and shop; the `hmac` must verify with the app
// secret; then the code is exchanged, the five webhooks registered and the store saved. On any
// failure nothing is saved and the error is a *CallbackError.
func (st *Stores) OAuthCallback(ctx context.Context, q url.Values) (string, error) {
	s := st.s
	fail := func(reason string, err error) (string, error) {
		return "", &CallbackError{Reason: reason, Err: err}
	}
	code, shopIn, state := q.Get("code"), q.Get("shop"), q.Get("state")
	if code == "" || shopIn == "" || state == "" {
		return fail(CallbackInvalidRequest, errors.New("code, shop and state are required"))
	}
	shop, ok := ecom.NormalizeShopDomain(shopIn)
	if !ok {
		return fail(CallbackInvalidShop, fmt.Errorf("%w: %q", domain.ErrInvalidShop, shopIn))
	}
	i := strings.LastIndex(state, "___")
	if i <= 0 {
		return fail(CallbackInvalidState, errors.New("state is not <uid>___<nonce>"))
	}
	uid, nonce := state[:i], state[i+3:]
	n, err := s.records.Nonce(nonce)
	switch {
	case nonce == "" || errors.Is(err, domain.ErrRecordNotFound):
		return fail(CallbackInvalidState, errors.New("unknown or expired state"))
	case err != nil:
		return fail(CallbackUnavailable, err)
	case st.e.now().Sub(n.CreatedAt) > domain.OAuthNonceTTL:
		return fail(CallbackInvalidState, errors.New("expired state"))
	case n.UserID != uid || n.Shop != shop:
		return fail(CallbackInvalidState, errors.New("the state was issued for another user or shop"))
	}
	secret := s.cfg.ClientSecret
	if !n.AppCredentials {
		if secret, err = s.sealer.Open(n.ClientSecret); err != nil {
			return fail(CallbackUnavailable, err)
		}
	}
	if !ecom.VerifyOAuthHMAC(q, secret) {
		return fail(CallbackInvalidHMAC, errors.New("the hmac does not verify"))
	}
	// Single use: consumed before the exchange, so a replayed callback finds no state.
	if err := s.records.DeleteNonce(ctx, nonce); err != nil {
		return fail(CallbackUnavailable, err)
	}
	token, scope, err := s.client.ExchangeCode(ctx, shop, n.ClientID, secret, code)
	switch {
	case errors.Is(err, domain.ErrStoreTokenRejected):
		return fail(CallbackExchange, err)
	case err != nil:
		return fail(CallbackPlatform, err)
	}
	name, _ := s.client.VerifyToken(ctx, shop, token) // the name only fills {store_name}
	rec := domain.Store{
		Shop: shop, Method: domain.StoreMethodOAuth, UserID: uid, ShopName: name,
		ClientID: n.ClientID, ClientSecret: n.ClientSecret, AppCredentials: n.AppCredentials, Scope: scope,
	}
	if _, err := st.connectShopify(ctx, rec, token, "", true); err != nil {
		var we *webhooksError
		if errors.As(err, &we) {
			return fail(CallbackWebhooks, err)
		}
		return fail(CallbackUnavailable, err)
	}
	return shop, nil
}

// ManualResult is the outcome of a manual (access token) connect.
type ManualResult struct {
	Shop               string
	ShopName           string
	WebhooksRegistered int
	WebhooksSkipped    bool // none could be registered (create them in the store admin)
	WebhookURL         string
	RegisterError      string
}

// ManualConnect connects a store with an Admin API access token: the token is verified, the
// five webhooks registered (as many as the token allows) and the store saved. webhookSecret is
// the signing secret of the app the token belongs to, when known.
func (st *Stores) ManualConnect(ctx context.Context, uid, shop, token, webhookSecret string) (ManualResult, error) {
	s := st.s
	canonical, token, name, err := st.verifyShopToken(ctx, shop, token)
	if err != nil {
		return ManualResult{}, err
	}
	rec := domain.Store{Shop: canonical, Method: domain.StoreMethodManual, UserID: uid, ShopName: name}
	reg, err := st.connectShopify(ctx, rec, token, webhookSecret, false)
	if err != nil {
		return ManualResult{}, err
	}
	res := ManualResult{
		Shop: canonical, ShopName: name, WebhookURL: s.webhookURL(uid, canonical),
		WebhooksRegistered: reg.n, WebhooksSkipped: reg.n == 0,
	}
	if reg.err != nil {
		res.RegisterError = reg.err.Error()
	}
	return res, nil
}

// NativeConnect connects a store whose owner creates the webhooks in the store admin;
// webhookSecret is the signing secret the admin shows for them (optional).
func (st *Stores) NativeConnect(ctx context.Context, uid, shop, webhookSecret string) (string, string, error) {
	canonical, ok := ecom.NormalizeShopDomain(shop)
	if !ok {
		return "", "", fmt.Errorf("%w: %q; use <name>.myshopify.com", domain.ErrInvalidShop, shop)
	}
	rec := domain.Store{Shop: canonical, Platform: ecom.PlatformShopify, Method: domain.StoreMethodNative, UserID: uid, ConnectedAt: st.e.now().UTC()}
	if err := st.sealInto(&rec, "", webhookSecret); err != nil {
		return "", "", err
	}
	if err := st.save(ctx, rec, false); err != nil {
		return "", "", err
	}
	st.e.log.Info("store connected", "method", rec.Method, "shop", canonical, "user_id", uid)
	return canonical, st.s.webhookURL(uid, canonical), nil
}

// Connect is POST /api/client/store/connect. The platform (a registered ecom.Platform) says
// how: by access token (verified, and all five webhooks must register) or by domain (its
// webhooks are made in the store's admin, optionally signed with webhookSecret).
//
// restKey and restSecret are a WooCommerce-type store's REST API keys (optional): with them a
// confirmation's answer is written back to the order.
func (st *Stores) Connect(ctx context.Context, uid, platform, domainName, token, webhookSecret, restKey, restSecret string) error {
	p, ok := ecom.Lookup(domain.Platform(strings.ToLower(strings.TrimSpace(platform))))
	if !ok || platform == "" {
		return fmt.Errorf("%w: platform must be one of %v", domain.ErrValidation, ecom.Names())
	}
	if p.Connect() == ecom.ConnectByToken {
		if strings.TrimSpace(token) == "" {
			return fmt.Errorf("%w: access_token is required", domain.ErrValidation)
		}
		canonical, token, name, err := st.verifyShopToken(ctx, domainName, token)
		if err != nil {
			return err
		}
		rec := domain.Store{Shop: canonical, Method: domain.StoreMethodConnect, UserID: uid, ShopName: name}
		_, err = st.connectShopify(ctx, rec, token, webhookSecret, true)
		return err
	}
	host, ok := p.Domain(domainName)
	if !ok {
		return fmt.Errorf("%w: domain must be the store's host name (shop.example.com)", domain.ErrValidation)
	}
	rec := domain.Store{Shop: host, Platform: p.Name(), Method: domain.StoreMethodConnect, UserID: uid, ConnectedAt: st.e.now().UTC()}
	if err := st.sealInto(&rec, "", webhookSecret); err != nil {
		return err
	}
	restKey, restSecret = strings.TrimSpace(restKey), strings.TrimSpace(restSecret)
	if (restKey == "") != (restSecret == "") {
		return fmt.Errorf("%w: consumerKey and consumerSecret go together (the store's REST API keys)", domain.ErrValidation)
	}
	var err error
	if rec.RestKey, err = st.s.sealer.Seal(restKey); err != nil {
		return fmt.Errorf("%w: seal the REST API key: %w", domain.ErrUnavailable, err)
	}
	if rec.RestSecret, err = st.s.sealer.Seal(restSecret); err != nil {
		return fmt.Errorf("%w: seal the REST API secret: %w", domain.ErrUnavailable, err)
	}
	return st.save(ctx, rec, false)
}

// registration is how a store's webhooks registration went: how many of the five registered,
// and why not all (nil when all did).
type registration struct {
	n   int
	err error
}

// webhooksError is a connect refused because not every webhook registered.
type webhooksError struct{ err error }

func (w *webhooksError) Error() string { return w.err.Error() }
func (w *webhooksError) Unwrap() error { return w.err }

// connectShopify ends the three Shopify-type flows (OAuth callback, manual token,
// store/connect) once they hold a verified token: register the five webhooks at the store's
// address, seal the credentials into rec, save it (the platform proved access, so it may take
// the shop over). rec carries the flow's own fields. With allWebhooks, fewer than five
// registered webhooks fail the connect with a *webhooksError and nothing is saved; without,
// whatever registered is kept and the rest is reported.
func (st *Stores) connectShopify(ctx context.Context, rec domain.Store, token, webhookSecret string, allWebhooks bool) (registration, error) {
	s := st.s
	n, err := s.client.RegisterWebhooks(ctx, rec.Shop, token, s.webhookURL(rec.UserID, rec.Shop))
	reg := registration{n: n, err: err}
	if allWebhooks && (err != nil || n < len(ecom.Topics())) {
		if err == nil {
			err = fmt.Errorf("%w: %d of %d webhooks registered", domain.ErrStorePlatform, n, len(ecom.Topics()))
		}
		return reg, &webhooksError{err}
	}
	if err != nil {
		st.e.log.Warn("store webhooks not all registered", "shop", rec.Shop, "user_id", rec.UserID, "registered", n, "err", err)
	}
	rec.Platform, rec.WebhooksRegistered, rec.ConnectedAt = ecom.PlatformShopify, n, st.e.now().UTC()
	if err := st.sealInto(&rec, token, webhookSecret); err != nil {
		return reg, err
	}
	if err := st.save(ctx, rec, true); err != nil {
		return reg, err
	}
	st.e.log.Info("store connected", "method", rec.Method, "shop", rec.Shop, "user_id", rec.UserID, "webhooks", n)
	return reg, nil
}

// VerifyShopify checks an access token against the platform and returns the shop's name.
func (st *Stores) VerifyShopify(ctx context.Context, shopDomain, token string) (string, error) {
	_, _, name, err := st.verifyShopToken(ctx, shopDomain, token)
	return name, err
}

// verifyShopToken validates the domain (before any outbound call) and the token's shape, then
// asks the platform for the shop's name.
func (st *Stores) verifyShopToken(ctx context.Context, shopDomain, token string) (shop, tok, name string, err error) {
	shop, ok := ecom.NormalizeShopDomain(shopDomain)
	if !ok {
		return "", "", "", fmt.Errorf("%w: %q; use <name>.myshopify.com", domain.ErrInvalidShop, shopDomain)
	}
	tok = strings.TrimSpace(token)
	if tok == "" {
		return "", "", "", fmt.Errorf("%w: the access token is required", domain.ErrValidation)
	}
	if !ecom.ValidAccessToken(tok) {
		return "", "", "", fmt.Errorf("%w: the access token must start with %s", domain.ErrValidation, strings.Join(ecom.AccessTokenPrefixes(), ", "))
	}
	name, err = st.s.client.VerifyToken(ctx, shop, tok)
	if err != nil {
		return "", "", "", err
	}
	return shop, tok, name, nil
}

func (st *Stores) sealInto(rec *domain.Store, token, webhookSecret string) error {
	s := st.s
	var err error
	if rec.AccessToken, err = s.sealer.Seal(token); err != nil {
		return fmt.Errorf("%w: seal the access token: %w", domain.ErrUnavailable, err)
	}
	if rec.WebhookSecret, err = s.sealer.Seal(strings.TrimSpace(webhookSecret)); err != nil {
		return fmt.Errorf("%w: seal the webhook secret: %w", domain.ErrUnavailable, err)
	}
	return nil
}

// save makes rec the user's store, in one commit: the user's previous store (if another
// shop) and, when takeOver allows it (the platform proved access), another user's connection of
// the same shop are removed with their pending events. A reconnect of the same shop by the same
// user keeps its pending events and actor.
func (st *Stores) save(ctx context.Context, rec domain.Store, takeOver bool) error {
	s := st.s
	s.idx.write.Lock()
	defer s.idx.write.Unlock()
	s.idx.mu.RLock()
	sameShop, prevOfUser := s.idx.byID[rec.Shop], s.idx.byUser[rec.UserID]
	s.idx.mu.RUnlock()
	if sameShop != nil && sameShop.rec.UserID != rec.UserID && !takeOver {
		return domain.ErrStoreTaken
	}
	var dropped []*storeEntry
	var remove, drop []string
	if prevOfUser != nil && prevOfUser.rec.Shop != rec.Shop {
		dropped = append(dropped, prevOfUser)
		remove = append(remove, prevOfUser.rec.Shop)
	}
	if sameShop != nil && sameShop.rec.UserID != rec.UserID {
		dropped = append(dropped, sameShop)
	}
	for _, d := range dropped {
		drop = append(drop, d.rec.Shop)
	}
	removed, err := s.records.Replace(ctx, &rec, remove, drop)
	if err != nil {
		return fmt.Errorf("%w: save store: %w", domain.ErrUnavailable, err)
	}
	s.pending.Add(-removed)
	ent := s.newEntry(rec)
	if sameShop != nil && sameShop.rec.UserID == rec.UserID {
		// Same store, new credentials: its actor goes on with its queue (it reads the store's
		// current credentials).
		sameShop.mu.Lock()
		ent.pid, sameShop.pid = sameShop.pid, nil
		sameShop.mu.Unlock()
		ent.seq.Continue(&sameShop.seq)
		if v := sameShop.view.Load(); v != nil {
			ent.view.Store(v)
		}
	}
	s.idx.mu.Lock()
	for _, d := range dropped {
		if s.idx.byID[d.rec.Shop] == d {
			delete(s.idx.byID, d.rec.Shop)
		}
		if s.idx.byUser[d.rec.UserID] == d {
			delete(s.idx.byUser, d.rec.UserID)
		}
	}
	s.idx.byID[rec.Shop], s.idx.byUser[rec.UserID] = ent, ent
	s.idx.mu.Unlock()
	for _, d := range dropped {
		st.stopActor(d)
	}
	return nil
}

// Disconnect removes the user's store, its pending events and its recent events. The
// webhooks registered on the platform stay (they are answered 404 from now on).
func (st *Stores) Disconnect(ctx context.Context, uid string) error {
	s := st.s
	s.idx.write.Lock()
	defer s.idx.write.Unlock()
	ent := s.idx.ofUser(uid)
	if ent == nil {
		return fmt.Errorf("%w: no store is connected to this account", domain.ErrStoreNotFound)
	}
	st.stopActor(ent)
	removed, err := s.records.Replace(ctx, nil, []string{ent.rec.Shop}, []string{ent.rec.Shop})
	if err != nil {
		return fmt.Errorf("%w: remove store: %w", domain.ErrUnavailable, err)
	}
	s.pending.Add(-removed)
	s.idx.mu.Lock()
	delete(s.idx.byID, ent.rec.Shop)
	delete(s.idx.byUser, uid)
	s.idx.mu.Unlock()
	st.e.log.Info("store disconnected", "shop", ent.rec.Shop, "user_id", uid)
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
