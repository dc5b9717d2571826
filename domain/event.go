package domain

// Events out (DESIGN.md section 10): the events the gateway publishes, the webhook
// subscriptions that receive them, the durable deliveries and their attempts, and the incoming
// messages kept for GET /api/v1/messages?direction=in.

import (
	"slices"
	"time"
)

// EventType names an event a subscription can receive.
type EventType string

// The event types of DESIGN.md section 10.
const (
	// EventMessageStatus: every status change of a sent message (data: MessageStatusData).
	EventMessageStatus EventType = "message.status"
	// EventMessageReceived: a message written to one of the user's sessions (data:
	// InboundMessage).
	EventMessageReceived EventType = "message.received"
	// EventSessionStatus: a session's status changed (data: SessionStatusData).
	EventSessionStatus EventType = "session.status"
	// EventCampaignProgress: a campaign advanced; at most once a second per campaign (data:
	// CampaignEventData).
	EventCampaignProgress EventType = "campaign.progress"
	// EventCampaignCompleted: a campaign ended, completed, cancelled or failed (data:
	// CampaignEventData).
	EventCampaignCompleted EventType = "campaign.completed"
	// EventStoreEvent: a store event was processed (data: StoreEventData).
	EventStoreEvent EventType = "store.event"
	// EventSessionWarning: a session slowed down to protect its account, and until when
	// (data: SessionWarningData; DESIGN.md section 14).
	EventSessionWarning EventType = "session.warning"
	// EventOrderConfirmed and EventOrderCancelled: a customer answered an order's confirmation
	// yes or no (data: OrderAnswerData; DESIGN.md section 18).
	EventOrderConfirmed EventType = "order.confirmed"
	EventOrderCancelled EventType = "order.cancelled"
)

// EventTypes returns every event type, in documentation order.
func EventTypes() []EventType {
	return []EventType{EventMessageStatus, EventMessageReceived, EventSessionStatus,
		EventCampaignProgress, EventCampaignCompleted, EventStoreEvent, EventSessionWarning,
		EventOrderConfirmed, EventOrderCancelled}
}

// Valid reports whether t is one of EventTypes.
func (t EventType) Valid() bool { return slices.Contains(EventTypes(), t) }

// Event is one thing that happened to a user's resources. Publishing commits it to the durable
// queue of every subscription of the user that wants its type; the body each receives is
// {"type": Type, "timestamp": At, "data": Data}.
type Event struct {
	// ID identifies the event (evt_...); the publisher assigns one when it is empty. A
	// subscription's delivery of it has its own webhook-id.
	ID   string
	Type EventType
	// At is when it happened (the publisher uses its clock when zero).
	At time.Time
	// Data is the payload: one of the *Data types of this file (or InboundMessage), encoded
	// as JSON.
	Data any
}

// MessageStatusData is the data of message.status.
type MessageStatusData struct {
	MessageID string `json:"messageId"`
	To        string `json:"to"`
	SessionID string `json:"session"`
	Status    string `json:"status"` // queued, sent, delivered, read, failed
	Code      string `json:"code,omitempty"`
	Error     string `json:"error,omitempty"`
	// At is when the status was reached (RFC 3339 UTC with milliseconds on the wire).
	At time.Time `json:"at"`
}

// SessionStatusData is the data of session.status.
type SessionStatusData struct {
	SessionID string     `json:"session"`
	Status    string     `json:"status"` // the session statuses of SPEC.md section 3
	Reason    string     `json:"reason,omitempty"`
	Phone     string     `json:"phone,omitempty"`
	Until     *time.Time `json:"until,omitempty"` // the end of a temporary ban, when known
	// RestrictedUntil: the network's account-wide reach-out timelock holds first messages to
	// new contacts until then (absent when none).
	RestrictedUntil *time.Time `json:"restrictedUntil,omitempty"`
}

// Reasons of session.warning.
const (
	// WarnBanEnded: a temporary ban ended; the session runs at half rate for a day.
	WarnBanEnded = "ban_ended"
	// WarnRefusals: over 10 % of the last hour's sends were refused; half rate for a day.
	WarnRefusals = "refusals"
)

// SessionWarningData is the data of session.warning: the session runs at half its pacing
// (gaps doubled, caps halved) until Until, for Reason.
type SessionWarningData struct {
	SessionID string    `json:"session"`
	Reason    string    `json:"reason"`
	Until     time.Time `json:"until"`
}

// CampaignEventData is the data of campaign.progress and campaign.completed.
type CampaignEventData struct {
	CampaignID     string `json:"campaignId"`
	Status         string `json:"status"`
	TotalRequested int    `json:"total_requested"`
	TotalProcessed int    `json:"total_processed"`
	Successful     int    `json:"successful"`
	Failed         int    `json:"failed"`
	OptedOut       int    `json:"opted_out,omitempty"`
}

// StoreEventData is the data of store.event.
type StoreEventData struct {
	Shop      string `json:"shop"`
	Topic     string `json:"topic"`
	OrderID   int64  `json:"orderId,omitempty"`
	OrderName string `json:"orderName,omitempty"`
	Outcome   string `json:"outcome"` // sent, skipped, failed
	Reason    string `json:"reason,omitempty"`
	MessageID string `json:"messageId,omitempty"`
}

// InboundMessage is a message a contact wrote to one of the user's sessions: the data of
// message.received, and kept 7 days for GET /api/v1/messages?direction=in.
type InboundMessage struct {
	ID        string    `json:"id"` // the network's message id
	UserID    string    `json:"-"`
	SessionID string    `json:"session"`
	From      string    `json:"from"`
	Type      string    `json:"type"` // text, image, video, audio, document, location, contact
	Text      string    `json:"text,omitempty"`
	Caption   string    `json:"caption,omitempty"`
	MimeType  string    `json:"mimeType,omitempty"`
	FileName  string    `json:"fileName,omitempty"`
	Bytes     int64     `json:"bytes,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// InboundRetention is how long incoming messages are kept.
const InboundRetention = 7 * 24 * time.Hour

// WebhookSubscription is a user's webhook endpoint.
type WebhookSubscription struct {
	ID        string      `json:"id"`
	UserID    string      `json:"userId"`
	URL       string      `json:"url"`
	Events    []EventType `json:"events"`
	Secret    string      `json:"secret"` // whsec_ + base64 of 32 random bytes
	CreatedAt time.Time   `json:"createdAt"`
	// FailingSince is when deliveries started failing without a success since (zero: healthy).
	FailingSince time.Time `json:"failingSince"`
	// Disabled is set after WebhookFailureWindow of failures; Reason says why.
	Disabled       bool      `json:"disabled,omitempty"`
	DisabledAt     time.Time `json:"disabledAt"`
	DisabledReason string    `json:"disabledReason,omitempty"`
}

// Wants reports whether the subscription takes events of type t now.
func (s WebhookSubscription) Wants(t EventType) bool {
	return !s.Disabled && slices.Contains(s.Events, t)
}

// WebhookFailureWindow is how long a subscription may fail before it is disabled; an event is
// retried for as long.
const WebhookFailureWindow = 24 * time.Hour

// WebhookDelivery is one event queued for one subscription: committed before it is sent,
// removed once a 2xx answered it. Its ID is the webhook-id header, the same on every attempt.
type WebhookDelivery struct {
	ID             string    `json:"id"` // msg_...
	SubscriptionID string    `json:"sub"`
	Seq            uint64    `json:"seq"` // the delivery order within the subscription
	EventID        string    `json:"eventId"`
	Type           EventType `json:"type"`
	CreatedAt      time.Time `json:"createdAt"`
	Body           []byte    `json:"body"` // the exact bytes that are signed and sent
}

// WebhookAttempt is one attempt at a delivery, as GET /api/client/webhooks/deliveries lists it.
type WebhookAttempt struct {
	N         int64     `json:"n"` // orders a subscription's attempts
	ID        string    `json:"id"`
	EventID   string    `json:"eventId"`
	Type      EventType `json:"type"`
	Attempt   int       `json:"attempt"`
	Status    int       `json:"status,omitempty"` // the receiver's HTTP status; 0 when none
	Error     string    `json:"error,omitempty"`
	Delivered bool      `json:"delivered"`
	At        time.Time `json:"at"`
	Duration  int64     `json:"durationMs"`
	// Body is the event as it was sent (the dashboard's redelivery sends it again).
	Body []byte `json:"body,omitempty"`
}

// WebhookProgress is what a subscription's deliverer writes after some attempts, in one commit:
// the attempt records, the deliveries that succeeded (removed from the queue), and the
// subscription record when its health changed.
type WebhookProgress struct {
	Attempts     []WebhookAttempt
	Delivered    []uint64
	Subscription *WebhookSubscription
}
