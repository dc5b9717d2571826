package engine

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/actors"
	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/persist"
)

// The webhook receiver's hot path: every store webhook comes through AcceptWebhook, so it
// allocates little and parses nothing the storeevents actor will parse again.

// Webhook is one inbound store webhook as the HTTP layer read it. The byte slices are only read
// during AcceptWebhook.
type Webhook struct {
	UID, Shop  []byte // query parameters
	Topic      []byte // x-ecom-topic, X-Shopify-Topic or X-WC-Webhook-Topic
	ShopDomain []byte // x-ecom-shop-domain, X-Shopify-Shop-Domain or X-WC-Webhook-Source
	Signature  []byte // X-Shopify-Hmac-Sha256 or X-WC-Webhook-Signature
	DeliveryID []byte // X-Shopify-Webhook-Id or X-WC-Webhook-Delivery-ID
	Body       []byte
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
func (e *Engine) AcceptWebhook(ctx context.Context, w Webhook) (WebhookResult, error) {
	s := e.stores
	ent := s.resolve(w)
	if ent == nil {
		return WebhookResult{Topic: "none"}, fmt.Errorf("%w: no connected store matches this webhook", ErrStoreNotFound)
	}
	woo := ent.rec.Platform == ecom.PlatformWooCommerce
	res := WebhookResult{Topic: metricTopic(w.Topic, woo)}
	if ecom.WooPing(w.Body) {
		// WooCommerce's unsigned ping when a webhook is created.
		res.Status, res.Reason = WebhookIgnored, "webhook ping"
		return res, nil
	}
	if err := s.verify(ent, w); err != nil {
		s.signatureN.Add(1)
		return res, err
	}
	topic := string(bytes.TrimSpace(w.Topic))
	if topic == "" {
		return res, fmt.Errorf("%w: the topic header (X-Shopify-Topic, x-ecom-topic or X-WC-Webhook-Topic) is required", ErrValidation)
	}
	if b := bytes.TrimLeft(w.Body, " \t\r\n"); len(b) == 0 || b[0] != '{' || !json.Valid(w.Body) {
		return res, ErrInvalidPayload
	}
	now := e.Now().UTC()
	orderShaped := woo || topic == ecom.TopicOrderCreated || topic == ecom.TopicOrderPaid || topic == ecom.TopicOrderCancelled
	switch {
	case woo && topic != ecom.WooTopicOrderCreated && topic != ecom.WooTopicOrderUpdated,
		!woo && !ecom.ValidTopic(strings.ToLower(topic)):
		res.Status, res.Reason = WebhookIgnored, "topic "+strconv.Quote(topic)+" sends no message"
	case orderShaped && !payloadHasPhone(w.Body):
		res.Status, res.Reason = WebhookIgnored, "no phone number in the payload"
	}
	if res.Status == WebhookIgnored {
		s.ignored.Add(1)
		e.hw.Send(e.storeActor(ent), actors.RecordStoreEvent{Record: actors.StoreEventRecord{
			Topic: topic, WebhookID: string(w.DeliveryID), Status: actors.StoreEventSkipped, Reason: res.Reason,
			ReceivedAt: now, ProcessedAt: now,
		}})
		return res, nil
	}

	var seenID string
	if len(w.DeliveryID) > 0 {
		seenID = ent.rec.Shop + "/" + string(w.DeliveryID)
		if _, busy := s.inflight.LoadOrStore(seenID, struct{}{}); busy {
			s.duplicates.Add(1)
			res.Status = WebhookDuplicate
			return res, nil
		}
		defer s.inflight.Delete(seenID)
		if _, err := s.seen.KV().Get(s.seenKey(seenID)); err == nil {
			s.duplicates.Add(1)
			res.Status = WebhookDuplicate
			return res, nil
		}
	}
	seq := ent.nextSeq(now)
	entry := actors.InboxEntry{
		Seq: seq, Shop: ent.rec.Shop, UserID: ent.rec.UserID, Platform: ent.rec.Platform, Topic: topic,
		WebhookID: string(w.DeliveryID), MessageID: NewMessageID(), ReceivedAt: now, Body: w.Body,
	}
	put, err := inboxOp(ent.rec.Shop+"/"+seq, entry)
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	ops := [2]persist.Op{put}
	n := 1
	if seenID != "" {
		ops[1] = persist.Op{Key: s.seenKey(seenID), Value: seenValue, TTL: webhookSeenTTL}
		n = 2
	}
	if err := s.inbox.KV().Commit(ctx, ops[:n]...); err != nil {
		return res, fmt.Errorf("%w: store the webhook: %v", ErrUnavailable, err)
	}
	s.accepted.Add(1)
	s.pending.Add(1)
	e.hw.Send(e.storeActor(ent), actors.InboxAdded{Seq: seq})
	res.Status = WebhookQueued
	return res, nil
}

// inboxOp is s.inbox.PutOp for an entry whose body json.Valid has checked: the body is spliced
// in as it came instead of being validated and compacted again by the encoder (the record
// reads back the same through the inbox table).
func inboxOp(id string, e actors.InboxEntry) (persist.Op, error) {
	body := e.Body
	e.Body = nil
	head, err := persist.Encode(1, e) // ends with `,"body":null}`
	if err != nil {
		return persist.Op{}, err
	}
	head, ok := bytes.CutSuffix(head, []byte("null}"))
	if !ok {
		return persist.Op{}, errors.New("inbox entry encoding: unexpected shape")
	}
	v := make([]byte, 0, len(head)+len(body)+1)
	v = append(append(append(v, head...), body...), '}')
	return persist.Op{Key: []byte("inbox/" + id), Value: v}, nil
}

// seenValue is the encoded empty record of webhook_seen (version 1, "{}").
var seenValue = []byte("\x01{}")

func (s *storeService) seenKey(id string) []byte { return []byte("webhook_seen/" + id) }

func (s *storeService) sentKey(shop, key string) []byte {
	return []byte("store_sent/" + shop + "/" + key)
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
		shop = w.ShopDomain
	}
	if len(shop) == 0 {
		return nil
	}
	if ent := s.idx.byShop[string(shop)]; ent != nil {
		return ent
	}
	h, ok := hostOf(string(shop))
	if !ok {
		return nil
	}
	return s.idx.byShop[h]
}

// verify checks the webhook's signature with the store's secrets (constant time).
func (s *storeService) verify(ent *storeEntry, w Webhook) error {
	if !ent.hasSecret() {
		if s.cfg.RequireSignature {
			return fmt.Errorf("%w: this store has no webhook signing secret, and the gateway requires signed webhooks", ErrInvalidSignature)
		}
		return nil
	}
	if len(w.Signature) == 0 {
		return fmt.Errorf("%w: the signature header is missing", ErrInvalidSignature)
	}
	var given [sha256.Size]byte
	sig := bytes.TrimSpace(w.Signature)
	if base64.StdEncoding.DecodedLen(len(sig)) <= len(given)+2 {
		var buf [sha256.Size + 3]byte
		if n, err := base64.StdEncoding.Decode(buf[:], sig); err == nil && n == sha256.Size {
			copy(given[:], buf[:n])
			if ent.hookMACs.verify(w.Body, given) || ent.clientMACs.verify(w.Body, given) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: the signature does not match the body", ErrInvalidSignature)
}

// macPool reuses HMAC-SHA256 states keyed with one secret (hmac.New allocates several objects,
// and the webhook route verifies every request). The comparison is constant-time, as
// ecom.VerifyWebhookHMAC's.
type macPool struct {
	pool *sync.Pool // nil: no secret
}

func (m *macPool) init(secret string) {
	if secret == "" {
		return
	}
	key := []byte(secret)
	m.pool = &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
}

func (m *macPool) verify(body []byte, given [sha256.Size]byte) bool {
	if m.pool == nil {
		return false
	}
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	m.pool.Put(h)
	return hmac.Equal(sum[:], given[:])
}

// nextSeq is a fixed-width increasing sequence: the clock in nanoseconds, bumped past the last
// one (so it also increases across restarts).
func (ent *storeEntry) nextSeq(now time.Time) string {
	for {
		last := ent.seq.Load()
		n := max(last+1, now.UnixNano())
		if ent.seq.CompareAndSwap(last, n) {
			var b [20]byte
			v := strconv.AppendInt(b[:0], n, 10)
			out := make([]byte, 20)
			for i := range out {
				out[i] = '0'
			}
			copy(out[20-len(v):], v)
			return string(out)
		}
	}
}

var phoneKey = []byte(`"phone"`)

// payloadHasPhone reports whether body has any "phone" field holding a non-empty string or a
// number. A false "yes" only defers the decision to the actor; a "no" is certain: the event
// has no number to send to.
func payloadHasPhone(body []byte) bool {
	for i := 0; i < len(body); {
		j := bytes.Index(body[i:], phoneKey)
		if j < 0 {
			return false
		}
		k := i + j + len(phoneKey)
		k = skipSpace(body, k)
		if k < len(body) && body[k] == ':' {
			k = skipSpace(body, k+1)
			if k+1 < len(body) && body[k] == '"' && body[k+1] != '"' {
				return true
			}
			if k < len(body) && body[k] >= '0' && body[k] <= '9' {
				return true
			}
		}
		i = k
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// metricTopic bounds the topic label of the webhook metrics (constant strings: no allocation).
func metricTopic(topic []byte, woo bool) string {
	t := bytes.TrimSpace(topic)
	if len(t) == 0 {
		return "none"
	}
	if woo {
		switch string(t) {
		case ecom.WooTopicOrderCreated:
			return ecom.WooTopicOrderCreated
		case ecom.WooTopicOrderUpdated:
			return ecom.WooTopicOrderUpdated
		}
		return "other"
	}
	switch string(t) {
	case ecom.TopicOrderCreated:
		return ecom.TopicOrderCreated
	case ecom.TopicOrderPaid:
		return ecom.TopicOrderPaid
	case ecom.TopicOrderFulfilled:
		return ecom.TopicOrderFulfilled
	case ecom.TopicOrderCancelled:
		return ecom.TopicOrderCancelled
	case ecom.TopicRefundCreated:
		return ecom.TopicRefundCreated
	}
	return "other"
}
