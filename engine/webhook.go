package engine

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/actors/storeevents"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// The webhook receiver's hot path: every store webhook comes through AcceptWebhook, so it
// allocates little and parses nothing the storeevents actor will parse again.

// Webhook is one inbound store webhook as the HTTP layer read it. The byte slices are only read
// during AcceptWebhook.
type Webhook struct {
	UID, Shop []byte // query parameters
	// Topic and Key are query parameters too: a webhook address can name its topic, for a
	// platform plugin that sends none (an abandoned-cart plugin's webhook), and carry the
	// address's key instead of a signature it cannot make (TopicKey).
	Topic, Key []byte
	// Header reads the request's headers: the store's platform (ecom.Platform.Headers) names
	// the topic, signature and delivery id headers it reads.
	Header ecom.HeaderPeeker
	Body   []byte
}

// ClaimedShop is the shop a webhook says it is for, before any check: the query's shop, else a
// platform's shop-domain header, else the query's uid (the key of its guessing budget).
func (w Webhook) ClaimedShop() []byte {
	if len(w.Shop) > 0 {
		return w.Shop
	}
	if s := w.shopDomain(); len(s) > 0 {
		return s
	}
	return w.UID
}

func (w Webhook) shopDomain() []byte {
	if w.Header == nil {
		return nil
	}
	return ecom.First(w.Header, ecom.ShopDomainHeaders())
}

// Webhook outcomes (WebhookResult.Status).
const (
	WebhookQueued    = "queued"
	WebhookDuplicate = "duplicate"
	WebhookIgnored   = "ignored"
)

// WebhookResult is the receiver's answer.
type WebhookResult struct {
	Status string
	Reason string
	// Topic is the topic for metrics: one of the platforms' known topics, "other" or "none".
	Topic string
}

// AcceptWebhook is the webhook receiver: resolve the store, verify the signature, dedupe by
// delivery id, commit the event to the store's durable inbox (dedupe mark and entry in one
// group commit), and hand it to the store's actor. It parses nothing beyond a JSON validity
// check and a scan for a phone field; the actor does the rest.
func (st *Stores) AcceptWebhook(ctx context.Context, w Webhook) (WebhookResult, error) {
	e, s := st.e, st.s
	ent := s.resolve(w)
	if ent == nil {
		return WebhookResult{Topic: "none"}, fmt.Errorf("%w: no connected store matches this webhook", domain.ErrStoreNotFound)
	}
	p, ok := ecom.Lookup(ent.rec.Platform)
	if !ok {
		return WebhookResult{Topic: "none"}, fmt.Errorf("%w: the store's platform %q is not known to this gateway", domain.ErrStoreNotFound, ent.rec.Platform)
	}
	hs := p.Headers()
	var topicH, signature, deliveryID []byte
	if w.Header != nil {
		topicH, signature, deliveryID = ecom.First(w.Header, hs.Topic), ecom.First(w.Header, hs.Signature), ecom.First(w.Header, hs.DeliveryID)
	}
	keyed := false
	if len(topicH) == 0 && len(w.Topic) > 0 {
		// The address names the topic; its key (when the store has a secret) stands for the
		// signature the sender cannot make.
		topicH = w.Topic
		keyed = len(signature) == 0 && len(w.Key) > 0 && s.keyMatches(ent, string(w.Topic), w.Key)
	}
	res := WebhookResult{Topic: p.TopicLabel(topicH)}
	if p.IsPing(w.Body) {
		// The platform's unsigned check that the address answers (WooCommerce's on creation).
		res.Status, res.Reason = WebhookIgnored, "webhook ping"
		return res, nil
	}
	if !keyed && len(signature) == 0 && len(w.Key) > 0 && ent.hasSecret() {
		// A key in the address, and not this store's for this topic: say so, not that a
		// signature header is missing (the sender that uses the key cannot send one).
		s.signatureN.Add(1)
		return res, fmt.Errorf("%w: the address's key does not match this store's for topic %q", domain.ErrInvalidSignature, topicH)
	}
	if !keyed {
		if err := s.verify(ent, p, signature, w.Body); err != nil {
			s.signatureN.Add(1)
			return res, err
		}
	}
	topic := string(bytes.TrimSpace(topicH))
	if topic == "" {
		return res, fmt.Errorf("%w: the topic header (%s) is required", domain.ErrValidation, strings.Join(hs.Topic, " or "))
	}
	if b := bytes.TrimLeft(w.Body, " \t\r\n"); len(b) == 0 || b[0] != '{' || !json.Valid(w.Body) {
		f, ok := p.(ecom.FormTopics)
		if !ok || !f.FormBody(topic) {
			return res, domain.ErrInvalidPayload
		}
		// A form body (an abandoned-cart plugin's): kept as the JSON object of its fields.
		js, err := ecom.FormAsJSON(w.Body)
		if err != nil {
			return res, fmt.Errorf("%w: %w", domain.ErrInvalidPayload, err)
		}
		w.Body = js
	}
	now := e.now().UTC()
	switch sends, needsPhone := p.Topic(topic); {
	case !sends:
		res.Status, res.Reason = WebhookIgnored, "topic "+strconv.Quote(topic)+" sends no message"
	case needsPhone && !ecom.HasPhone(w.Body):
		res.Status, res.Reason = WebhookIgnored, "no phone number in the payload"
	}
	if res.Status == WebhookIgnored {
		s.ignored.Add(1)
		e.hw.Send(st.actorOf(ent), storeevents.RecordEvent{Record: domain.StoreEvent{
			Topic: topic, WebhookID: string(deliveryID), Status: domain.StoreEventSkipped, Reason: res.Reason,
			ReceivedAt: now, ProcessedAt: now,
		}})
		return res, nil
	}

	// What the worker could never make a message of (an order without a usable id) is refused
	// now, 400 with the reason, rather than accepted and failed later: the platform shows the
	// store owner a refused delivery.
	if _, err := p.Parse(topic, w.Body); errors.Is(err, ecom.ErrMalformed) {
		return res, fmt.Errorf("%w: %w", domain.ErrInvalidPayload, err)
	}
	var seenID string
	if len(deliveryID) > 0 {
		seenID = ent.rec.Shop + "/" + string(deliveryID)
		if _, busy := s.inflight.LoadOrStore(seenID, struct{}{}); busy {
			s.duplicates.Add(1)
			res.Status = WebhookDuplicate
			return res, nil
		}
		defer s.inflight.Delete(seenID)
	}
	seq := ent.seq.Next(now)
	entry := domain.InboxEntry{
		Seq: seq, Shop: ent.rec.Shop, UserID: ent.rec.UserID, Platform: ent.rec.Platform, Topic: topic,
		WebhookID: string(deliveryID), MessageID: NewMessageID(), ReceivedAt: now, Body: w.Body,
	}
	switch err := s.inbox.Accept(ctx, entry, string(deliveryID)); {
	case errors.Is(err, domain.ErrRecordExists):
		// Accepted before (the dedupe mark is checked in the commit: a read first would
		// wait for the commits in flight). That first commit may have been one whose answer
		// was lost (its request failed): the actor reads its inbox again.
		s.duplicates.Add(1)
		e.hw.Send(st.actorOf(ent), storeevents.Rescan{})
		res.Status = WebhookDuplicate
		return res, nil
	case errors.Is(err, domain.ErrInboxEntry):
		return res, fmt.Errorf("%w: %w", domain.ErrInvalidPayload, err)
	case err != nil:
		e.hw.Send(st.actorOf(ent), storeevents.Rescan{}) // the commit may have happened
		return res, fmt.Errorf("%w: store the webhook: %w", domain.ErrUnavailable, err)
	}
	s.accepted.Add(1)
	// The actor gets the entry itself (no read to start on it); the body is the request's
	// buffer, reused once the handler returns: a copy.
	cached := entry
	cached.Body = bytes.Clone(entry.Body)
	s.pending.Add(1)
	e.hw.Send(st.actorOf(ent), storeevents.InboxAdded{Seq: seq, Entry: &cached})
	res.Status = WebhookQueued
	return res, nil
}

// resolve finds the store a webhook is for: the uid's store (which must be the query's shop
// when one is given), else the store with the query's or the header's shop domain.
func (s *storeService) resolve(w Webhook) *storeEntry {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	if len(w.UID) > 0 {
		ent := s.idx.byUser[string(w.UID)]
		if ent == nil || (len(w.Shop) > 0 && !strings.EqualFold(string(w.Shop), ent.rec.Shop)) {
			return nil
		}
		return ent
	}
	shop := w.Shop
	if len(shop) == 0 {
		shop = w.shopDomain()
	}
	if len(shop) == 0 {
		return nil
	}
	if ent := s.idx.byID[string(shop)]; ent != nil {
		return ent
	}
	h, ok := ecom.NormalizeHost(string(shop))
	if !ok {
		return nil
	}
	return s.idx.byID[h]
}

// TopicKey is the key a webhook address that names its topic carries when the store has a
// signing secret (for a sender that cannot sign, CartFlows' abandoned-cart webhook): the
// HMAC-SHA256 of the topic and shop with the secret, hex, 32 digits. "" when the store has no
// secret (its webhooks are accepted unsigned).
func (ent *storeEntry) TopicKey(topic string) string {
	secret := ent.hookSecret
	if secret == "" {
		secret = ent.clientSecret
	}
	if secret == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("webhook-address-key\x00" + topic + "\x00" + ent.rec.Shop))
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// keyMatches tells whether key is the store's key of a webhook address naming topic.
func (s *storeService) keyMatches(ent *storeEntry, topic string, key []byte) bool {
	want := ent.TopicKey(topic)
	return want != "" && hmac.Equal([]byte(want), key)
}

// verify checks the webhook's signature, in the platform's form, with the store's secrets
// (constant time).
func (s *storeService) verify(ent *storeEntry, p ecom.Platform, signature, body []byte) error {
	if !ent.hasSecret() {
		if s.cfg.RequireSignature {
			return fmt.Errorf("%w: this store has no webhook signing secret, and the gateway requires signed webhooks", domain.ErrInvalidSignature)
		}
		return nil
	}
	if len(signature) == 0 {
		return fmt.Errorf("%w: the signature header (%s) is missing", domain.ErrInvalidSignature, strings.Join(p.Headers().Signature, " or "))
	}
	if sig, ok := p.ParseSignature(signature); ok &&
		(ent.hookMACs.Verify(body, sig) || ent.clientMACs.Verify(body, sig)) {
		return nil
	}
	return fmt.Errorf("%w: the signature does not match the body", domain.ErrInvalidSignature)
}
