package cloudapi

import (
	"encoding/json"
	"strconv"
)

// Message types: a SendRequest's and an InboundMessage's Type.
const (
	TypeText        = "text"
	TypeImage       = "image"
	TypeVideo       = "video"
	TypeAudio       = "audio"
	TypeDocument    = "document"
	TypeSticker     = "sticker"
	TypeLocation    = "location"
	TypeContacts    = "contacts"
	TypeReaction    = "reaction"
	TypeInteractive = "interactive"
	TypeTemplate    = "template"
	// Incoming only: a template's quick-reply button tapped, an unsupported message.
	TypeButton      = "button"
	TypeUnsupported = "unsupported"
)

// Interactive types: Interactive.Type (sent) and InboundInteractive.Type (replies).
const (
	InteractiveButton      = "button"
	InteractiveList        = "list"
	InteractiveButtonReply = "button_reply"
	InteractiveListReply   = "list_reply"
)

// SendRequest is the body of POST /{version}/{phone-number-id}/messages: a message of one Type
// (its object in the field of that name), or a read mark (Status "read", MessageID).
type SendRequest struct {
	MessagingProduct string `json:"messaging_product"`
	// RecipientType is "individual" (the default) or "group".
	RecipientType string `json:"recipient_type,omitempty"`
	To            string `json:"to,omitempty"`
	Type          string `json:"type,omitempty"`
	// Context makes the message a reply to Context.MessageID (a wamid).
	Context *Context `json:"context,omitempty"`
	// BizOpaqueCallbackData comes back in the message's status webhooks (at most 512 bytes):
	// the gateway puts its own message id there.
	BizOpaqueCallbackData string `json:"biz_opaque_callback_data,omitempty"`

	Text        *Text        `json:"text,omitempty"`
	Image       *Media       `json:"image,omitempty"`
	Video       *Media       `json:"video,omitempty"`
	Audio       *Media       `json:"audio,omitempty"`
	Document    *Media       `json:"document,omitempty"`
	Sticker     *Media       `json:"sticker,omitempty"`
	Location    *Location    `json:"location,omitempty"`
	Contacts    []Contact    `json:"contacts,omitempty"`
	Reaction    *Reaction    `json:"reaction,omitempty"`
	Interactive *Interactive `json:"interactive,omitempty"`
	Template    *Template    `json:"template,omitempty"`

	// A read mark: Status "read" and the incoming message's id, with a typing indicator.
	Status          string           `json:"status,omitempty"`
	MessageID       string           `json:"message_id,omitempty"`
	TypingIndicator *TypingIndicator `json:"typing_indicator,omitempty"`
}

// MaxCallbackData bounds BizOpaqueCallbackData.
const MaxCallbackData = 512

// Context names the message a reply quotes.
type Context struct {
	MessageID string `json:"message_id"`
}

// Text is a text message's body.
type Text struct {
	Body       string `json:"body"`
	PreviewURL bool   `json:"preview_url,omitempty"`
}

// Media is an image, video, audio, document or sticker: by ID (uploaded to /media) or Link.
type Media struct {
	ID       string `json:"id,omitempty"`
	Link     string `json:"link,omitempty"`
	Caption  string `json:"caption,omitempty"`
	Filename string `json:"filename,omitempty"`
	// Voice: an Ogg/Opus audio shown as a voice message.
	Voice bool `json:"voice,omitempty"`
}

// Location is a place.
type Location struct {
	Latitude  Coord  `json:"latitude"`
	Longitude Coord  `json:"longitude"`
	Name      string `json:"name,omitempty"`
	Address   string `json:"address,omitempty"`
	URL       string `json:"url,omitempty"` // incoming only
}

// Coord is a latitude or longitude: a number, which Meta's incoming webhooks may write as a
// string (whatsapp-api-js types it so); either is read, a number is written.
type Coord float64

// UnmarshalJSON reads a number or a string holding one.
func (c *Coord) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		*c = Coord(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*c = Coord(f)
	return nil
}

// Contact is a contact card.
type Contact struct {
	Name   ContactName    `json:"name"`
	Phones []ContactPhone `json:"phones,omitempty"`
}

// ContactName is a card's name; FormattedName is required.
type ContactName struct {
	FormattedName string `json:"formatted_name"`
	FirstName     string `json:"first_name,omitempty"`
	LastName      string `json:"last_name,omitempty"`
}

// ContactPhone is one of a card's numbers.
type ContactPhone struct {
	Phone string `json:"phone,omitempty"`
	WaID  string `json:"wa_id,omitempty"`
	Type  string `json:"type,omitempty"`
}

// Reaction is an emoji on a message (MessageID, a wamid); "" takes it back.
type Reaction struct {
	MessageID string `json:"message_id"`
	Emoji     string `json:"emoji"`
}

// Interactive is a reply-buttons (Type "button") or list (Type "list") message.
type Interactive struct {
	Type   string            `json:"type"`
	Header *InteractiveHead  `json:"header,omitempty"`
	Body   *InteractiveText  `json:"body,omitempty"`
	Footer *InteractiveText  `json:"footer,omitempty"`
	Action InteractiveAction `json:"action"`
}

// InteractiveHead is an interactive message's header (the gateway sends text headers).
type InteractiveHead struct {
	Type string `json:"type"` // text
	Text string `json:"text,omitempty"`
}

// InteractiveText is a body or footer.
type InteractiveText struct {
	Text string `json:"text"`
}

// InteractiveAction is the buttons (1 to 3) or the list (its button text and sections).
type InteractiveAction struct {
	Buttons  []ActionButton `json:"buttons,omitempty"`
	Button   string         `json:"button,omitempty"`
	Sections []Section      `json:"sections,omitempty"`
}

// ActionButton is one reply button (Type "reply").
type ActionButton struct {
	Type  string `json:"type"`
	Reply Choice `json:"reply"`
}

// Choice is a reply button (as sent, and as tapped: button_reply) or a list row (list_reply).
type Choice struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// Section is one section of a list.
type Section struct {
	Title string   `json:"title,omitempty"`
	Rows  []Choice `json:"rows"`
}

// Template is a template message: its name, language and the values of its components'
// parameters.
type Template struct {
	Name       string      `json:"name"`
	Language   Language    `json:"language"`
	Components []Component `json:"components,omitempty"`
}

// Language is a template's language (Policy "deterministic").
type Language struct {
	Code   string `json:"code"`
	Policy string `json:"policy,omitempty"`
}

// Component carries the parameters of one of a template's components (Type "body",
// "header", "button").
type Component struct {
	Type       string      `json:"type"`
	SubType    string      `json:"sub_type,omitempty"`
	Index      string      `json:"index,omitempty"`
	Parameters []Parameter `json:"parameters,omitempty"`
}

// Parameter is one parameter's value (Type "text"); ParameterName for named templates.
type Parameter struct {
	Type          string `json:"type"`
	ParameterName string `json:"parameter_name,omitempty"`
	Text          string `json:"text,omitempty"`
	Payload       string `json:"payload,omitempty"`
}

// TypingIndicator shows "typing…" with a read mark (Type "text").
type TypingIndicator struct {
	Type string `json:"type"`
}
