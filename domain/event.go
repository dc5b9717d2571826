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
	// Conversations (DESIGN.md section 16): what happened to a message after it was written,
	// by a contact or by the session itself (fromMe).
	// EventMessageReaction: a reaction to a message, or one taken back (data: ReactionData).
	EventMessageReaction EventType = "message.reaction"
	// EventMessageEdited: a message's text was changed (data: EditedData).
	EventMessageEdited EventType = "message.edited"
	// EventMessageRevoked: a message was deleted for everyone (data: RevokedData).
	EventMessageRevoked EventType = "message.revoked"
	// EventPollVote: someone voted in a poll, or changed their vote (data: PollVoteData).
	EventPollVote EventType = "poll.vote"
	// EventOrderConfirmed and EventOrderCancelled: a customer answered an order's confirmation
	// yes or no (data: OrderAnswerData; DESIGN.md section 18).
	EventOrderConfirmed EventType = "order.confirmed"
	EventOrderCancelled EventType = "order.cancelled"
)

// EventTypes returns every event type, in documentation order.
func EventTypes() []EventType {
	return []EventType{EventMessageStatus, EventMessageReceived, EventSessionStatus,
		EventCampaignProgress, EventCampaignCompleted, EventStoreEvent, EventSessionWarning,
		EventMessageReaction, EventMessageEdited, EventMessageRevoked, EventPollVote,
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

// EventRecord is an event as it was committed: in its user's journal (EventJournalRetention,
// what a live stream resumed with Last-Event-ID replays) and, while a broker takes the
// gateway's events (--events-nats), in the outbox of events not yet published
// (EventOutboxRetention).
type EventRecord struct {
	// Seq orders the events of one user's partition (or of a single node): an event committed
	// after another has a higher Seq, across restarts and owners (see engine's journal).
	Seq    uint64
	ID     string // evt_...: the SSE id, the webhooks' eventId and the broker's Nats-Msg-Id (unless DedupeID)
	UserID string
	Type   EventType
	// Body is the webhook body ({type, timestamp, data}) as subscriptions receive it.
	Body []byte
	// DedupeID is the broker's Nats-Msg-Id when the event may be published again under a new
	// ID ("" : ID): a message's status that its record follows (sent, delivered, read, failed,
	// cancelled), published again by the boot's resend after a kill -9 between the event's
	// commit and the record. Made of the user, the message and the status (engine).
	DedupeID string
}

// FinalStatus is a message's failed or cancelled status as its event was committed, kept
// beside the event in the same commit (persist: event_final) until the message's record is
// surely written: a boot that finds the message still pending settles it as that (no send, no
// second event), for everyone who heard of it was told so.
type FinalStatus struct {
	UserID    string
	MessageID string
	Status    MessageStatus // failed or cancelled
	At        time.Time
	Code      string
	Error     string
}

// Retention of the event journal and the broker outbox.
const (
	// EventJournalRetention: a live stream resumes from an event at most this old.
	EventJournalRetention = 24 * time.Hour
	// EventOutboxRetention: an event waits this long for an unreachable broker (its stream
	// keeps events as long).
	EventOutboxRetention = 7 * 24 * time.Hour
)

// MessageStatusData is the data of message.status.
type MessageStatusData struct {
	MessageID string `json:"messageId"`
	To        string `json:"to"`
	// Phone and LID name the recipient (DESIGN.md section 16): its number, and its LID where
	// the network gave one; Group is set instead of Phone for a message to a group.
	Phone     string `json:"phone,omitempty"`
	LID       string `json:"lid,omitempty"`
	Group     string `json:"group,omitempty"`
	Type      string `json:"type,omitempty"` // the message's kind
	SessionID string `json:"session"`
	Status    string `json:"status"` // queued, sent, delivered, read, failed, cancelled
	Code      string `json:"code,omitempty"`
	Error     string `json:"error,omitempty"`
	// Via and ViaReason: the session kind the message went through and why (DESIGN.md
	// section 17); Pricing the Cloud API's pricing category.
	Via       string `json:"via,omitempty"`
	ViaReason string `json:"viaReason,omitempty"`
	Pricing   string `json:"pricing,omitempty"`
	// At is when the status was reached (RFC 3339 UTC with milliseconds on the wire).
	At time.Time `json:"at"`
	// Accepted is when the message was accepted (its outbox entry's CreatedAt), not on the
	// wire: a caller may choose a message's id, and reuse it once the old message's record is
	// gone; the ids a status keeps across its publications (engine: statusDigest) tell the two
	// messages apart by it. A boot reads it back from the outbox.
	Accepted Millis `json:"-"`
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
	ID        string `json:"id"` // the network's message id
	UserID    string `json:"-"`
	SessionID string `json:"session"`
	// From is the sender's phone ("" when the network hides it and the session's LID map does
	// not know it); Phone is the same number (every event names a contact by phone and LID).
	From  string `json:"from"`
	Phone string `json:"phone,omitempty"`
	LID   string `json:"lid,omitempty"`
	Name  string `json:"name,omitempty"`  // the name the sender set on their profile
	Group string `json:"group,omitempty"` // the group it was written in
	// Type and Kind are the message's kind (Type is the older name: text, image, video, audio,
	// document, sticker, location, contact, poll; "other" for what the gateway has no kind for).
	Type     string  `json:"type"`
	Kind     string  `json:"kind"`
	Text     string  `json:"text,omitempty"` // the text; a location's name, a contact's name
	Caption  string  `json:"caption,omitempty"`
	MimeType string  `json:"mimeType,omitempty"`
	FileName string  `json:"fileName,omitempty"`
	Bytes    int64   `json:"bytes,omitempty"`
	PTT      bool    `json:"ptt,omitempty"`
	Lat      float64 `json:"lat,omitempty"`
	Lng      float64 `json:"lng,omitempty"`
	Address  string  `json:"address,omitempty"`
	// Contact card, poll.
	ContactName  string   `json:"contactName,omitempty"`
	ContactPhone string   `json:"contactPhone,omitempty"`
	Question     string   `json:"question,omitempty"`
	Options      []string `json:"options,omitempty"`
	Multiple     bool     `json:"multiple,omitempty"`
	// ReplyTo is the id of the message this one quotes, Quoted what it said.
	ReplyTo string      `json:"replyTo,omitempty"`
	Quoted  *MessageRef `json:"quoted,omitempty"`
	// ButtonID: a tapped reply button's or list row's id (kind button_reply; Text is its title).
	ButtonID  string    `json:"buttonId,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// Content is the message an incoming one carries (what a reply quotes, a vote counts against).
func (m InboundMessage) Content() Message {
	return Message{ID: m.ID, Kind: Kind(m.Kind), Text: m.Text, Caption: m.Caption, MimeType: m.MimeType,
		FileName: m.FileName, Size: m.Bytes, PTT: m.PTT, Lat: m.Lat, Lng: m.Lng, Address: m.Address,
		ContactName: m.ContactName, ContactPhone: m.ContactPhone, Question: m.Question, Options: m.Options,
		Multiple: m.Multiple, ButtonID: m.ButtonID}
}

// Ref is how a reply or a reaction names this message.
func (m InboundMessage) Ref() MessageRef {
	return MessageRef{ID: m.ID, From: m.From, FromLID: m.LID, Group: m.Group, Kind: Kind(m.Kind), Text: m.Content().Preview()}
}

// MessageChange is what message.reaction, message.edited and message.revoked say of the
// message changed and who changed it: From (its Phone and LID; the LID alone when the network
// hides the phone), or the session itself (FromMe), in a direct chat or in Group, at At.
type MessageChange struct {
	MessageID string    `json:"messageId"`
	SessionID string    `json:"session"`
	From      string    `json:"from"`
	Phone     string    `json:"phone,omitempty"`
	LID       string    `json:"lid,omitempty"`
	FromMe    bool      `json:"fromMe"`
	Group     string    `json:"group,omitempty"`
	At        time.Time `json:"at"`
}

// ReactionData is the data of message.reaction: From reacted to MessageID with Emoji ("" when
// the reaction was taken back).
type ReactionData struct {
	MessageChange
	Emoji string `json:"emoji"`
}

// EditedData is the data of message.edited: MessageID's text is now Text.
type EditedData struct {
	MessageChange
	Text string `json:"text"`
}

// RevokedData is the data of message.revoked: MessageID was deleted for everyone.
type RevokedData struct {
	MessageChange
}

// PollVoteData is the data of poll.vote: Voter chose Options in the poll MessageID (none: the
// vote was taken back); it replaces the voter's earlier vote.
type PollVoteData struct {
	MessageID string    `json:"messageId"`
	SessionID string    `json:"session"`
	Voter     string    `json:"voter"`
	Phone     string    `json:"phone,omitempty"`
	LID       string    `json:"lid,omitempty"`
	Group     string    `json:"group,omitempty"`
	Options   []string  `json:"options"`
	At        time.Time `json:"at"`
}

// InboundRetention is how long incoming messages are kept.
const InboundRetention = 7 * 24 * time.Hour

// WebhookSubscription is a user's webhook endpoint.
type WebhookSubscription struct {
	ID     string      `json:"id"`
	UserID string      `json:"userId"`
	URL    string      `json:"url"`
	Events []EventType `json:"events"`
	Secret string      `json:"secret"` // whsec_ + base64 of 32 random bytes
	// Format is the deliveries' body: "" (standard: {type, timestamp, data}, Standard Webhooks
	// signature) or WebhookFormatMeta.
	Format    string    `json:"format,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// FailingSince is when deliveries started failing without a success since (zero: healthy).
	FailingSince time.Time `json:"failingSince"`
	// Disabled is set after WebhookFailureWindow of failures; Reason says why.
	Disabled       bool      `json:"disabled,omitempty"`
	DisabledAt     time.Time `json:"disabledAt"`
	DisabledReason string    `json:"disabledReason,omitempty"`
}

// WebhookFormatMeta: Meta's Cloud API webhook payloads ({object: "whatsapp_business_account",
// entry: [...]}) for statuses, incoming messages and reactions, signed X-Hub-Signature-256 with
// the secret as the app secret (DESIGN.md section 20); other event types are not sent.
const WebhookFormatMeta = "meta"

// Wants reports whether the subscription takes events of type t now.
func (s WebhookSubscription) Wants(t EventType) bool {
	if s.Format == WebhookFormatMeta && t != EventMessageStatus && t != EventMessageReceived && t != EventMessageReaction {
		return false
	}
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

// MaxCommitWrites bounds one commit of many writes made one after the other (a JetStream batch
// takes 1,000 messages): the store splits a larger batch (persist), and the events facet
// commits a batch that keeps a failed or cancelled status in whole events within it (engine).
const MaxCommitWrites = 512
