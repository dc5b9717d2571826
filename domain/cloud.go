package domain

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The official WhatsApp Cloud API as a second network, and routing per message (DESIGN.md
// section 17). A session is of kind linked (a device linked by QR or code) or cloud (a Cloud API
// phone number at Meta); an account with both routes each message over one of them.

// Session kinds (Session.Kind; "" is linked, as every session was before cloud ones).
const (
	SessionLinked = "linked"
	SessionCloud  = "cloud"
)

// IsCloud tells whether the session is a Cloud API phone number.
func (s Session) IsCloud() bool { return s.Kind == SessionCloud }

// KindName is the session's kind as the API shows it (linked or cloud).
func (s Session) KindName() string {
	if s.IsCloud() {
		return SessionCloud
	}
	return SessionLinked
}

// CloudNumber is a cloud session's phone number at Meta: what connect checked with the Graph
// API and the dashboard shows, and its credentials sealed with GATEWAY_SECRET_KEY (never shown
// again, never in an answer).
type CloudNumber struct {
	PhoneNumberID string `json:"phoneNumberId"`
	WABAID        string `json:"wabaId"`
	// DisplayPhone is the number as Meta shows it; the session's Phone is its digits.
	DisplayPhone string `json:"displayPhone,omitempty"`
	VerifiedName string `json:"verifiedName,omitempty"`
	Quality      string `json:"quality,omitempty"` // GREEN, YELLOW, RED, UNKNOWN
	// Throughput is how many messages a second Meta takes from the number (DefaultThroughput
	// when the API does not say): the cloud session's pacing.
	Throughput int `json:"throughput,omitempty"`
	// SealedToken and SealedSecret are the access token and the app secret, sealed.
	SealedToken  string `json:"sealedToken,omitempty"`
	SealedSecret string `json:"sealedSecret,omitempty"`
	// VerifyHash is the SHA-256 (hex) of the webhook verify token shown once at connect.
	VerifyHash  string    `json:"verifyHash,omitempty"`
	ConnectedAt time.Time `json:"connectedAt"`
}

// CloudAccount is a cloud number's credentials in the clear, as the network adapter uses them:
// in memory only (the records hold them sealed, CloudNumber).
type CloudAccount struct {
	PhoneNumberID string
	WABAID        string
	AccessToken   string
	AppSecret     string
	// Phone is the number's digits (the session's phone).
	Phone string
}

// SendRecord is one message's send at a network that assigns ids of its own and does not dedupe
// on the gateway's (the Cloud API): begun (the request went out), and the network's id once it
// took the message.
type SendRecord struct {
	Begun     time.Time `json:"begun"`
	NetworkID string    `json:"networkId,omitempty"`
}

// CloudResend is a message Meta failed for its rate limits in a status webhook, kept until it is
// sent again (through restarts and a cluster's moves): when (Due), and the id Meta gave the try
// it failed (Failed; a later try Meta took is not sent again).
type CloudResend struct {
	Due    time.Time `json:"due"`
	Failed string    `json:"failed,omitempty"`
}

// TemplateSet is a cloud session's templates as last synced from Meta.
type TemplateSet struct {
	SyncedAt  time.Time       `json:"syncedAt"`
	Templates []CloudTemplate `json:"templates"`
}

// Find returns the template of a name and language ("" language: the first of that name).
func (s TemplateSet) Find(name, language string) (CloudTemplate, bool) {
	for _, t := range s.Templates {
		if t.Name == name && (language == "" || t.Language == language) {
			return t, true
		}
	}
	return CloudTemplate{}, false
}

// DefaultThroughput is the messages a second Meta takes from a Cloud API number by default
// (developers.facebook.com/documentation/business-messaging/whatsapp/throughput: 80, up to
// 1,000 after an automatic upgrade).
const DefaultThroughput = 80

// CloudPacing is a cloud session's pacing: Meta's throughput, instead of the linked network's
// protections (DESIGN.md section 17): a gap of 1/throughput seconds, rounded up to the
// millisecond, and nothing else.
func CloudPacing(throughput int) Pacing {
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	return Pacing{MinGapMs: int64((1000 + throughput - 1) / throughput)}
}

// Routing modes of an account with a linked and a cloud session (PATCH /api/client/routing).
const (
	RouteLinked = "linked"
	RouteCloud  = "cloud"
	RouteAuto   = "auto"
)

// Routing is how an account's messages choose between its linked and its cloud session.
type Routing struct {
	// Mode is linked, cloud or auto ("" = not set: the linked session when there is one).
	Mode string `json:"mode"`
	// ColdTemplate is the template a message to a cold contact goes as over the cloud session,
	// with the message's text as its first parameter (nil: such a message waits for the
	// contact to write).
	ColdTemplate *TemplateRef `json:"coldTemplate,omitempty"`
	UpdatedAt    Millis       `json:"updatedAt,omitempty"`
}

// TemplateRef names a Cloud API message template.
type TemplateRef struct {
	Name     string `json:"name"`
	Language string `json:"language"`
}

// Which session a message went through (OutboxEntry.Via), and why (ViaReason).
const (
	ViaLinked = "linked"
	ViaCloud  = "cloud"

	// ViaWarm: over the linked session, where the contact is known (it wrote to that phone,
	// or the phone wrote to it) and no timelock holds it.
	ViaWarm = "warm"
	// ViaCold: over the cloud session to a contact the linked phone does not know, outside
	// its service window: as a template (or waiting for the contact).
	ViaCold = "cold"
	// ViaTimelock: over the cloud session because the linked phone's reach-out timelock holds
	// first messages to this contact.
	ViaTimelock = "timelock"
	// ViaWindow: over the cloud session as it is, inside the contact's 24-hour service window.
	ViaWindow = "window"
)

// ServiceWindow is how long after a contact's last message a Cloud API number may send it any
// message; after it, only an approved template.
const ServiceWindow = 24 * time.Hour

// WaitForContact is how long a message to a cold contact with no template to go as waits for
// the contact to write (status queued, code waiting_for_contact), then fails.
const WaitForContact = 72 * time.Hour

// CodeWaitingForContact is the code a queued message waiting for its contact shows.
const CodeWaitingForContact = "waiting_for_contact"

// TemplateSend is a template message: which template, and its body's parameters in order
// (named templates: Names are their parameters' names, in the same order).
type TemplateSend struct {
	Name     string   `json:"name"`
	Language string   `json:"language"`
	Params   []string `json:"parameters,omitempty"`
	Names    []string `json:"names,omitempty"`
}

// CloudTemplate is one message template of a WhatsApp Business Account, as synced from Meta
// (GET /{waba-id}/message_templates).
type CloudTemplate struct {
	ID       string `json:"id,omitempty"`
	Name     string `json:"name"`
	Language string `json:"language"`
	Category string `json:"category"` // MARKETING, UTILITY, AUTHENTICATION
	Status   string `json:"status"`   // APPROVED, PENDING, REJECTED, PAUSED, DISABLED
	// ParameterFormat is POSITIONAL ({{1}}) or NAMED ({{name}}).
	ParameterFormat string `json:"parameterFormat,omitempty"`
	// Body is the BODY component's text; Components all of them, as Meta wrote them.
	Body       string          `json:"body,omitempty"`
	Components json.RawMessage `json:"components,omitempty"`
}

// TemplateApproved is the status of a template that may be sent.
const TemplateApproved = "APPROVED"

var (
	positionalParam = regexp.MustCompile(`\{\{\s*([0-9]+)\s*\}\}`)
	namedParam      = regexp.MustCompile(`\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}`)
)

// ParamNames lists a named template's body parameters in their order of first appearance
// (nil for a positional one).
func (t CloudTemplate) ParamNames() []string {
	if !strings.EqualFold(t.ParameterFormat, "NAMED") {
		return nil
	}
	var names []string
	for _, m := range namedParam.FindAllStringSubmatch(t.Body, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// BodyParams is how many parameters the template's body takes: its highest {{n}}, or its
// named parameters.
func (t CloudTemplate) BodyParams() int {
	if names := t.ParamNames(); names != nil {
		return len(names)
	}
	n := 0
	for _, m := range positionalParam.FindAllStringSubmatch(t.Body, -1) {
		if v, err := strconv.Atoi(m[1]); err == nil && v > n {
			n = v
		}
	}
	return n
}

// Render is the body with params in place of its parameters (what the contact reads).
func (t CloudTemplate) Render(params []string) string {
	if names := t.ParamNames(); names != nil {
		return namedParam.ReplaceAllStringFunc(t.Body, func(s string) string {
			name := namedParam.FindStringSubmatch(s)[1]
			for i, n := range names {
				if n == name && i < len(params) {
					return params[i]
				}
			}
			return s
		})
	}
	return positionalParam.ReplaceAllStringFunc(t.Body, func(s string) string {
		v, err := strconv.Atoi(positionalParam.FindStringSubmatch(s)[1])
		if err != nil || v < 1 || v > len(params) {
			return s
		}
		return params[v-1]
	})
}

// Button is one reply button of a buttons message (the Cloud API's interactive "button"): ID
// comes back in the contact's reply, Title is what they tap.
type Button struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// ListSection is one section of a list message (the Cloud API's interactive "list").
type ListSection struct {
	Title string    `json:"title,omitempty"`
	Rows  []ListRow `json:"rows"`
}

// ListRow is one choice of a list message.
type ListRow struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// Interactive limits (the Cloud API's own).
const (
	MaxButtons      = 3
	ButtonTitleMax  = 20
	ListButtonMax   = 20
	MaxListSections = 10
	MaxListRows     = 10
	RowTitleMax     = 24
	RowDescMax      = 72
	InteractiveBody = 1024
	HeaderMax       = 60
	FooterMax       = 60
)

// OnCloud tells whether the Cloud API can send a message of the kind: every kind but polls,
// edits and revokes (the Cloud API has none of them).
func (k Kind) OnCloud() bool {
	switch k {
	case KindPoll, KindEdit, KindRevoke:
		return false
	}
	return k.Valid()
}

// OnLinked tells whether a linked session can send a message of the kind: every kind but
// templates, buttons and lists (the Cloud API's own).
func (k Kind) OnLinked() bool {
	switch k {
	case KindTemplate, KindButtons, KindList:
		return false
	}
	return k.Valid()
}

// FrontMedia is a file uploaded to the Cloud-API-shaped front (POST /cloud/{version}/{sessionId}/media,
// DESIGN.md section 20): its owner and session, its type, name and hash, and its bytes (Data, or
// DataRef, the media object holding them on a store that keeps large values apart). A send
// names it by ID as Meta's uploads are named; it lives FrontMediaRetention, as Meta keeps one.
type FrontMedia struct {
	ID        string    `json:"id"`
	UserID    string    `json:"userId"`
	SessionID string    `json:"sessionId"`
	MimeType  string    `json:"mimeType"`
	FileName  string    `json:"fileName,omitempty"`
	SHA256    string    `json:"sha256"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"createdAt"`
	Data      []byte    `json:"data,omitempty"`
	DataRef   string    `json:"dataRef,omitempty"`
}

// FrontMediaRetention is how long an upload to the front is kept (Meta keeps one 30 days).
const FrontMediaRetention = 30 * 24 * time.Hour

// FrontMediaPrefix starts every front media id, so GET /cloud/{version}/{id} tells a medium from
// a session.
const FrontMediaPrefix = "media_"
