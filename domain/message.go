package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxTextBytes is the longest text a message carries: the messaging network's own limit. The
// API refuses a longer one; a store's rendered message is cut to it (ecom.Render).
const MaxTextBytes = 65536

// MaxNameBytes bounds a message's short fields: a file name, a place's name and address, a
// contact's name.
const MaxNameBytes = 1024

// CheckSizes refuses a message whose text or caption is over MaxTextBytes, or a short field
// over MaxNameBytes (the network refuses or cuts them; every way in is held to the same).
func (m *Message) CheckSizes() error {
	for _, f := range [...]struct {
		name string
		v    string
		max  int
	}{{"text", m.Text, MaxTextBytes}, {"caption", m.Caption, MaxTextBytes}, {"fileName", m.FileName, MaxNameBytes},
		{"name", m.LocationName, MaxNameBytes}, {"address", m.Address, MaxNameBytes}, {"contactName", m.ContactName, MaxNameBytes}} {
		if len(f.v) > f.max {
			return fmt.Errorf("%w: %s must be at most %d bytes", ErrValidation, f.name, f.max)
		}
	}
	return nil
}

// Kind is a message kind: SPEC.md section 4.4's, and those of DESIGN.md section 16. One Kind
// and one Message carry a message from the API through the outbox to the network and back
// (network.Incoming carries a Message too).
type Kind string

// Message kinds.
const (
	KindText     Kind = "text"
	KindImage    Kind = "image"
	KindVideo    Kind = "video"
	KindAudio    Kind = "audio" // PTT: a voice note
	KindDocument Kind = "document"
	KindSticker  Kind = "sticker" // WebP
	KindLocation Kind = "location"
	KindContact  Kind = "contact"
	KindPoll     Kind = "poll"     // Question, Options, Multiple
	KindReaction Kind = "reaction" // Target, Emoji ("" takes the reaction back)
	// KindEdit changes the text of a message the session sent (Target, Text); KindRevoke
	// deletes one for everyone (Target). Each is a message on the network (its own id, sent in
	// the session's order), not a message to the recipient: neither is charged.
	KindEdit   Kind = "edit"
	KindRevoke Kind = "revoke"
	// The Cloud API's own kinds (DESIGN.md section 17): a template (Template), reply buttons
	// (Text, Buttons, Header, Footer), a list (Text, ListButton, Sections, Header, Footer).
	KindTemplate Kind = "template"
	KindButtons  Kind = "buttons"
	KindList     Kind = "list"
	// KindButtonReply is an incoming message only: the contact tapped a reply button or a list
	// row (Text is its title, ButtonID its id; ReplyTo the message that offered it).
	KindButtonReply Kind = "button_reply"
)

// SendKinds are the kinds POST /api/v1/messages/send takes (edits and revokes have routes of
// their own).
var SendKinds = []Kind{KindText, KindImage, KindVideo, KindAudio, KindDocument, KindSticker,
	KindLocation, KindContact, KindPoll, KindReaction, KindTemplate, KindButtons, KindList}

// Media tells whether the kind carries a media file.
func (k Kind) Media() bool {
	switch k {
	case KindImage, KindVideo, KindAudio, KindDocument, KindSticker:
		return true
	}
	return false
}

// Charged tells whether a message of the kind counts against the month's allowance: every
// kind but edits and revokes, which change a message already counted.
func (k Kind) Charged() bool { return k != KindEdit && k != KindRevoke }

// Valid tells whether k is a kind the gateway knows.
func (k Kind) Valid() bool { return slices.Contains(SendKinds, k) || k == KindEdit || k == KindRevoke }

// Poll limits (WhatsApp's own).
const (
	PollMinOptions = 2
	PollMaxOptions = 12
)

// Message is one message. Outbound, ID is chosen by the gateway (the outbox id) and is passed
// to the network as the message id, so a re-send after a crash is not a duplicate; inbound
// (network.Incoming), it is the network's id and media bytes are not carried (Size is).
//
// The JSON names are how outboxes store a message: absent fields are left out.
type Message struct {
	ID string `json:"id"`
	// To is the recipient: digits with country code, no plus sign, or a group id (IsGroup).
	To       string  `json:"to"`
	Kind     Kind    `json:"kind"`
	Text     string  `json:"text,omitempty"`     // text body (text; the new text of an edit)
	Caption  string  `json:"caption,omitempty"`  // image, video, document
	FileName string  `json:"fileName,omitempty"` // media file name
	MimeType string  `json:"mimeType,omitempty"` // media MIME type, sniffed by the gateway
	Data     []byte  `json:"data,omitempty"`     // media bytes
	Size     int64   `json:"size,omitempty"`     // media size when Data is not carried (incoming)
	PTT      bool    `json:"ptt,omitempty"`      // audio: a voice note
	Lat      float64 `json:"lat,omitempty"`
	Lng      float64 `json:"lng,omitempty"`
	Address  string  `json:"address,omitempty"` // location address (its title when LocationName is empty)
	// LocationName is the place's name (a location's title).
	LocationName string `json:"locationName,omitempty"`
	// Contact card.
	ContactName  string `json:"contactName,omitempty"`
	ContactPhone string `json:"contactPhone,omitempty"`
	// Poll.
	Question string   `json:"question,omitempty"`
	Options  []string `json:"options,omitempty"`
	Multiple bool     `json:"multiple,omitempty"` // voters may pick more than one option
	// Emoji of a reaction ("" takes the reaction back).
	Emoji string `json:"emoji,omitempty"`
	// ReplyTo is the message this one quotes (any kind may reply).
	ReplyTo *MessageRef `json:"replyTo,omitempty"`
	// Target is the message a reaction, an edit or a revoke is about.
	Target *MessageRef `json:"target,omitempty"`
	// Typing: the recipient sees "typing…" (or "recording…" before a voice note) for 1-3 s
	// before the message.
	Typing bool `json:"typing,omitempty"`
	// MediaURL is where the media was fetched from when it was given as a link: a network that
	// can send media by link (the Cloud API) sends the link instead of uploading Data.
	MediaURL string `json:"mediaUrl,omitempty"`
	// Template: a template message (KindTemplate).
	Template *TemplateSend `json:"template,omitempty"`
	// ColdTemplate is the template this message goes as when it must reach a cold contact
	// over a cloud session (a store topic's; nil: the account's cold template).
	ColdTemplate *TemplateSend `json:"coldTemplate,omitempty"`
	// Interactive messages (KindButtons, KindList): Text is the body.
	Buttons    []Button      `json:"buttons,omitempty"`
	ListButton string        `json:"listButton,omitempty"` // a list's button text
	Sections   []ListSection `json:"sections,omitempty"`
	Header     string        `json:"header,omitempty"`
	Footer     string        `json:"footer,omitempty"`
	// ButtonID is the id of the button or list row an incoming KindButtonReply tapped.
	ButtonID string `json:"buttonId,omitempty"`
}

// MessageRef names an earlier message of a conversation, as a reply quotes it or a reaction,
// an edit or a revoke points at it: its id, who sent it (the session itself, or a contact by
// phone and LID) and, for a quote, what it said. Its JSON is the API's Quoted, in events,
// history items and the records alike.
type MessageRef struct {
	ID string `json:"id"`
	// FromMe: the session sent it; else From (phone) and FromLID (lid) name its sender.
	FromMe  bool   `json:"fromMe"`
	From    string `json:"phone,omitempty"`
	FromLID string `json:"lid,omitempty"`
	// Group is the group it was written in ("" for a direct message).
	Group string `json:"group,omitempty"`
	Kind  Kind   `json:"type,omitempty"`
	Text  string `json:"text,omitempty"` // its text, or its media's caption (quotes)
}

// Preview is the text a quote of m shows: its text, caption, poll question, place or contact.
func (m Message) Preview() string {
	return cmp.Or(m.Text, m.Caption, m.Question, m.LocationName, m.Address, m.ContactName, m.FileName)
}

// GroupSuffix ends a group's id (WhatsApp's group server).
const GroupSuffix = "@g.us"

// IsGroup tells whether a recipient is a group id rather than a phone number.
func IsGroup(to string) bool { return strings.HasSuffix(to, GroupSuffix) }

// Group is a group the session is in (DESIGN.md section 16).
type Group struct {
	ID           string        `json:"id"` // <digits>@g.us
	Name         string        `json:"name"`
	Participants []GroupMember `json:"participants"`
	// Admin: the session's phone administers the group (may add and remove, and share its link).
	Admin bool `json:"admin"`
}

// GroupMember is one participant of a group.
type GroupMember struct {
	Phone string `json:"phone"`
	LID   string `json:"lid,omitempty"`
	Admin bool   `json:"admin"`
}

// NumberCheck is the network's answer about one number: whether it has an account, and its
// LID where the network gives one.
type NumberCheck struct {
	Phone     string `json:"phone"`
	OnNetwork bool   `json:"onNetwork"`
	LID       string `json:"lid,omitempty"`
}

// MessageStatus is where a message is in its life (DESIGN.md section 9):
// queued → sent → delivered → read, or failed, or cancelled (revoked while still queued).
type MessageStatus = string

// Message statuses.
const (
	MsgQueued    MessageStatus = "queued"
	MsgSent      MessageStatus = "sent"
	MsgDelivered MessageStatus = "delivered"
	MsgRead      MessageStatus = "read"
	MsgFailed    MessageStatus = "failed"
	MsgCancelled MessageStatus = "cancelled"
)

// StatusRank orders statuses: a receipt never moves a message backwards (a read receipt may
// overtake the delivered one).
func StatusRank(s MessageStatus) int {
	switch s {
	case MsgScheduled:
		return -1 // before queued: a scheduled message is queued at its time
	case MsgQueued:
		return 0
	case MsgSent:
		return 1
	case MsgDelivered:
		return 2
	case MsgRead:
		return 3
	case MsgFailed, MsgCancelled:
		return 4
	}
	return -1
}

// StatusChange is one step of a message's history.
type StatusChange struct {
	Status MessageStatus `json:"status"`
	At     Millis        `json:"at"`
	// Category is the pricing category Meta gave with a Cloud API status (marketing, utility,
	// authentication, service...; "" elsewhere).
	Category string `json:"category,omitempty"`
	// Code and Error: why, for a failure the network reported before the message's outcome
	// was known, recorded on its own (status failed; "" elsewhere).
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// OutboxEntry is one accepted message: committed before it goes to the network, its outcome
// recorded after. An entry without an outcome at boot is sent again with the same id, which the
// network treats as the same message.
type OutboxEntry struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId"`
	UserID    string `json:"userId"`
	Origin    string `json:"origin"` // api, dashboard, campaign:<id>, store:<shop>
	// From is the phone the session was linked to at accept: the message is never sent from
	// another phone ("" for entries accepted before it was recorded).
	From      string        `json:"from,omitempty"`
	Message   Message       `json:"message"`
	Status    MessageStatus `json:"status"`
	NetworkID string        `json:"networkId,omitempty"`
	// LID is the recipient's network-internal id, as the network named it when it took the
	// message ("" when it gave none).
	LID      string `json:"lid,omitempty"`
	SentAt   Millis `json:"sentAt,omitempty"` // 0 until sent
	Code     string `json:"code,omitempty"`   // the failure's stable code
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts,omitempty"` // sends tried on the network
	// Via is the session kind the message went through (linked, cloud) when the account
	// routes its messages, and ViaReason why (warm, cold, timelock, window; DESIGN.md
	// section 17). Waiting: it waits for its contact to write (code waiting_for_contact).
	Via       string `json:"via,omitempty"`
	ViaReason string `json:"viaReason,omitempty"`
	Waiting   bool   `json:"waiting,omitempty"`
	// Pricing is the pricing category Meta charged a Cloud API message under.
	Pricing   string         `json:"pricing,omitempty"`
	CreatedAt Millis         `json:"createdAt"`
	UpdatedAt Millis         `json:"updatedAt"`
	History   []StatusChange `json:"history,omitempty"`
	// SendAt is when a message accepted for later goes (0: at once); it is scheduled until
	// then (DESIGN.md section 18).
	SendAt Millis `json:"sendAt,omitempty"`
	// Transactional: sent to a phone on the suppression list because the user said the
	// recipient asked for it (a send's transactional: true).
	Transactional bool `json:"transactional,omitempty"`
}

// Final tells whether the network's outcome is known (sent or beyond, failed, or cancelled).
func (e OutboxEntry) Final() bool {
	return e.Status != MsgQueued && e.Status != MsgScheduled && e.Status != ""
}

// SetStatus records a status change at t (history included). A change that would move the
// message backwards (a late delivered after read) is ignored; it reports whether it applied.
func (e *OutboxEntry) SetStatus(s MessageStatus, t time.Time) bool {
	if e.Status == s || (e.Status != "" && StatusRank(s) < StatusRank(e.Status)) || e.Status == MsgFailed || e.Status == MsgCancelled {
		return false
	}
	e.Status = s
	e.UpdatedAt = MillisOf(t)
	e.History = append(e.History, StatusChange{Status: s, At: MillisOf(t)})
	return true
}

// Millis is a time in Unix milliseconds. Outbox entries are encoded twice per message, and
// encoding time.Time as text cost about 5 % of a send's CPU (profiled): an integer is cheap.
type Millis int64

// MillisOf converts a time.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// Time converts back (UTC).
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)).UTC() }

// WebMessageID writes "3EB0" and b in upper-case hex into one string, the shape of a WhatsApp
// Web message id: one allocation (the hex encoding, its upper-casing and the concatenation
// were three, and a tenth of the accept's own work in the send path's profile).
func WebMessageID(b *[10]byte) string {
	out := WebMessageIDBytes(b)
	return string(out[:])
}

// WebMessageIDBytes is WebMessageID's bytes: for a caller that writes the id where it is
// made and makes its string later (outside a lock).
func WebMessageIDBytes(b *[10]byte) [24]byte {
	const digits = "0123456789ABCDEF"
	var out [24]byte
	copy(out[:], "3EB0")
	for i, c := range b {
		out[4+2*i], out[5+2*i] = digits[c>>4], digits[c&15]
	}
	return out
}
