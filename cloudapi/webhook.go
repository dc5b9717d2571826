package cloudapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Webhooks: what Meta posts to the callback URL of the app (POST), and the subscription check
// it makes first (GET).

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the raw body, keyed with the
// app secret.
const SignatureHeader = "X-Hub-Signature-256"

// The subscription check's query: hub.mode=subscribe, the verify token given in the app's
// settings, and a challenge to answer as the body.
const (
	HubMode        = "hub.mode"
	HubVerifyToken = "hub.verify_token"
	HubChallenge   = "hub.challenge"
	ModeSubscribe  = "subscribe"
)

// ObjectWABA is a notification's object.
const ObjectWABA = "whatsapp_business_account"

// FieldMessages is the field of statuses and incoming messages.
const FieldMessages = "messages"

// Sign is the X-Hub-Signature-256 of body with secret.
func Sign(body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature tells whether header is body's X-Hub-Signature-256 with secret (in constant
// time; an empty secret verifies nothing).
func VerifySignature(body []byte, header, secret string) bool {
	if secret == "" {
		return false
	}
	got, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		return false
	}
	sum, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(sum, mac.Sum(nil))
}

// Notification is a webhook's body.
type Notification struct {
	Object string  `json:"object"`
	Entry  []Entry `json:"entry"`
}

// Entry is one WABA's changes.
type Entry struct {
	ID      string   `json:"id"` // the WABA id
	Changes []Change `json:"changes"`
}

// Change is one field's change: Field "messages" carries statuses and incoming messages.
type Change struct {
	Field string `json:"field"`
	Value Value  `json:"value"`
}

// Value is a change of field messages.
type Value struct {
	MessagingProduct string           `json:"messaging_product"`
	Metadata         Metadata         `json:"metadata"`
	Contacts         []WebhookContact `json:"contacts,omitempty"`
	Messages         []InboundMessage `json:"messages,omitempty"`
	Statuses         []Status         `json:"statuses,omitempty"`
	Errors           []Error          `json:"errors,omitempty"`
}

// Metadata names the business number a change is about.
type Metadata struct {
	DisplayPhoneNumber string `json:"display_phone_number"`
	PhoneNumberID      string `json:"phone_number_id"`
}

// WebhookContact is the sender of incoming messages: their profile name and WhatsApp id.
type WebhookContact struct {
	Profile *Profile `json:"profile,omitempty"`
	WaID    string   `json:"wa_id,omitempty"`
	UserID  string   `json:"user_id,omitempty"`
}

// Profile is a contact's profile.
type Profile struct {
	Name string `json:"name,omitempty"`
}

// InboundMessage is a message a contact sent to the business number.
type InboundMessage struct {
	From      string          `json:"from"`
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"` // Unix seconds
	Type      string          `json:"type"`
	Context   *InboundContext `json:"context,omitempty"`
	GroupID   string          `json:"group_id,omitempty"`

	Text        *Text               `json:"text,omitempty"`
	Image       *InboundMedia       `json:"image,omitempty"`
	Video       *InboundMedia       `json:"video,omitempty"`
	Audio       *InboundMedia       `json:"audio,omitempty"`
	Document    *InboundMedia       `json:"document,omitempty"`
	Sticker     *InboundMedia       `json:"sticker,omitempty"`
	Location    *Location           `json:"location,omitempty"`
	Contacts    []Contact           `json:"contacts,omitempty"`
	Reaction    *Reaction           `json:"reaction,omitempty"`
	Interactive *InboundInteractive `json:"interactive,omitempty"`
	Button      *QuickReply         `json:"button,omitempty"`
	Errors      []Error             `json:"errors,omitempty"`
}

// InboundContext: the message quotes (ID) a message, of the business (From is its number).
type InboundContext struct {
	From      string `json:"from,omitempty"`
	ID        string `json:"id,omitempty"`
	Forwarded bool   `json:"forwarded,omitempty"`
}

// InboundMedia is a received medium: its id (to download), type and hash.
type InboundMedia struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Caption  string `json:"caption,omitempty"`
	Filename string `json:"filename,omitempty"`
	Voice    bool   `json:"voice,omitempty"`
	Animated bool   `json:"animated,omitempty"`
}

// InboundInteractive is a tapped reply button (button_reply) or list row (list_reply).
type InboundInteractive struct {
	Type        string  `json:"type"`
	ButtonReply *Choice `json:"button_reply,omitempty"`
	ListReply   *Choice `json:"list_reply,omitempty"`
}

// QuickReply is a template's quick-reply button tapped (Type "button").
type QuickReply struct {
	Text    string `json:"text"`
	Payload string `json:"payload,omitempty"`
}

// Statuses of a sent message.
const (
	StatusSent      = "sent"
	StatusDelivered = "delivered"
	StatusRead      = "read"
	StatusPlayed    = "played"
	StatusFailed    = "failed"
)

// Status is a sent message's progress: sent, delivered, read (played), or failed (Errors).
type Status struct {
	ID                    string        `json:"id"` // the wamid
	Status                string        `json:"status"`
	Timestamp             string        `json:"timestamp"` // Unix seconds
	RecipientID           string        `json:"recipient_id,omitempty"`
	BizOpaqueCallbackData string        `json:"biz_opaque_callback_data,omitempty"`
	Conversation          *Conversation `json:"conversation,omitempty"`
	Pricing               *Pricing      `json:"pricing,omitempty"`
	Errors                []Error       `json:"errors,omitempty"`
}

// Conversation is the conversation a status was counted in.
type Conversation struct {
	ID                  string  `json:"id"`
	ExpirationTimestamp string  `json:"expiration_timestamp,omitempty"`
	Origin              *Origin `json:"origin,omitempty"`
}

// Origin is what opened a conversation.
type Origin struct {
	Type string `json:"type"`
}

// Pricing is how Meta charges a message: its category (marketing, utility, authentication,
// service, ...) and type (regular, free_customer_service, free_entry_point).
type Pricing struct {
	Billable     *bool  `json:"billable,omitempty"`
	PricingModel string `json:"pricing_model,omitempty"`
	Type         string `json:"type,omitempty"`
	Category     string `json:"category,omitempty"`
}

// Time reads a webhook timestamp (Unix seconds); zero when it does not parse.
func Time(ts string) time.Time {
	s, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// Timestamp writes a webhook timestamp.
func Timestamp(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
